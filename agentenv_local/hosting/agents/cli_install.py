"""Install a coding CLI into a sandbox that already runs (the `install_agent` step, `agentenv agent install`).

    done = await install_cli(sandbox, "gemini")   # {"command": "/app/.agents/bin/gemini", "version": ..., ...}

The CLI's npm install from the setup cache (.cache/agent-clis/NAME, what scripts/setup-agent-clis.sh put there)
is written into the sandbox's /app/.agents/NAME through the sandbox interface (`write_file`, which never
follows a link), with a launcher /app/.agents/bin/EXECUTABLE that finds its files relative to itself, so it
runs from the process sandbox's work folder as well as from a container's /app. A CLI that is a Node script
gets Node too when the sandbox has none: this machine's `node` and the libraries it needs beyond glibc, in
/app/.agents/node (a `node` launcher sets LD_LIBRARY_PATH for it alone). Works on any provider whose sandboxes
run Linux binaries of this machine (process, Podman); nothing is downloaded.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any

from agentenv_local.errors import AgentenvError

from .cli_image import CLI_BINARIES, cli_cache, node_binary, node_libraries

AGENTS_DIR = ".agents"  # under /app
INSTALL_ROOT = f"/app/{AGENTS_DIR}"

_LAUNCHER = """#!/bin/sh
# agentenv: the {agent} CLI installed by install_agent
here=$(CDPATH= cd -- "$(dirname -- "$0")/.." && pwd)
PATH="$here/node:$PATH" exec "$here/{agent}/node_modules/{target}" "$@"
"""
_NODE_LAUNCHER = """#!/bin/sh
# agentenv: Node with the libraries it needs beyond glibc
here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$here/lib/node" "$@"
"""


class CliInstallError(AgentenvError):
    """A CLI could not be installed into a sandbox."""


def _entry_target(cache: Path, binary: str) -> str:
    """The CLI's entry point, relative to node_modules (what node_modules/.bin/BINARY links to)."""
    link = cache / "node_modules" / ".bin" / binary
    target = os.readlink(link) if link.is_symlink() else f".bin/{binary}"
    rel = os.path.normpath(os.path.join(".bin", target))
    if rel.startswith(".."):
        raise CliInstallError(f"the {binary} launcher in {cache} points outside its node_modules ({target})")
    return rel


def _needs_node(entry: Path) -> bool:
    with entry.open("rb") as f:
        first = f.readline(200)
    return first.startswith(b"#!") and b"node" in first


async def _write_tree(sandbox: Any, source: Path, into: str) -> tuple[int, int, list[str]]:
    """Every regular file under `source` written to `into` (links skipped: the launcher replaces .bin's).
    Answers (files, bytes, the executables' sandbox paths)."""
    files = size = 0
    executables: list[str] = []
    for folder, dirs, names in os.walk(source):
        dirs.sort()
        for name in sorted(names):
            path = Path(folder) / name
            if path.is_symlink() or not path.is_file() or name == ".install-stats":
                continue
            target = f"{into}/{path.relative_to(source).as_posix()}"
            data = path.read_bytes()
            await sandbox.write_file(target, data)
            files, size = files + 1, size + len(data)
            if os.access(path, os.X_OK):
                executables.append(target)
    return files, size, executables


async def _run(sandbox: Any, script: str, doing: str) -> str:
    result = await sandbox.exec(["sh", "-c", script], cwd="/app", timeout=300)
    if result.exit_code != 0:
        raise CliInstallError(f"{doing} failed in sandbox {sandbox.sandbox_id} (exit {result.exit_code}): "
                              f"{(result.stderr or result.stdout).strip()[-500:]}")
    return str(result.stdout)


async def install_cli(sandbox: Any, agent: str) -> dict[str, Any]:
    """Install `agent`'s CLI (a name in cli_image.CLI_BINARIES) into `sandbox`; check it answers --version."""
    cache = cli_cache(agent)
    binary = CLI_BINARIES[agent][1]
    target = _entry_target(cache, binary)
    files, size, executables = await _write_tree(sandbox, cache, f"{INSTALL_ROOT}/{agent}")
    node = "not needed"
    if _needs_node(cache / "node_modules" / target):
        node = "present"
        if (await sandbox.exec(["sh", "-c", "command -v node"], cwd="/app", timeout=60)).exit_code != 0:
            node_file = node_binary()
            await sandbox.write_file(f"{INSTALL_ROOT}/node/lib/node", node_file.read_bytes())
            for lib in node_libraries(node_file):
                await sandbox.write_file(f"{INSTALL_ROOT}/node/lib/{lib.name}", lib.read_bytes())
            await sandbox.write_file(f"{INSTALL_ROOT}/node/node", _NODE_LAUNCHER.encode())
            executables += [f"{INSTALL_ROOT}/node/lib/node", f"{INSTALL_ROOT}/node/node"]
            node = "installed"
    command = f"{INSTALL_ROOT}/bin/{binary}"
    await sandbox.write_file(command, _LAUNCHER.format(agent=agent, target=target).encode())
    executables.append(command)
    relative = [shlex.quote(path.removeprefix("/app/")) for path in executables]  # the process sandbox's too
    await _run(sandbox, "chmod +x " + " ".join(relative), "making the CLI executable")
    version = await _run(sandbox, f"HOME=/tmp {shlex.quote(command.removeprefix('/app/'))} --version",
                         f"running the installed {agent} CLI")
    return {"agent": agent, "command": command, "version": version.strip().splitlines()[-1] if version.strip()
            else "", "files": files, "bytes": size, "node": node}
