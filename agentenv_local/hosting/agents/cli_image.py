"""The CLI-agent images: the env runtime image plus Node, for a coding CLI's agent in a container.

    ref = ensure_agent_image(provider, "claude-code")   # localhost/agentenv/agent-claude-code:<digest>
    mounts = agent_mounts("claude-code")                # {"/opt/agent-clis/claude-code": ".cache/agent-clis/..."}

Built through the sandbox provider's image interface (`runtime_image`, `list_images`, `build_image`; Podman's
is sandboxes/podman). What goes in: the env runtime image (agentenv-local in /opt/agentenv) and this machine's
`node` binary with the shared libraries it needs beyond glibc (copied to /usr/local/lib/agentenv-node,
registered with ldconfig). The CLI is not copied in: a container of the image mounts the CLI's npm install from
the setup cache (.cache/agent-clis/NAME, the exact pinned packages scripts/setup-agent-clis.sh installed from
the npm registry) read-only at /opt/agent-clis/NAME, its node_modules/.bin on PATH. The build mounts it the same
way to check the CLI answers --version there. Neither the build nor the agent needs a network.

Why mounted, not copied: a CLI's install is 100-800 MB (OpenHands' venv 788 MB). Copied, each image was as
large and took 40-300 s to build (every source change of agentenv-local makes a new runtime image, so new
CLI-agent images); mounted, the image adds Node's ~100 MB and builds in seconds, and the container runs the
same bytes the host tests run. Why the setup cache and not an `npm install` inside the build: no network and no
npm needed.

The tag is a digest of the runtime image's ref, the node binary, the CLI's lock file and this recipe: an
unchanged input finds its image and builds nothing; a changed one builds a new tag.

OpenHands is a Python 3.12 venv (.cache/agent-clis/openhands-venv) and the runtime image's Python is Debian
bookworm's 3.11, so its container mounts instead the venv's own Python (the prefix its pyvenv.cfg names, a build
of this machine against the same bookworm libraries) and the venv, each at the absolute path it has here (the
interpreter's RUNPATH and the venv's scripts name those paths); its image carries this machine's tmux (OpenHands'
terminal tool runs commands in tmux) with its libraries beyond glibc, and links `openhands` into /usr/local/bin
(the venv's bin stays off PATH: the agent's own `python` is the runtime's). Its digest covers the interpreter,
the venv's installed distributions, tmux and the recipe.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentenv_local.errors import AgentenvError

PROJECT_ROOT = Path(__file__).resolve().parents[3]
CLI_CACHE = PROJECT_ROOT / ".cache" / "agent-clis"  # what scripts/setup-agent-clis.sh fills

CLI_ROOT = "/opt/agent-clis"
IMAGE_REPO = "localhost/agentenv"  # where a provider's build_image tags NAME:VERSION
NODE_LIBS = "/usr/local/lib/agentenv-node"
# The npm CLIs an image can carry: agent name -> (setup cache folder, executable). OpenHands (a Python 3.12 venv)
# has an image of its own recipe (OPENHANDS_CONTAINERFILE).
CLI_BINARIES: dict[str, tuple[str, str]] = {
    "claude-code": ("claude-code", "claude"),
    "codex": ("codex", "codex"),
    "gemini": ("gemini", "gemini"),
    "opencode": ("opencode", "opencode"),
    "pi": ("pi", "pi"),
}
OPENHANDS = "openhands"
OPENHANDS_VENV = "openhands-venv"  # its setup cache folder (a venv: bin/openhands)
CLI_AGENTS = (*CLI_BINARIES, OPENHANDS)  # every coding-CLI agent
TMUX_LIBS = "/usr/local/lib/agentenv-tmux"
# glibc's own libraries: the image's glibc serves them (the host's must be no newer than the image's).
_GLIBC = ("libc.so", "libm.so", "libdl.so", "libpthread.so", "librt.so", "ld-linux", "linux-vdso")

_RUNTIME_PATH = "/opt/agentenv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # the runtime's

# The CLI itself is not copied in: a container of the image mounts it read-only from the setup cache
# (agent_mounts). The build mounts it too, only to check that the CLI answers --version on the image.
CONTAINERFILE = f"""\
ARG RUNTIME
FROM ${{RUNTIME}}
COPY node/ {NODE_LIBS}/
RUN mkdir -p {CLI_ROOT}/@CLI@
RUN --mount=type=bind,source=cli,target={CLI_ROOT}/@CLI@ \\
    mv {NODE_LIBS}/node /usr/local/bin/node \\
 && echo {NODE_LIBS} > /etc/ld.so.conf.d/agentenv-node.conf && ldconfig \\
 && node --version \\
 && HOME=/tmp {CLI_ROOT}/@CLI@/node_modules/.bin/@BINARY@ --version
