"""The image store, on Podman's local storage: build, import, find, and the offline base image.

Images we make are tagged `localhost/agentenv/<name>:<version>` and labelled with what they were made
from (`agentenv.image`, `agentenv.version`, `agentenv.source-digest`). Building again from an
unchanged context finds the labelled image and does nothing. Nothing here pulls from a registry.

The base image (Debian with Python 3 and bash) is built from Debian's packages with mmdebstrap on first
use, imported, and kept; its tag carries the recipe's digest, so a changed recipe builds a new one.
`[sandbox.providers.podman] base_image = "IMAGE"` uses an image of yours instead (it needs python3 and
bash for the fast command channel and for scripts).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import subprocess
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from agentenv_local.errors import AgentenvError, NotFoundError

from .engine import podman_binary, podman_env, run_podman, user_config_dir

REPO = "localhost/agentenv"
LABEL_NAME = "agentenv.image"
LABEL_VERSION = "agentenv.version"
LABEL_SOURCE = "agentenv.source-digest"
BASE_SUITE = "bookworm"
BASE_PACKAGES = ("python3", "bash", "ca-certificates")
BASE_MIRROR = "http://deb.debian.org/debian"
_IGNORED_DIRS = {"__pycache__", ".git", ".pytest_cache"}  # never part of what an image is built from
_EXCLUDES = ("/usr/share/doc/*", "/usr/share/man/*", "/usr/share/locale/*", "/usr/share/info/*")


class ImageBuildError(AgentenvError):
    """An image could not be built or imported; nothing was tagged."""


def image_ref(name: str, version: str) -> str:
    return f"{REPO}/{name}:{version}"


def _check_name(name: str, version: str) -> None:
    import re

    if not re.fullmatch(r"[a-z0-9][a-z0-9._/-]{0,127}", name or ""):
        raise ImageBuildError(f"bad image name {name!r}", hint="use lower-case letters, digits and . _ - /")
    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}", version or ""):
        raise ImageBuildError(f"bad image version {version!r}", hint="use letters, digits and . _ -")


def inspect(ref: str, config: dict[str, Any] | None = None) -> dict | None:
    """`podman image inspect` of a local image, or None when it is not in local storage."""
    proc = run_podman(["image", "inspect", ref], config, timeout=60)
    if proc.returncode != 0:
        return None
    data = json.loads(proc.stdout or b"[]")
    return data[0] if data else None


def _file_name(key: str) -> str:
    """`key` as one plain file name (a lock's, a use stamp's): what is not a letter, digit, `-`, `_` or `.` -> `_`."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in key)


@contextlib.contextmanager
def build_lock(key: str, *, shared: bool = False) -> Iterator[None]:
    """One holder at a time on this machine (for this user, whose Podman storage it is) of the lock named `key`;
    with `shared`, any number of shared holders at once, but none while an exclusive one holds it.

    Two processes that need the same missing image (two projects' first runs, the test suite's parallel workers)
    would both build it, side by side, at twice the cost; under the lock the second waits, then finds the image
    by its tag and builds nothing. Not reentrant: a holder must not take the same key again."""
    folder = user_config_dir() / "locks"
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{_file_name(key)}.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# How long a version handed out for use (mark_used) is safe from another process's prune: far longer than the
# moment between handing a ref out and a build FROM it or a container of it starting (then Podman itself keeps
# the image: removals wait for builds in flight, and `rmi` without force leaves an image a container runs).
IN_USE_GRACE_S = 600.0


def _use_stamp(ref: str) -> Path:
    return user_config_dir() / "image-use" / _file_name(ref)


def mark_used(ref: str) -> None:
    """Record that this process is about to use `ref` (build FROM it, start a container of it)."""
    stamp = _use_stamp(ref)
    try:
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.touch()  # an existing stamp gets the time of now
    except OSError:  # a read-only config folder: pruning is the only thing that reads these
        pass


def used_within(ref: str, seconds: float) -> bool:
    try:
        return _use_stamp(ref).stat().st_mtime > time.time() - seconds
    except OSError:
        return False


