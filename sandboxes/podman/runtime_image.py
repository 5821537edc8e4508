"""The env runtime image: the base image with agentenv-local (the env SDK) installed, for envs in containers.

    ref = ensure_runtime_image(config)             # localhost/agentenv/env-runtime:<digest>
    build_env_image(Path("examples/envs/echo"))     # FROM ${RUNTIME}: localhost/agentenv/echo:<digest>

How it is built: this project is packed as a wheel on the host (`pip wheel --no-deps`, under a second); the
host's pip downloads its runtime dependencies as wheels for the base image's Python and platform (asked of
the base image once per build), pinned to the versions installed next to this process, so the env SDK in
the container is the one the host runs and tests; pip also brings a pip wheel. The Containerfile FROM the
base image makes a venv at /opt/agentenv (`python3 -m venv --without-pip`: Debian's python3 has no pip or
ensurepip) and installs the wheels by running pip from its wheel with `--no-index`. The build itself runs
with the network off: whatever lets the host's pip reach the package index (its config, a proxy's CA, a
local mirror) is all it needs.

The tag is a digest of what goes into the image: the project's Python sources and pyproject.toml, the
Containerfile, the pins and the base image. An unchanged project finds its image and builds nothing
(no wheel either); a changed one builds a new tag.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentenv_local.entry_points import normalized_name

from . import images

RUNTIME_NAME = "env-runtime"
PROJECT = "agentenv-local"
SOURCE_DIRS = ("agentenv_local", "sandboxes", "stores", "tui")
VENV = "/opt/agentenv"
# Not needed in the runtime, or managed by the build itself.
_UNPINNED = {"agentenv-local", "pip", "setuptools", "wheel"}

CONTAINERFILE = f"""\
ARG BASE
FROM ${{BASE}}
COPY wheels/ /tmp/agentenv-build/
RUN python3 -m venv --without-pip {VENV} \\
 && set -- /tmp/agentenv-build/pip-*.whl \\
 && {VENV}/bin/python "$1/pip" install --no-index --find-links /tmp/agentenv-build --no-cache-dir \\
      --disable-pip-version-check --no-input --progress-bar off agentenv-local \\
 && {VENV}/bin/python -c "import agentenv_local.env, mcp, uvicorn" \\
 && rm -rf /tmp/agentenv-build
