"""In-hub children: a module env loaded into the hub (the Env object itself, no HTTP hop to the gateway).

The hub runs many runs on many threads, so it never changes its own `os.environ` for one env: an env that
declares `env_vars` (read with os.environ in its module or `__init__`) runs as a subprocess, which gets them in
its own environment, unless it says `run_as = "in_process"`, which is refused with that advice.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from .instance import DeployError, Instance
from .providers import EnvProvider
from .records import McpServerEnv
from .subprocesses import module_target


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


class InHubProvider(EnvProvider):
    """The `in_hub` env provider: a module env's Env object loaded into the hub."""

    name = "in_hub"

    async def start(self, inst: Instance, child_name: str, where: str, server: McpServerEnv) -> tuple[Any, dict]:
        folder = self.host.materialize(inst, child_name, server)
        return await load_in_hub(child_name, where, folder, server, self.host.ready_timeout)
