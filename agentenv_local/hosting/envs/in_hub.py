"""In-hub children: a module env loaded into the hub (the Env object itself, no HTTP hop to the gateway).

Every call it serves goes through an InHubGuard (hub_guard.py: its sync tools off the hub's loop, a deadline per
call, sys.exit and a blocked loop caught). An env version that misbehaved in this hub, or whose code calls
os._exit (which no in-process guard can catch), is "moved out": deployed as a subprocess instead.

The hub runs many runs on many threads, so it never changes its own `os.environ` for one env: an env that
declares `env_vars` (read with os.environ in its module or `__init__`) runs as a subprocess, which gets them in
its own environment, unless it says `run_as = "in_process"`, which is refused with that advice.
"""

from __future__ import annotations

import asyncio
import logging
import re
from pathlib import Path
from typing import Any

from .hub_guard import InHubGuard
from .instance import DeployError, Instance
from .providers import EnvHost, EnvProvider
from .records import McpServerEnv
from .subprocesses import module_target, start_subprocess_child, stop_subprocesses

log = logging.getLogger(__name__)
HARD_EXIT = re.compile(rb"\bos\s*\.\s*_exit\s*\(|\bfrom\s+os\s+import\b[^\n]*\b_exit\b")


def runs_in_hub(senv: McpServerEnv, where: str) -> bool:
    """Is this module env loaded into the hub (else it runs as a subprocess)?"""
    if senv.run_as == "subprocess":
        return False
    if senv.env_vars:
        if senv.run_as == "in_process":
            raise DeployError(f"{where}: an env loaded in the hub (run_as = \"in_process\") cannot have env_vars: "
                              "the hub's environment is shared by every run",
                              hint='drop run_as (an env with env_vars then runs as a subprocess), or set '
                                   'run_as = "subprocess"')
        return False
    return True


async def load_in_hub(child_name: str, where: str, folder: Path, senv: McpServerEnv,
                      ready_timeout: float) -> tuple[Any, dict]:
    """Load the child's Env off the loop; an import that raises, exits or hangs fails the deploy, not the hub."""
    from agentenv_local.env import load_env

    assert senv.module is not None
    target = module_target(folder, senv.module)
    alone = ("load it on its own to see why: python -m agentenv_local.env "
             f"{senv.module.rpartition(':')[0] or senv.module} (in the env's folder)")
    try:
        env_obj = await asyncio.wait_for(asyncio.get_running_loop().run_in_executor(None, load_env, target),
                                         ready_timeout)
    except TimeoutError:  # the import never returns (a loop at import time); its thread is left
        raise DeployError(f"{where}: loading {senv.module} did not finish within {ready_timeout:g}s",
                          hint=alone) from None
    except SystemExit as e:  # sys.exit() at import: never let it reach (and stop) the hub's loop
        raise DeployError(f"{where}: {senv.module} exited while it was imported (sys.exit({e.code!r}))",
                          hint=alone) from None
    except Exception as e:  # the author's import error, shown as it is
        raise DeployError(f"{where}: cannot load {senv.module}: {type(e).__name__}: {e}",
                          hint=alone) from None
    return env_obj, {"name": child_name, "kind": "in_process"}


def version_key(where: str, senv: McpServerEnv) -> tuple:
    """Which env version this is (its module and pinned files): what "misbehaving" is remembered for."""
    return (where, senv.module, senv.files.id if senv.files else None, senv.files.version if senv.files else None)


def calls_hard_exit(folder: Path) -> str | None:
    """The first .py file of the env's folder that calls os._exit (which would end the hub), or None."""
    for path in sorted(folder.rglob("*.py")):
        if path.is_file() and not path.is_symlink() and HARD_EXIT.search(path.read_bytes()):
            return path.relative_to(folder).as_posix()
    return None


def moved_out_reason(folder: Path, did: str | None) -> str | None:
    """Why this module env must not be loaded in the hub after all (None: it may be); `did`: what it did when it
    misbehaved in this hub, if it did."""
    if did is not None:
        return f"it misbehaved in this hub earlier ({did})"
    exits = calls_hard_exit(folder)
    if exits is not None:
        return f"{exits} calls os._exit, which would end the hub"
    return None


class InHubProvider(EnvProvider):
    """The `in_hub` env provider: a module env's Env object loaded into the hub, behind an InHubGuard; or, when
    the env version cannot be trusted in the hub (moved_out_reason), the same env as a subprocess."""

    name = "in_hub"

    def __init__(self, host: EnvHost):
        super().__init__(host)
        self._guards: dict[str, list[InHubGuard]] = {}
        self._misbehaved: dict[tuple, str] = {}  # env version (version_key) -> what it did, in this hub

    async def start(self, inst: Instance, child_name: str, where: str, server: McpServerEnv) -> tuple[Any, dict]:
        folder = self.host.materialize(inst, child_name, server)
        return await self.start_in(inst, child_name, where, folder, server)

    async def start_in(self, inst: Instance, child_name: str, where: str, folder: Path, server: McpServerEnv,
                       apart: McpServerEnv | None = None, named: bool = False) -> tuple[Any, dict]:
        """Load `server` (a module env) from `folder`, or run `apart` (default: the same) as a subprocess when it is
        moved out. `named`: its runtime is named `child_name`, as ENVIRONMENT_NAME names it in a subprocess."""
        key = version_key(where, server)
        reason = moved_out_reason(folder, self._misbehaved.get(key))
        if reason is not None:
            if server.run_as == "in_process":
                raise DeployError(f"{where}: cannot load it in the hub (run_as = \"in_process\"): {reason}",
                                  hint='set run_as = "subprocess" (or drop run_as), or fix the env')
            log.warning("%s runs as a subprocess: %s", where, reason)
            url, info = await start_subprocess_child(inst, child_name, where, folder, apart or server,
                                                     self.host.ready_timeout)
            return url, {**info, "moved_out_of_hub": reason}
        env_obj, info = await load_in_hub(child_name, where, folder, server, self.host.ready_timeout)
        if named:
            from agentenv_local.env.runtime import Runtime

            env_obj.__dict__["_ae_rt"] = Runtime(env_obj, name=child_name)

        def misbehaved(what: str) -> None:
            self._misbehaved.setdefault(key, what)

        guard = InHubGuard(f"{where} (in the hub)", misbehaved, server.call_timeout)
        env_obj._ae_runtime().guard = guard
        self._guards.setdefault(inst.instance_id, []).append(guard)
        return env_obj, info

    async def stop(self, inst: Instance) -> None:
        for guard in self._guards.pop(inst.instance_id, []):
            guard.close()
        await stop_subprocesses(inst)