ENV PATH={VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \\
    PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 LANG=C.UTF-8
WORKDIR /app
"""


class RuntimeImageError(images.ImageBuildError):
    """The env runtime image could not be built."""


def project_root() -> Path:
    """The folder with this project's pyproject.toml (a source checkout)."""
    root = Path(__file__).resolve().parents[2]
    if not (root / "pyproject.toml").is_file() or not (root / "agentenv_local").is_dir():
        raise RuntimeImageError(
            f"cannot build the env runtime image: {root} is not an agentenv-local source checkout",
            hint="build it from a checkout of the project (the image is made from its sources)")
    return root


def _source_files(root: Path) -> list[Path]:
    out = [root / "pyproject.toml"]
    for top in SOURCE_DIRS:
        for folder, dirs, files in os.walk(root / top):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
            out += [Path(folder) / f for f in sorted(files) if not f.endswith((".pyc", ".pyo"))]
    return out


_REQUIREMENT_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _requirement_names(requirements: list[str]) -> list[str]:
    """The distribution names of requirements, leaving out those only an extra asks for (`; extra == "x"`):
    the image installs agentenv-local without extras."""
    names = []
    for line in requirements:
        requirement, _, marker = line.partition(";")
        found = _REQUIREMENT_NAME.match(requirement)
        if found and "extra" not in marker:
            names.append(normalized_name(found.group(1)))
    return names


def _project_requirements(root: Path) -> list[str]:
    import tomllib

    project = tomllib.loads((root / "pyproject.toml").read_text()).get("project", {})
    return [str(line) for line in project.get("dependencies", [])]


def pins(root: Path | None = None) -> str:
    """`name==version` of agentenv-local's runtime dependencies (the closure of pyproject.toml's
    dependencies) as installed next to this process: the image gets the versions the host runs and tests.

    Only the closure, not every distribution beside this process: a plugin, a test tool or a second venv that
    sees this checkout (and one more distribution) must find the same image, not build its own runtime and
    prune the one every other process on the machine is building FROM."""
    installed: dict[str, importlib.metadata.Distribution] = {}
    for dist in importlib.metadata.distributions():
        # an email.message.Message at runtime; typeshed's PackageMetadata protocol leaves out get()
        key = normalized_name((dist.metadata.get("Name") or "").strip())  # type: ignore[attr-defined]
        if key and key not in installed and dist.version:  # the first on sys.path wins, as for imports
            installed[key] = dist
    seen: dict[str, str] = {}
    todo = _requirement_names(_project_requirements(root or project_root()))
    while todo:
        key = todo.pop()
        needed = installed.get(key)
        if key in seen or key in _UNPINNED or needed is None:  # not installed: a marker left it out here
            continue
        seen[key] = f"{needed.metadata['Name'].strip()}=={needed.version}"
        todo += _requirement_names(needed.requires or [])
    return "\n".join(seen[k] for k in sorted(seen)) + "\n"


def runtime_digest(config: dict[str, Any] | None = None, root: Path | None = None) -> str:
    root = root or project_root()
    h = hashlib.sha256()
    h.update(f"base\0{images.base_image_ref(config)}\0containerfile\0{CONTAINERFILE}\0pins\0{pins(root)}\0".encode())
    for path in _source_files(root):
        h.update(f"file\0{path.relative_to(root).as_posix()}\0".encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def runtime_image_ref(config: dict[str, Any] | None = None) -> str:
    return images.image_ref(RUNTIME_NAME, runtime_digest(config)[:16])


def _target(base: str, config: dict[str, Any] | None) -> tuple[str, str, str]:
    """(python version "3.11", machine "x86_64", glibc "2.36") of the base image."""
    from .engine import run_podman

    code = ("import platform, sys; print('%d.%d' % sys.version_info[:2], platform.machine(), "
            "platform.libc_ver()[1] or '0')")
    proc = run_podman(["run", "--rm", "--network", "none", base, "python3", "-c", code], config, timeout=120)
    parts = proc.stdout.decode(errors="replace").split()
    if proc.returncode != 0 or len(parts) != 3:
        raise RuntimeImageError(f"cannot ask the base image {base} for its Python and platform: "
                                f"{proc.stderr.decode(errors='replace').strip()}")
    return parts[0], parts[1], parts[2]


def _platforms(machine: str, glibc: str) -> list[str]:
    """The manylinux tags a glibc `glibc` on `machine` runs (newest first)."""
    try:
        major, minor = (int(p) for p in glibc.split(".")[:2])
    except ValueError:
        major, minor = 2, 17
    tags = [f"manylinux_2_{y}_{machine}" for y in range(minor if major == 2 else 17, 4, -1)]
    return tags + [f"manylinux2014_{machine}", f"manylinux2010_{machine}", f"manylinux1_{machine}"]


def _wheelhouse(project_wheel: Path, into: Path, target: tuple[str, str, str], constraints: Path) -> None:
    """Download the project's dependencies (and pip) as wheels for `target` into `into`."""
    python, machine, glibc = target
    argv = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "-q", "-d", str(into),
            "--only-binary=:all:", "--python-version", python, "--implementation", "cp", "-c", str(constraints)]
    for tag in _platforms(machine, glibc):
        argv += ["--platform", tag]
    proc = subprocess.run([*argv, str(project_wheel), "pip"], check=False, capture_output=True, text=True,
                          timeout=1800)
    if proc.returncode != 0:
        lines = [ln for ln in (proc.stderr or proc.stdout).strip().splitlines() if "is ignored" not in ln]
        raise RuntimeImageError(
            f"cannot download agentenv-local's dependencies as wheels for Python {python} on {machine} "
            f"(glibc {glibc}) for the env runtime image", problems=lines[-15:],
            hint="check that `pip download` reaches the package index (or its mirror) from here")


def _project_wheel(root: Path, into: Path) -> Path:
    into.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                           "--disable-pip-version-check", "-q", str(root), "-w", str(into)],
                          check=False, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:  # no hatchling next to us: let pip fetch the build backend
        proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check",
                               "-q", str(root), "-w", str(into)], check=False, capture_output=True, text=True,
                              timeout=600)
    wheels = sorted(into.glob("agentenv_local-*.whl"))
    if proc.returncode != 0 or not wheels:
        raise RuntimeImageError("cannot build a wheel of agentenv-local for the env runtime image",
                                problems=(proc.stderr or proc.stdout).strip().splitlines()[-15:],
                                hint="check that `pip wheel --no-deps .` works in the project folder")
    return wheels[-1]


def ensure_runtime_image(config: dict[str, Any] | None = None, *,
                         on_line: Callable[[str], None] | None = None) -> str:
    """The env runtime image's ref, built first when this project's sources have no image yet."""
    root = project_root()
    digest = runtime_digest(config, root)
    version = digest[:16]
    ref = images.image_ref(RUNTIME_NAME, version)
    images.mark_used(ref)  # before it is looked for: from now on no other process's prune takes it
    if images.exists(ref, config):
        return ref
    base = images.ensure_base_image(config, on_line=on_line)
    with images.build_lock(f"ensure-{ref}"):
        if images.exists(ref, config):  # another process built it while this one waited for the lock
            return ref
        _build_runtime_image(root, ref, version, base, config, on_line)
    prune_older(RUNTIME_NAME, ref, config)
    return ref