def forget_stale_uses(older_than_s: float = IN_USE_GRACE_S) -> None:
    """Delete the use stamps older than `older_than_s` (they no longer protect anything)."""
    folder = user_config_dir() / "image-use"
    cutoff = time.time() - older_than_s
    with contextlib.suppress(OSError):
        for stamp in folder.iterdir():
            with contextlib.suppress(OSError):
                if stamp.stat().st_mtime < cutoff:
                    stamp.unlink()


def exists(ref: str, config: dict[str, Any] | None = None) -> bool:
    return run_podman(["image", "exists", ref], config, timeout=60).returncode == 0


def labels_of(info: dict) -> dict[str, str]:
    return dict((info.get("Config") or {}).get("Labels") or info.get("Labels") or {})


# What `podman images` says when another process removed an image while it listed them (Podman reads the list,
# then each image): the listing is asked again, as the image is simply gone.
_REMOVED_WHILE_LISTED = "image not known"
# Our own listings and removals take turns under this machine-wide lock: measured with one process building and
# removing images while another lists them, 7 of 15 listings failed with "image not known" (the suite's parallel
# workers do exactly that), and five quick retries in a row all failed often enough to lose a prune. A removal by
# another tool can still cross a listing; the retries are for that.
_LISTING_LOCK = "podman-images-listing"
# Builds hold this shared while Podman builds, removals exclusive: a build's first step after FROM failed (CI: an
# OpenHands image at `COPY python/`, a probe image at `LABEL`, each once) while another process removed images.
_REMOVALS_LOCK = "podman-image-removals"


def list_images(config: dict[str, Any] | None = None, attempts: int = 5) -> list[dict]:
    with build_lock(_LISTING_LOCK):
        for attempt in range(attempts):
            proc = run_podman(["images", "--filter", f"label={LABEL_NAME}", "--format", "json"], config, timeout=60)
            error = proc.stderr.decode(errors="replace").strip()
            if proc.returncode == 0 or _REMOVED_WHILE_LISTED not in error or attempt == attempts - 1:
                break
    if proc.returncode != 0:
        raise AgentenvError(f"podman images failed: {error}")
    out = []
    for row in json.loads(proc.stdout or b"[]"):
        labels = row.get("Labels") or {}
        out.append({"name": labels.get(LABEL_NAME), "version": labels.get(LABEL_VERSION),
                    "source_digest": labels.get(LABEL_SOURCE), "image_id": row.get("Id"),
                    "digest": row.get("Digest"), "tags": row.get("Names") or [], "size": row.get("Size"),
                    "created": row.get("Created") or 0})
    return sorted(out, key=lambda r: (r["name"] or "", r["version"] or ""))


def remove_image(ref: str, config: dict[str, Any] | None = None, *, force: bool = False) -> bool:
    """`podman rmi REF` (with `force`, also when containers use it); whether it went. Never while one of our
    listings or builds runs (see _LISTING_LOCK, _REMOVALS_LOCK). The builds are waited for first, so that a
    removal held back by a long build does not hold every listing back with it."""
    with build_lock(_REMOVALS_LOCK), build_lock(_LISTING_LOCK):
        return run_podman(["rmi", *(["-f"] if force else []), ref], config, timeout=120).returncode == 0


def context_digest(context: Path, containerfile: Path, build_args: dict[str, str] | None = None) -> str:
    """What a build depends on: every file of the context (path, mode, bytes), the Containerfile, the args."""
    h = hashlib.sha256()
    h.update(b"containerfile\0" + containerfile.read_bytes() + b"\0")
    args = build_args or {}
    for key in sorted(args):
        h.update(f"arg\0{key}={args[key]}\0".encode())
    for folder, dirs, files in os.walk(context):
        dirs[:] = sorted(d for d in dirs if d not in _IGNORED_DIRS)
        for name in sorted(files):
            path = Path(folder) / name
            rel = path.relative_to(context).as_posix()
            st = path.lstat()
            h.update(f"file\0{rel}\0{st.st_mode & 0o777}\0".encode())
            h.update(os.readlink(path).encode() if path.is_symlink() else path.read_bytes())
    return h.hexdigest()


def _find_built(ref: str, digest: str, config: dict[str, Any] | None) -> dict | None:
    info = inspect(ref, config)
    if info is not None and labels_of(info).get(LABEL_SOURCE) == digest:
        return info
    return None