ENV PATH={CLI_ROOT}/@CLI@/node_modules/.bin:{_RUNTIME_PATH}
"""


OPENHANDS_CONTAINERFILE = f"""\
ARG RUNTIME
FROM ${{RUNTIME}}
COPY tmux/ {TMUX_LIBS}/
RUN mkdir -p @PYTHON@ @VENV@
RUN --mount=type=bind,source=python,target=@PYTHON@ --mount=type=bind,source=venv,target=@VENV@ \\
    mv {TMUX_LIBS}/tmux /usr/local/bin/tmux \\
 && echo {TMUX_LIBS} > /etc/ld.so.conf.d/agentenv-tmux.conf && ldconfig \\
 && tmux -V \\
 && ln -s @VENV@/bin/openhands /usr/local/bin/openhands \\
 && HOME=/tmp OPENHANDS_SUPPRESS_BANNER=1 openhands --version
"""


def containerfile(agent: str) -> str:
    """The recipe of `agent`'s image (its folder and executable written in: ARGs end at FROM)."""
    if agent == OPENHANDS:
        python, venv = openhands_paths()
        return OPENHANDS_CONTAINERFILE.replace("@PYTHON@", str(python)).replace("@VENV@", str(venv))
    return CONTAINERFILE.replace("@CLI@", agent).replace("@BINARY@", CLI_BINARIES[agent][1])


def agent_mounts(agent: str) -> dict[str, str]:
    """What a container of `agent`'s image mounts read-only (container path -> this machine's path): the CLI's
    install from the setup cache; for OpenHands its Python prefix and venv, each at the path it has here."""
    if agent == OPENHANDS:
        python, venv = openhands_paths()
        return {str(python): str(python), str(venv): str(venv)}
    return {f"{CLI_ROOT}/{agent}": str(cli_cache(agent))}


def openhands_paths() -> tuple[Path, Path]:
    """(the Python prefix OpenHands' venv runs on, the venv), as on this machine; one clear error without them."""
    venv = CLI_CACHE / OPENHANDS_VENV
    cfg = venv / "pyvenv.cfg"
    if not (venv / "bin" / "openhands").exists() or not cfg.is_file():
        raise AgentImageError(f"the openhands CLI is not in the setup cache ({venv})",
                              hint="run scripts/setup-agent-clis.sh (it makes a Python 3.12 venv with openhands)")
    home = next((line.split("=", 1)[1].strip() for line in cfg.read_text().splitlines()
                 if line.split("=", 1)[0].strip() == "home"), "")
    prefix = Path(home).parent if home else Path()
    if not home or not (prefix / "lib").is_dir():
        raise AgentImageError(f"the Python of {venv} ({home or 'no home in pyvenv.cfg'}) is not on this machine",
                              hint="run scripts/setup-agent-clis.sh again")
    return prefix, venv


def _binary_with_libraries(name: str) -> tuple[Path, list[Path]]:
    found = shutil.which(name)
    if not found:
        raise AgentImageError(f"no `{name}` on this machine to put in the CLI-agent image",
                              hint=f"install {name} (apt-get install {name})")
    binary = Path(found).resolve()
    return binary, node_libraries(binary)


class AgentImageError(AgentenvError):
    """A CLI-agent image could not be built."""


def cli_cache(agent: str) -> Path:
    """The setup cache folder of `agent`'s CLI; one clear error when it has no image or no install."""
    if agent == OPENHANDS:
        return openhands_paths()[1]
    if agent not in CLI_BINARIES:
        raise AgentImageError(f"no CLI-agent image for {agent!r}", hint="one of: " + ", ".join(CLI_AGENTS))
    folder, binary = CLI_BINARIES[agent]
    path = CLI_CACHE / folder
    if not (path / "node_modules" / ".bin" / binary).exists():
        raise AgentImageError(f"the {agent} CLI is not in the setup cache ({path})",
                              hint="run scripts/setup-agent-clis.sh (it installs the pinned CLIs from npm)")
    return path


def node_binary() -> Path:
    found = shutil.which("node")
    if not found:
        raise AgentImageError("no `node` on this machine to put in the CLI-agent image",
                              hint="install Node.js 20 or newer (scripts/setup.sh --test does)")
    return Path(found).resolve()


