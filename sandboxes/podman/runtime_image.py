"""The env runtime image: the base image with agentenv-local (the env SDK) installed, for envs in containers.

    ref = ensure_runtime_image(config)             # localhost/agentenv/env-runtime:<digest>
    build_env_image(Path("examples/envs/echo"))     # FROM ${RUNTIME}: localhost/agentenv/echo:<digest>

How it is built: this project is packed as a wheel on the host (`pip wheel --no-deps`, under a second), and
a Containerfile FROM the base image makes a venv at /opt/agentenv (`python3 -m venv --without-pip`: Debian's
python3 has no pip or ensurepip) and installs the wheel with its runtime dependencies by running pip from
the pip wheel that the host's Python bundles with ensurepip (so nothing extra is fetched for pip itself).
The dependencies come from the package index, pinned to the versions installed next to this process
(a constraints file), so the env SDK in the container is the one the host runs and tests. The build
needs the package index (network on during `podman build`), once per digest.

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
COPY pip.whl constraints.txt /tmp/agentenv-build/
COPY wheels/ /tmp/agentenv-build/wheels/
RUN python3 -m venv --without-pip {VENV} \\
 && {VENV}/bin/python /tmp/agentenv-build/pip.whl/pip install --no-cache-dir --disable-pip-version-check \\
      --no-input --progress-bar off -c /tmp/agentenv-build/constraints.txt /tmp/agentenv-build/wheels/*.whl \\
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


def pins() -> str:
    """`name==version` of every distribution next to this process (constraints: unused ones are ignored)."""
    seen: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        name = (dist.metadata.get("Name") or "").strip()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key and key not in _UNPINNED and key not in seen and dist.version:
            seen[key] = f"{name}=={dist.version}"
    return "\n".join(seen[k] for k in sorted(seen)) + "\n"


def runtime_digest(config: dict[str, Any] | None = None, root: Path | None = None) -> str:
    root = root or project_root()
    h = hashlib.sha256()
    h.update(f"base\0{images.base_image_ref(config)}\0containerfile\0{CONTAINERFILE}\0pins\0{pins()}\0".encode())
    for path in _source_files(root):
        h.update(f"file\0{path.relative_to(root).as_posix()}\0".encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def runtime_image_ref(config: dict[str, Any] | None = None) -> str:
    return images.image_ref(RUNTIME_NAME, runtime_digest(config)[:16])


def _pip_wheel(into: Path) -> None:
    """Put a pip wheel at `into`: the one ensurepip bundles, else one downloaded from the index."""
    try:
        import ensurepip

        bundled = sorted((Path(ensurepip.__file__).parent / "_bundled").glob("pip-*.whl"))
    except ImportError:
        bundled = []
    if bundled:
        shutil.copyfile(bundled[-1], into)
        return
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                               "-d", tmp, "pip"], capture_output=True, text=True, timeout=300)
        found = sorted(Path(tmp).glob("pip-*.whl"))
        if proc.returncode != 0 or not found:
            raise RuntimeImageError("cannot get a pip wheel for the env runtime image (no ensurepip here, and "
                                    "`pip download pip` failed)",
                                    problems=(proc.stderr or proc.stdout).strip().splitlines()[-10:])
        shutil.copyfile(found[0], into)


def _project_wheel(root: Path, into: Path) -> Path:
    into.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                           "--disable-pip-version-check", "-q", str(root), "-w", str(into)],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:  # no hatchling next to us: let pip fetch the build backend
        proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check",
                               "-q", str(root), "-w", str(into)], capture_output=True, text=True, timeout=600)
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
    if images.exists(ref, config):
        return ref
    base = images.ensure_base_image(config, on_line=on_line)
    say = on_line or (lambda _line: None)
    say(f"building the env runtime image {ref} (agentenv-local and its dependencies; once per source change)")
    with tempfile.TemporaryDirectory(prefix="agentenv-runtime-") as tmp:
        context = Path(tmp)
        _project_wheel(root, context / "wheels")
        _pip_wheel(context / "pip.whl")
        (context / "constraints.txt").write_text(pins())
        (context / "Containerfile").write_text(CONTAINERFILE)
        try:
            images.build(RUNTIME_NAME, version, context, build_args={"BASE": base}, config=config, on_line=on_line)
        except images.ImageBuildError as exc:
            raise RuntimeImageError(f"building the env runtime image failed: {exc.message}",
                                    problems=getattr(exc, "problems", None),
                                    hint="it installs agentenv-local's dependencies from the package index: "
                                         "check that `podman build` can reach it") from exc
    return ref


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
        if version is None:
            version = images.context_digest(context, containerfile, args)[:16]
        return images.build(name, version, context, containerfile=containerfile, build_args=args, config=config,
                            on_line=on_line)
