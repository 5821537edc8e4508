"""Running an example bundle as a user would, for tests/examples: `agentenv` in a project folder with this
venv's command and no AGENTENV_* settings of the caller, and the newest run's whole record."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def agentenv(cwd: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTENV_") or k == "AGENTENV_SANDBOX_DEFAULT"}
    return subprocess.run([str(Path(sys.executable).parent / "agentenv"), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)


def last_run(cwd: Path) -> dict:
    runs = json.loads(agentenv(cwd, "runs", "list", "--json").stdout)
    return json.loads(agentenv(cwd, "runs", "show", runs[0]["run_id"], "--json").stdout)