def node_libraries(node: Path) -> list[Path]:
    """The shared libraries `node` links beyond glibc (libstdc++, libgcc_s, ...), as `ldd` resolves them."""
    proc = subprocess.run(["ldd", str(node)], check=False, capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise AgentImageError(f"cannot list the libraries of {node}: {proc.stderr.strip() or proc.stdout.strip()}",
                              hint="the node binary must be a dynamically linked ELF of this machine")
    out = []
    for line in proc.stdout.splitlines():
        name, _, rest = line.strip().partition(" => ")
        target = rest.split(" (", 1)[0].strip()
        if target and not name.startswith(_GLIBC) and os.path.isabs(target):
            out.append(Path(target))
    return out


def agent_digest(agent: str, runtime_ref: str) -> str:
    cache = cli_cache(agent)
    h = hashlib.sha256()
    h.update(f"agent\0{agent}\0runtime\0{runtime_ref}\0containerfile\0{containerfile(agent)}\0".encode())
    if agent == OPENHANDS:  # the interpreter, the venv's distributions (name-version.dist-info) and tmux
        python, venv = openhands_paths()
        installed = sorted(p.name for p in venv.glob("lib/python*/site-packages/*.dist-info"))
        h.update(("\0".join(installed) + "\0").encode())
        binaries = [python / "lib" / "libpython3.12.so.1.0", _binary_with_libraries("tmux")[0]]
    else:
        for lock in (cache / "package.json", cache / "node_modules" / ".package-lock.json"):
            h.update(f"file\0{lock.name}\0".encode() + (lock.read_bytes() if lock.is_file() else b""))
        binaries = [node_binary()]
    for binary in binaries:
        if binary.is_file():
            with binary.open("rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
    return h.hexdigest()


def agent_image_name(agent: str) -> str:
    return f"agent-{agent}"


def _copy_tree(source: Path, into: Path, ignore: tuple[str, ...] = ()) -> None:
    """Hard links where the file system allows (the cache is hundreds of MB), copies elsewhere."""
    def link_or_copy(src: str, dst: str) -> object:
        try:
            os.link(src, dst)
            return dst
        except OSError:
            return shutil.copy2(src, dst)

    shutil.copytree(source, into, symlinks=True, copy_function=link_or_copy,
                    ignore=shutil.ignore_patterns(".install-stats", *ignore))


def _images(provider: Any) -> list[dict[str, Any]]:
    """The provider's images (a listing that raced another process removing an image is asked again by the
    provider: sandboxes/podman/images.py list_images)."""
    return list(provider.list_images())


def ensure_agent_image(provider: Any, agent: str, *, on_line: Callable[[str], None] | None = None) -> str:
    """The CLI-agent image of `agent` (a name in CLI_BINARIES) in `provider`'s image store, built first when
    its inputs have none yet. Blocking (builds take a while): call it off the event loop."""
    try:
        return _ensure(provider, agent, on_line)
    except AgentImageError as exc:
        if "STEP 1/" not in exc.message:
            raise
        # Its FROM was gone: another process built a newer runtime image and untagged ours meanwhile.
        return _ensure(provider, agent, on_line)


def _ensure(provider: Any, agent: str, on_line: Callable[[str], None] | None) -> str:
    cache = cli_cache(agent)
    runtime = provider.runtime_image(on_line=on_line)
    name = agent_image_name(agent)
    version = agent_digest(agent, runtime)[:16]
    ref = f"{IMAGE_REPO}/{name}:{version}"
    mark = getattr(provider, "mark_image_used", None)
    if mark is not None:  # before it is looked for: no other process's prune takes it from now on
        mark(ref)
    if any(ref in (row.get("tags") or []) for row in _images(provider)):
        return ref
    say = on_line or (lambda _line: None)
    what = "Python 3.12, tmux and" if agent == OPENHANDS else "Node and"
    say(f"building the CLI-agent image {name}:{version} ({what} the {agent} CLI on the env runtime; once per change)")
    # The context beside the cache, so its hundreds of MB are hard links rather than copies.
    with tempfile.TemporaryDirectory(prefix=".image-", dir=cache.parent.parent) as tmp:
        context = Path(tmp)
        if agent == OPENHANDS:
            _openhands_context(context)
        else:
            node = node_binary()
            (context / "node").mkdir()
            shutil.copy2(node, context / "node" / "node")
            for lib in node_libraries(node):
                shutil.copy2(lib, context / "node" / lib.name)
            _copy_tree(cache, context / "cli")
        (context / "Containerfile").write_text(containerfile(agent))
        try:
            built = provider.build_image(name, version, context, build_args={"RUNTIME": runtime}, on_line=on_line)
        except AgentenvError as exc:
            raise AgentImageError(f"building the {agent} CLI-agent image failed: {exc.message}",
                                  problems=getattr(exc, "problems", None),
                                  hint="see the build's output above") from exc
    _prune_replaced(provider, str(built["ref"]), runtime)
    return str(built["ref"])


def _prune_replaced(provider: Any, ref: str, runtime: str) -> None:
    """A new agent image replaces its older versions (about 1 GB each); untag them, then the runtime image's
    older versions (whose layers Podman frees once no image built FROM them is left), best effort."""
    prune = getattr(provider, "prune_older_images", None)
    if prune is None:
        return
    for keep in (ref, runtime):
        try:
            prune(keep)
        except AgentenvError:
            return


def _openhands_context(context: Path) -> None:
    """The build context of OpenHands' image: its Python prefix (no test suite), the venv and tmux."""
    python, venv = openhands_paths()
    _copy_tree(python, context / "python", ignore=("test", "idle_test", "tkinter", "turtledemo"))
    _copy_tree(venv, context / "venv")
    tmux, libraries = _binary_with_libraries("tmux")
    (context / "tmux").mkdir()
    shutil.copy2(tmux, context / "tmux" / "tmux")
    for lib in libraries:
        shutil.copy2(lib, context / "tmux" / lib.name)