def _build_runtime_image(root: Path, ref: str, version: str, base: str, config: dict[str, Any] | None,
                         on_line: Callable[[str], None] | None) -> None:
    say = on_line or (lambda _line: None)
    say(f"building the env runtime image {ref} (agentenv-local and its dependencies; once per source change)")
    with tempfile.TemporaryDirectory(prefix="agentenv-runtime-") as tmp:
        context = Path(tmp) / "context"
        wheels = context / "wheels"
        project_wheel = _project_wheel(root, Path(tmp) / "project")
        constraints = Path(tmp) / "constraints.txt"
        constraints.write_text(pins(root))
        say("downloading agentenv-local's dependencies as wheels for the base image")
        _wheelhouse(project_wheel, wheels, _target(base, config), constraints)
        (context / "Containerfile").write_text(CONTAINERFILE)
        try:
            images.build(RUNTIME_NAME, version, context, build_args={"BASE": base}, config=config,
                         on_line=on_line, network=False)
        except images.ImageBuildError as exc:
            raise RuntimeImageError(f"building the env runtime image failed: {exc.message}",
                                    problems=getattr(exc, "problems", None),
                                    hint="see the build's output above") from exc


_AUTO_VERSION = re.compile(r"[0-9a-f]{16}")


def prune_older(name: str, keep: str, config: dict[str, Any] | None = None) -> list[str]:
    """Untag the older digest-tagged (automatic) versions of localhost/agentenv/NAME. `podman rmi` without
    force: one that a container uses stays; one an image is built FROM loses its name, and Podman frees its
    layers with the last such image. Two kinds stay, for another checkout or venv of this machine may be using
    them (two such would otherwise untag each other's in turn): a version built after `keep`, and one handed
    out for use (images.mark_used) within the last IN_USE_GRACE_S. Answers what went."""
    gone: list[str] = []
    try:
        rows = images.list_images(config)
    except Exception:  # tidying up is best effort
        return gone
    kept = next((row for row in rows if keep in row["tags"]), None)
    if kept is None:  # nothing to measure "older" against
        return gone
    for row in rows:
        if row["name"] != name or not _AUTO_VERSION.fullmatch(row["version"] or ""):
            continue
        ref = images.image_ref(name, row["version"])
        if ref != keep and ref in row["tags"] and row["created"] <= kept["created"] \
                and not images.used_within(ref, images.IN_USE_GRACE_S) and images.remove_image(ref, config):
            gone.append(ref)
    images.forget_stale_uses()
    return gone


def build_env_image(folder: Path, name: str | None = None, version: str | None = None, *,
                    config: dict[str, Any] | None = None, on_line: Callable[[str], None] | None = None) -> dict:
    """Build an env folder's Containerfile (FROM ${RUNTIME}) as localhost/agentenv/NAME:VERSION.

    NAME defaults to the folder's name; VERSION to a digest of the folder and the runtime, so a changed
    env or SDK gives a new tag. Answers images.build's dict ({"ref", "image_id", "source_digest", "built"}).
    """
    folder = Path(folder)
    containerfile = next((folder / n for n in ("Containerfile", "Dockerfile") if (folder / n).is_file()), None)
    if containerfile is None:
        raise images.ImageBuildError(f"no Containerfile or Dockerfile in {folder}",
                                     hint="add one: FROM the env runtime (ARG RUNTIME / FROM ${RUNTIME})")
    runtime = ensure_runtime_image(config, on_line=on_line)
    name = name or folder.name.lower()
    args = {"RUNTIME": runtime, "BASE": images.base_image_ref(config)}
    with tempfile.TemporaryDirectory(prefix="agentenv-envimg-") as tmp:
        # The context without caches (an in-process run writes __pycache__ beside server.py).
        context = Path(tmp) / "context"
        shutil.copytree(folder, context, symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".*"))
        containerfile = context / containerfile.name
        auto = version is None
        if version is None:
            version = images.context_digest(context, containerfile, args)[:16]
        result = images.build(name, version, context, containerfile=containerfile, build_args=args, config=config,
                              on_line=on_line)
    if auto and result["built"]:  # the env's earlier automatic versions, then the runtimes they were FROM
        prune_older(name, result["ref"], config)
        prune_older(RUNTIME_NAME, runtime, config)
    return result