def _stream(argv: list[str], config: dict[str, Any] | None, on_line: Callable[[str], None] | None,
            keep: int = 60) -> tuple[int, list[str]]:
    """Run a podman command, passing each output line to on_line; returns (exit code, last lines)."""
    tail: deque[str] = deque(maxlen=keep)
    proc = subprocess.Popen([podman_binary(config), *argv], env=podman_env(config), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True, errors="replace")
    assert proc.stdout is not None
    for line in proc.stdout:
        line = line.rstrip("\n")
        tail.append(line)
        if on_line is not None:
            on_line(line)
    return proc.wait(), list(tail)


def _failing_step(lines: list[str]) -> str | None:
    steps = [ln for ln in lines if ln.startswith("STEP ")]
    return steps[-1] if steps else None


def build(name: str, version: str, context: Path, *, containerfile: Path | None = None,
          build_args: dict[str, str] | None = None, config: dict[str, Any] | None = None,
          on_line: Callable[[str], None] | None = None, network: bool = True) -> dict:
    """Build `context` (with its Containerfile/Dockerfile) as localhost/agentenv/NAME:VERSION.

    Returns {"ref", "image_id", "source_digest", "built": bool}; an unchanged context is not rebuilt.
    """
    _check_name(name, version)
    context = Path(context)
    if not context.is_dir():
        raise NotFoundError(f"no build context folder {context}")
    if containerfile is None:
        for candidate in ("Containerfile", "Dockerfile"):
            if (context / candidate).is_file():
                containerfile = context / candidate
                break
        else:
            raise ImageBuildError(f"no Containerfile or Dockerfile in {context}",
                                  hint="add one, or pass the file to use")
    containerfile = Path(containerfile)
    ref = image_ref(name, version)
    digest = context_digest(context, containerfile, build_args)
    with build_lock(f"build-{ref}"):
        return _build_unless_built(ref, name, version, digest, context, containerfile, build_args, config, on_line,
                                   network)


def _build_unless_built(ref: str, name: str, version: str, digest: str, context: Path, containerfile: Path,
                        build_args: dict[str, str] | None, config: dict[str, Any] | None,
                        on_line: Callable[[str], None] | None, network: bool) -> dict:
    found = _find_built(ref, digest, config)
    if found is not None:
        return {"ref": ref, "image_id": found["Id"], "source_digest": digest, "built": False}
    argv = ["build", "--quiet=false", "-f", str(containerfile), "-t", ref,
            "--label", f"{LABEL_NAME}={name}", "--label", f"{LABEL_VERSION}={version}",
            "--label", f"{LABEL_SOURCE}={digest}", "--pull=never"]
    if not network:
        argv += ["--network", "none"]
    for key, value in sorted((build_args or {}).items()):
        argv += ["--build-arg", f"{key}={value}"]
    with build_lock(_REMOVALS_LOCK, shared=True):
        code, tail = _stream([*argv, str(context)], config, on_line)
    if code != 0:
        failing = _failing_step(tail)
        said = [ln for ln in tail if ln.startswith(("Error:", "error "))][-1:]  # the cause, in the message itself
        raise ImageBuildError(
            f"building image {ref} failed" + (f" at {failing}" if failing else "") + " (nothing was tagged)"
            + (f": {said[0]}" if said else ""),
            problems=tail[-15:], hint="fix the Containerfile or context and build again")
    info = inspect(ref, config)
    return {"ref": ref, "image_id": info["Id"] if info else None, "source_digest": digest, "built": True}


