"""Shared parts of the coding-CLI tests: the installed CLI (or a skip), a clean environment for it, running
it, and JSON-lines parsing (the fixtures are in conftest.py).

The CLIs come from scripts/setup-agent-clis.sh (.cache/agent-clis/<name>/). Absent, a test skips saying
so, unless AGENTENV_REQUIRE_AGENT_CLIS=1, which makes that a failure.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agentenv_local.agents.base import Agent
from agentenv_local.agents.types import TaskRequest, TextPart
from agentenv_local.testing.fake_models import FakeModelServer

ROOT = Path(__file__).resolve().parents[2]
CLI_CACHE = ROOT / ".cache" / "agent-clis"
MODEL_KEY = "sk-fake-agent-cli-key"


def cli_path(name: str, binary: str, *, venv: bool = False) -> Path:
    """The CLI's executable in the cache (an npm prefix, or with `venv` a Python venv), or skip (fail under
    AGENTENV_REQUIRE_AGENT_CLIS=1)."""
    path = CLI_CACHE / name / ("bin" if venv else "node_modules/.bin") / binary
    if not path.exists():
        message = f"{binary} is not installed in {CLI_CACHE / name}: run scripts/setup-agent-clis.sh"
        if os.environ.get("AGENTENV_REQUIRE_AGENT_CLIS") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return path


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    """A small environment: no inherited keys or proxies, HOME and XDG dirs inside the test's tmp dir."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8",
           "XDG_CONFIG_HOME": str(home / ".config"), "XDG_DATA_HOME": str(home / ".local" / "share"),
           "XDG_CACHE_HOME": str(home / ".cache"), "XDG_STATE_HOME": str(home / ".local" / "state"),
           "NO_COLOR": "1", "CI": "1"}
    env.update(extra)
    return env


def run_cli(argv: list[str], *, env: dict[str, str], cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    """Run a CLI to its end (stdin closed: a headless run must not wait for input)."""
    return subprocess.run([str(a) for a in argv], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL, start_new_session=True)


def json_lines(stdout: str) -> list[dict]:
    """The JSON objects of a JSON-lines event stream (other lines, e.g. warnings, are skipped)."""
    events = []
    for line in stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                events.append(json.loads(line))
            except ValueError:
                continue
    return events


def explain(proc: subprocess.CompletedProcess, server: FakeModelServer) -> str:
    """What to print when a CLI run is not what the test expects: exit code, output tails, the requests."""
    reqs = "\n".join(f"  {r.method} {r.path} -> {r.status} {r.problems[:3]}" for r in server.requests)
    return (f"exit {proc.returncode}\n--- stdout (tail)\n{proc.stdout[-3000:]}\n--- stderr (tail)\n"
            f"{proc.stderr[-2000:]}\n--- model requests\n{reqs}")


def turn_request(agent: Agent, text: str, context: str, task: str, *, mcp: dict[str, Any] | None = None,
                 **config: Any) -> TaskRequest:
    """One A2A turn for `agent` as its server would hand it over: the text, the context and task ids, the
    agent-config fields validated by the agent's own config model, and the MCP servers registered on it."""
    return TaskRequest(task_id=task, context_id=context, parts=(TextPart(text=text),),
                       config=agent.config_model.model_validate(config), mcp_servers=mcp or {})
