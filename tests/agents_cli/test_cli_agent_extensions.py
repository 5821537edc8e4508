"""The `claude-code` agent served over A2A (the real server app, our A2A client over HTTP) answers the reference's
extensions as its CLI uses them: a skill-config skill lands in Claude Code's `~/.claude/skills/NAME/SKILL.md` and
the CLI offers it to the model, the turn's trajectory comes back through trajectory/v1 (whole, and as a cursor
page with its format), the turn's MCP config file is gone once the turn ends, and stopping the server removes
the agent's private HOME and stops its model proxy. A cancelled turn leaves no turn file behind either."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from agent_cli_kit import (
    LONG_COMMAND,
    MODEL_KEY,
    LongCommandResponder,
    cancel_a_running_turn,
    cli_path,
    record_started,
    sleepers_under,
    turn_request,
)
from shell_responder import COMMAND, ShellResponder

from agentenv_local.agents.cli_agents.claude_code import ClaudeCodeAgent
from agentenv_local.agents.client import A2AClient
from agentenv_local.testing.fake_models import FakeModelServer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kits.servers import serving_app  # noqa: E402 - the tests folder is on the path now

SKILL_DESCRIPTION = "Tidies the notes folder by date."


def test_skills_and_trajectory_over_a2a_and_the_home_goes_when_the_server_stops(workdir: Path,
                                                                                 echo_mcp_url: str) -> None:
    cli_path("claude-code", "claude")
    agent = ClaudeCodeAgent()

    async def scenario(url: str, server: FakeModelServer) -> tuple[dict, dict, dict]:
        async with A2AClient(url) as client:
            await client.agent_config_set(base_url=server.base_url, api_key=MODEL_KEY, model="claude-sonnet-4-5",
                                          workspace=str(workdir))
            await client.mcp_config_add(echo_mcp_url, name="echo")
            await client.skill_add("tidy-notes", SKILL_DESCRIPTION, "Sort the notes by date, newest first.")
            skills = await client.skill_list()
            task = await client.prompt(f"Run {COMMAND} and reply with the number.", timeout=300)
            assert task.state == "completed" and "42" in task.text, task.raw
            whole = await client.trajectory_get(task_id=task.id)
            page = await client.trajectory_get(task_id=task.id, after=0, limit=1000)
            return skills, whole, page

    with FakeModelServer(api_key=MODEL_KEY, responder=ShellResponder()) as server:
        with serving_app(agent.app()) as url:
            skills, whole, page = asyncio.run(scenario(url, server))
            home = agent.private_home()
            skill = (home / ".claude" / "skills" / "tidy-notes" / "SKILL.md").read_text()
            assert list(home.glob("mcp-*.json")) == []  # the turn's MCP config went with the turn
            assert agent._proxy.running
        offered = " ".join(str(r.body) for r in server.requests)
    assert skills["tidy-notes"] == {"description": SKILL_DESCRIPTION}
    assert skill.startswith("---\nname: tidy-notes\n") and "newest first" in skill
    assert SKILL_DESCRIPTION in offered  # Claude Code read the skill and told the model about it
    calls = [e for e in whole["trajectory"] if e["type"] == "tool_call"]
    assert [(c["name"], c["args"]) for c in calls] == [("Bash", {"command": COMMAND})]
    assert page["format"] == "agentenv-claude-code/1" and page["state"] == "completed"
    assert page["events"] == whole["trajectory"] and page["has_more"] is False
    assert MODEL_KEY not in str(whole)
    # the server stopped: the agent's shutdown ran
    assert not home.exists() and workdir.exists() and not agent._proxy.running


def test_a_cancelled_turn_leaves_no_turn_file(workdir: Path, echo_mcp_url: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    cli_path("claude-code", "claude")
    agent = ClaudeCodeAgent()
    started = record_started(monkeypatch)
    with FakeModelServer(api_key=MODEL_KEY, responder=LongCommandResponder("Bash", command=LONG_COMMAND)) as server:
        req = turn_request(agent, "Wait for a long time.", "ctx-c", "t-c", mcp={"echo": {"url": echo_mcp_url}},
                           base_url=server.base_url, api_key=MODEL_KEY, model="claude-sonnet-4-5",
                           workspace=str(workdir))
        home = agent.private_home()
        during = cancel_a_running_turn(agent, req, started, lambda pid: (sleepers_under(pid),
                                                                           list(home.glob("mcp-*.json"))))
    assert during[0] and len(during[1]) == 1  # while it ran: the long command, and the turn's MCP config
    assert list(home.glob("mcp-*.json")) == []
    asyncio.run(agent.shutdown())
    assert not home.exists()