def import_rootfs(name: str, version: str, tarball: Path, *, changes: list[str] | None = None,
                  config: dict[str, Any] | None = None, source_digest: str | None = None) -> dict:
    """Import a rootfs tarball as localhost/agentenv/NAME:VERSION (skipped when already imported)."""
    _check_name(name, version)
    tarball = Path(tarball)
    if not tarball.is_file():
        raise NotFoundError(f"no rootfs tarball {tarball}")
    ref = image_ref(name, version)
    if source_digest is None:
        h = hashlib.sha256()
        with open(tarball, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        source_digest = h.hexdigest()
    found = _find_built(ref, source_digest, config)
    if found is not None:
        return {"ref": ref, "image_id": found["Id"], "source_digest": source_digest, "built": False}
    argv = ["import", "--quiet"]
    for change in [*(changes or []), f"LABEL {LABEL_NAME}={name}", f"LABEL {LABEL_VERSION}={version}",
                   f"LABEL {LABEL_SOURCE}={source_digest}"]:
        argv += ["--change", change]
    proc = run_podman([*argv, str(tarball), ref], config, timeout=600)
    if proc.returncode != 0:
        raise ImageBuildError(f"importing {tarball} as {ref} failed: "
                              f"{proc.stderr.decode(errors='replace').strip()}")
    info = inspect(ref, config)
    return {"ref": ref, "image_id": info["Id"] if info else None, "source_digest": source_digest, "built": True}


# -- the base image ----------------------------------------------------------------------------
def base_recipe(config: dict[str, Any] | None = None) -> dict:
    cfg = config or {}
    return {"suite": cfg.get("base_suite", BASE_SUITE), "mirror": cfg.get("base_mirror", BASE_MIRROR),
            "packages": sorted(set(BASE_PACKAGES) | set(cfg.get("base_packages", []))), "variant": "essential",
            "excludes": list(_EXCLUDES)}


def base_image_ref(config: dict[str, Any] | None = None) -> str:
    configured = (config or {}).get("base_image")
    if configured:
        return str(configured)
    recipe = json.dumps(base_recipe(config), sort_keys=True).encode()
    return image_ref("base", "py3-" + hashlib.sha256(recipe).hexdigest()[:12])


def ensure_base_image(config: dict[str, Any] | None = None, *, on_line: Callable[[str], None] | None = None,
                      cache_dir: Path | None = None) -> str:
    """The base image's ref, built offline from Debian's packages the first time."""
    ref = base_image_ref(config)
    if exists(ref, config):
        return ref
    with build_lock(f"ensure-{ref}"):
        return _build_base_image(ref, config, on_line, cache_dir)


def _build_base_image(ref: str, config: dict[str, Any] | None, on_line: Callable[[str], None] | None,
                      cache_dir: Path | None) -> str:
    if exists(ref, config):  # another process built it while this one waited for the lock
        return ref
    if (config or {}).get("base_image"):
        raise NotFoundError(f"the configured base_image {ref!r} is not in Podman's local storage",
                            hint=f"build or load it (`podman load`, `podman build -t {ref} ...`), or drop "
                                 "base_image to let agentenv build one")
    import shutil

    mmdebstrap = shutil.which("mmdebstrap")
    if not mmdebstrap:
        raise ImageBuildError(
            "cannot build the base image: mmdebstrap is not installed",
            hint="install it (`sudo apt-get install -y mmdebstrap`, Debian/Ubuntu), or set "
                 "[sandbox.providers.podman] base_image to a local image with python3 and bash")
    recipe = base_recipe(config)
    name, _, version = ref.removeprefix(REPO + "/").partition(":")
    say = on_line or (lambda _line: None)
    say(f"building the base image {ref} from Debian {recipe['suite']} packages (once; about 20 s)")
    with tempfile.TemporaryDirectory(dir=cache_dir) as tmp:
        tarball = Path(tmp) / "rootfs.tar"
        argv = [mmdebstrap, "--quiet", f"--variant={recipe['variant']}",
                f"--include={','.join(recipe['packages'])}"]
        argv += [f"--dpkgopt=path-exclude={p}" for p in recipe["excludes"]]
        argv += [recipe["suite"], str(tarball), recipe["mirror"]]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=1800, check=False)
        if proc.returncode != 0:
            raise ImageBuildError("mmdebstrap could not build the base rootfs",
                                  problems=(proc.stderr or proc.stdout).strip().splitlines()[-15:],
                                  hint=f"check that {recipe['mirror']} is reachable (or set base_mirror)")
        say("importing the base rootfs into Podman")
        import_rootfs(name, version, tarball, config=config, source_digest=ref,
                      changes=["WORKDIR /app", 'CMD ["/bin/bash"]', "ENV LANG=C.UTF-8"])
    return ref
