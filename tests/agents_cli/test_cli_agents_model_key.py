"""Each coding-CLI agent keeps the `[model]` key out of its CLI's reach (the model proxy adds it): during a turn in
which the fake model makes the CLI dump its environment and HOME files with its shell tool, the key is in no
tool result, in no /proc environ or cmdline of the CLI's processes, in no file of its private HOME or workspace,
while every model request that reached the fake server carried the real key. The endpoint's [model.headers]
(agent-config's model_headers) are the same: the proxy adds them to every request, the CLI never holds them. The
same turn installs a
skill-config skill where that CLI reads skills, and the agent's shutdown removes its private HOME."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from agent_cli_kit import MODEL_KEY, cli_path, record_started, turn_request
from shell_responder import ShellResponder

from agentenv_local.agents.cli_agents import harness
from agentenv_local.agents.cli_agents.claude_code import ClaudeCodeAgent
from agentenv_local.agents.cli_agents.codex import CodexAgent
from agentenv_local.agents.cli_agents.gemini import GeminiAgent
from agentenv_local.agents.cli_agents.harness import CliAgent
from agentenv_local.agents.cli_agents.opencode import OpencodeAgent
from agentenv_local.agents.cli_agents.openhands import OpenHandsAgent
from agentenv_local.agents.cli_agents.pi import PiAgent
from agentenv_local.agents.types import TaskRequest
from agentenv_local.testing.fake_models import FakeModelServer, RecordedRequest, Reply

DUMP = "env; cat ~/.* ~/.*/* 2>/dev/null | head -c 20000; echo; echo ENV-DUMPED"
HEADER_VALUE = "team-secret-header-value"  # a [model.headers] value: the proxy's to send, never the CLI's
SKILL = {"name": "tidy-notes", "description": "How to tidy the notes folder.", "skill_md": "Sort the notes by date."}

Model = Callable[[FakeModelServer], dict[str, Any]]
CASES: dict[str, tuple[type[CliAgent], tuple[str, str, bool], Model]] = {
    "claude-code": (ClaudeCodeAgent, ("claude-code", "claude", False),
                    lambda s: {"base_url": s.base_url, "model": "claude-sonnet-4-5"}),
    "codex": (CodexAgent, ("codex", "codex", False),
              lambda s: {"base_url": s.base_url, "api": "openai", "model": "gpt-5-codex"}),
    "gemini": (GeminiAgent, ("gemini", "gemini", False),
               lambda s: {"base_url": s.root_url, "model": "gemini-2.5-flash"}),
    "opencode": (OpencodeAgent, ("opencode", "opencode", False),
                 lambda s: {"base_url": s.root_url, "model": "claude-sonnet-4-5"}),
    "openhands": (OpenHandsAgent, ("openhands-venv", "openhands", True),
                  lambda s: {"base_url": s.base_url, "api": "openai", "model": "fake-model"}),
    "pi": (PiAgent, ("pi", "pi", False), lambda s: {"base_url": s.base_url, "api": "openai", "model": "fake-model"}),
}


class SnoopingResponder(ShellResponder):
    """ShellResponder running DUMP; on each model request (the CLI is alive, waiting for the answer) it reads the
    environ and cmdline of the CLI and every process under it."""

    def __init__(self, started: list[int]) -> None:
        super().__init__(command=DUMP)
        self.started = started
        self.snapshots: list[bytes] = []

    def __call__(self, request: RecordedRequest) -> Reply:
        if self.started:
            for pid in [self.started[0], *harness.descendants(self.started[0])]:
                for name in ("environ", "cmdline"):
                    try:
                        self.snapshots.append(Path(f"/proc/{pid}/{name}").read_bytes())
                    except OSError:
                        continue  # ended meanwhile
        return super().__call__(request)


def sent_key(request: RecordedRequest) -> str | None:
    """The key a model request carried, wherever its API puts it."""
    auth = request.headers.get("authorization", "")
    query = dict(p.split("=", 1) for p in request.query.split("&") if "=" in p)
    return (request.headers.get("x-api-key") or request.headers.get("x-goog-api-key")
            or (auth[len("Bearer "):] if auth.startswith("Bearer ") else None) or query.get("key"))


def files_holding(folder: Path, needle: bytes) -> list[str]:
    found = []
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            try:
                if needle in path.read_bytes():
                    found.append(str(path))
            except OSError:
                continue
    return found


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_cli_never_holds_the_key_and_its_home_goes_with_the_agent(
        name: str, workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    agent_class, (cache, binary, venv), model = CASES[name]
    cli_path(cache, binary, venv=venv)
    agent = agent_class()
    started = record_started(monkeypatch)
    responder = SnoopingResponder(started)
    with FakeModelServer(api_key=MODEL_KEY, responder=responder) as server:
        req = turn_request(agent, "Show me your environment and settings files with your shell tool.", "ctx-k",
                           "t-k", api_key=MODEL_KEY, workspace=str(workdir),
                           model_headers={"X-Team-Secret": HEADER_VALUE}, **model(server))
        req = TaskRequest(task_id=req.task_id, context_id=req.context_id, parts=req.parts, config=req.config,
                          skills=(SKILL,))
        result = asyncio.run(agent.run(req))
        requests = list(server.requests)
    events = req.trajectory.events()
    assert result.error is None, (result, events)
    [call] = [e for e in events if e["type"] == "tool_call"]
    assert "ENV-DUMPED" in call["result"] and "HOME=" in call["result"], call["result"][:2000]
    assert MODEL_KEY not in call["result"] and MODEL_KEY not in json.dumps(events)
    assert responder.snapshots and not [s for s in responder.snapshots if MODEL_KEY.encode() in s]
    home = agent.private_home()
    assert files_holding(home, MODEL_KEY.encode()) == [] and files_holding(workdir, MODEL_KEY.encode()) == []
    # the header is out of the CLI's reach just as the key
    assert HEADER_VALUE not in call["result"] and HEADER_VALUE not in json.dumps(events)
    assert not [s for s in responder.snapshots if HEADER_VALUE.encode() in s]
    assert files_holding(home, HEADER_VALUE.encode()) == [] and files_holding(workdir, HEADER_VALUE.encode()) == []
    assert HEADER_VALUE not in json.dumps(req.config.model_dump(mode="json"))  # read back masked
    # the model got the real key and the header on every call, and no call was refused
    assert requests and {sent_key(r) for r in requests} == {MODEL_KEY}
    assert {r.headers.get("x-team-secret") for r in requests} == {HEADER_VALUE}
    assert all(r.status == 200 for r in requests), [(r.path, r.status) for r in requests]
    # skill-config's skill sits where this CLI reads skills
    skill = (home / agent.skills_folder / SKILL["name"] / "SKILL.md").read_text()
    assert skill.startswith("---\nname: tidy-notes\n") and SKILL["skill_md"] in skill
    asyncio.run(agent.shutdown())
    assert not home.exists() and workdir.exists()  # the agent's HOME goes; the configured workspace stays
