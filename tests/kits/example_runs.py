"""Running an example bundle as a user would, for tests/examples: `agentenv` in a project folder with this
venv's command and no AGENTENV_* settings of the caller, and the newest run's whole record."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from kits.warm_cli import run_agentenv


def agentenv(cwd: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTENV_") or k == "AGENTENV_SANDBOX_DEFAULT"}
    return run_agentenv(list(args), cwd=cwd, env=env, timeout=timeout)


def last_run(cwd: Path) -> dict:
    runs = json.loads(agentenv(cwd, "runs", "list", "--json").stdout)
    return json.loads(agentenv(cwd, "runs", "show", runs[0]["run_id"], "--json").stdout)
