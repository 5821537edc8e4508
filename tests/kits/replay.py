"""The real `agentenv` CLI as the replay tests drive it (tests/agentenv_local/replay/): a run with the project's own
env (no AGENTENV_* of the test session but the sandbox default), its exit code checked, the newest run's id, and a
bundle copied into a fresh project."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from kits.warm_cli import run_agentenv

ROOT = Path(__file__).resolve().parents[2]


def agentenv(cwd: Path, *args: str, timeout: float = 900, extra_env: dict[str, str] | None = None
             ) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTENV_") or k == "AGENTENV_SANDBOX_DEFAULT"}
    env.update(extra_env or {})
    return run_agentenv(list(args), cwd=cwd, env=env, timeout=timeout)


def ok(out: subprocess.CompletedProcess, code: int = 0) -> str:
    assert out.returncode == code, out.stdout + out.stderr
    return out.stdout


def newest_run(cwd: Path) -> str:
    return json.loads(ok(agentenv(cwd, "runs", "list", "--json", "--limit", "1")))[0]["run_id"]


def project_with(parent: Path, bundle: Path, name: str) -> Path:
    """A fresh project folder under `parent` holding a copy of `bundle` as `name`."""
    project = parent / "proj"
    project.mkdir()
    shutil.copytree(bundle, project / name)
    return project


def keys(report: dict) -> set[tuple[str, str]]:
    """A replay or diff report's differences as (where, what)."""
    return {(d["where"], d["what"]) for d in report["differences"]}
