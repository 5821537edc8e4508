"""The reference's own verifier scripts (written for mcp 1.x, copied at test time from the installed reference) and
reference-style scripts using its `Run` object, through env_outcome_verifier and run_code against a real gateway
over HTTP in front of a tiny env of our SDK that offers the reference examples' tools with their data."""

from __future__ import annotations

import time

import pytest
from kits.env_steps import deployed_env
from kits.gateway import http, load
from kits.reference_bundles import copy_reference_bundle

from agentenv_local.errors import StepError

# The reference examples' echo and mail envs (echo-mcp, mail-mcp), written with our SDK: same tools, same inbox.
REFERENCE_TOOLS = '''
import json

from agentenv_local.env import Env, environment_card, tool

INBOX = (
    {"id": "m-1", "from": "billing@acme-supplies.example", "subject": "Invoice INV-1042 for October",
     "body": "Invoice INV-1042 for $2,740.00 is due on November 15."},
    {"id": "m-2", "from": "dana@example.com", "subject": "Team lunch on Friday",
     "body": "Pizza at noon in the kitchen."},
    {"id": "m-3", "from": "it@example.com", "subject": "Your password expires soon",
     "body": "Choose a new password within 7 days."},
)


@environment_card(name="inbox")
class Inbox(Env):
    @tool()
    def echo(self, text: str) -> str:
        """Return the text it's sent."""
        return text

    @tool()
    def search_emails(self, query: str) -> str:
        """The emails holding every word of the query, as a JSON list."""
        words = query.lower().split()
        return json.dumps([e for e in INBOX if all(w in " ".join(e.values()).lower() for w in words)])
'''


@pytest.fixture
def inbox(run, tmp_path):
    server = tmp_path / "inbox_server.py"
    server.write_text(REFERENCE_TOOLS)
    with deployed_env(run, "inbox", {"inbox": load(server)}) as (base, _):
        yield run, base


def verifier(run, artifact: str, files: dict[str, bytes], **fields) -> dict:
    run.put_artifact(artifact, files)
    step_id = fields.pop("id", "check")
    run.execute(run.step({"id": step_id, "type": "env_outcome_verifier", "env_id": "inbox",
                          "file_artifact_id": artifact, **fields}))
    return run.metadata["verifications"][step_id]


@pytest.mark.parametrize(("bundle", "check", "row_id"), [("echo-mcp", "check_echo", "echoes"),
                                                         ("mail-mcp", "check_mail", "finds-the-invoice")])
def test_the_reference_examples_verify_scripts_pass_unchanged(inbox, tmp_path, bundle, check, row_id):
    run, _ = inbox
    script = copy_reference_bundle(bundle, tmp_path / "ref") / "artifacts" / check / "verify.py"
    assert "streamable_http_client(mcp_url) as (read, write, _)" in script.read_text()  # mcp 1.x as written
    result = verifier(run, check, {"verify.py": script.read_bytes()})
    assert [(r["id"], r["result"]) for r in result["results"]] == [(row_id, True)], result
    assert result["score"] == 1.0


MCP1_FAILING = b'''
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


async def verify(mcp_url):
    async with streamable_http_client(mcp_url) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool("echo", {"text": "x"})
    return [{"id": "is-an-error", "result": result.isError, "description": "echo failed"}]
'''


def test_an_mcp1_script_that_checks_a_wrong_outcome_fails_its_criterion(inbox):
    run, _ = inbox
    result = verifier(run, "failing.py", {"failing.py": MCP1_FAILING})
    assert result["results"] == [{"criterion": "echo failed", "id": "is-an-error", "result": False, "score": 0.0}]


MCP1_SURFACE = b'''
import json

import mcp.types as types
from mcp import ClientSession
from mcp.client.sse import sse_client  # importable as in 1.x (not used: our gateway speaks streamable HTTP)
from mcp.client.streamable_http import streamablehttp_client


async def run(input):
    async with streamablehttp_client(input["env"]["mcp_url"], headers={"X-Trace": "1"}) as (read, write, get_id):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            listed = await session.list_tools()
            found = await session.call_tool("search_emails", {"query": "invoice"})
    texts = [part.text for part in found.content if isinstance(part, types.TextContent)]
    return {"server": init.serverInfo.name, "tools": sorted(t.name for t in listed.tools),
            "schema": listed.tools[0].inputSchema["type"], "cursor": listed.nextCursor,
            "error": found.isError, "ids": [e["id"] for e in json.loads(texts[0])],
            "structured": found.structuredContent, "session": get_id(), "sse": callable(sse_client)}
'''


def test_run_code_runs_an_mcp1_script_against_the_env(inbox):
    run, _ = inbox
    run.put_artifact("surface.py", {"surface.py": MCP1_SURFACE})
    run.execute(run.step({"id": "act", "type": "run_code", "env_id": "inbox", "script_artifact_id": "surface.py"}))
    result = run.metadata["script_results"]["act"]
    assert result == {"server": "inbox", "tools": ["echo", "search_emails"], "schema": "object", "cursor": None,
                      "error": False, "ids": ["m-1"], "structured": result["structured"], "session": None,
                      "sse": True}


HELPER_MCP1 = b'''
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


async def echo(mcp_url, text):
    async with streamable_http_client(mcp_url) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool("echo", {"text": text})
    return {"error": result.isError, "text": result.content[0].text}
'''


def test_a_helper_module_written_for_mcp1_beside_a_plain_entry_gets_the_facade_too(inbox):
    run, _ = inbox
    main = b"import helper\n\nasync def run(input):\n    return await helper.echo(input['env']['mcp_url'], 'two')\n"
    run.put_artifact("multi", {"main.py": main, "helper.py": HELPER_MCP1})
    run.execute(run.step({"id": "multi", "type": "run_code", "env_id": "inbox", "script_artifact_id": "multi"}))
    assert run.metadata["script_results"]["multi"] == {"error": False, "text": "two"}


MCP1_RAISES = b'''from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


async def verify(mcp_url):
    async with streamable_http_client(mcp_url) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool("echo", {"text": "x"})
    raise LookupError(f"no such inbox {result.isError}")
'''


def test_an_mcp1_script_that_raises_or_returns_a_wrong_shape_is_a_clear_step_error(inbox):
    run, _ = inbox
    with pytest.raises(StepError, match=r"(?s)verifier raises\.py \(raises\.py v1\) verify\(\) failed: "
                                        r"LookupError: no such inbox False.*raises\.py\", line 10"):
        verifier(run, "raises.py", {"raises.py": MCP1_RAISES})
    shape = MCP1_RAISES.replace(b'raise LookupError(f"no such inbox {result.isError}")',
                                b"return {'ok': result.isError}")
    with pytest.raises(StepError, match=r"verifier shape\.py .*must return a non-empty list"):
        verifier(run, "shape.py", {"shape.py": shape})
    broken = b"from mcp.client.streamable_http import streamable_http_client\nfrom mcp import NoSuchThing\n"
    with pytest.raises(StepError, match=r"(?s)ImportError: cannot import name 'NoSuchThing'.*broken\.py\", line 2"):
        verifier(run, "broken.py", {"broken.py": broken})
    assert "check" not in run.metadata.get("verifications", {})


RUN_OBJECT = b'''
import json


async def verify(mcp_url, run):
    turns = run.turns()
    first, second = turns
    early = run.as_of(1)
    return [
        {"id": "dict", "result": run["prompt_id"] == "p1" and json.loads(json.dumps(run))["env"]["id"] == "inbox"
                                 and isinstance(run, dict) and run["response"]["prompt_id"] == "p1"},
        {"id": "turns", "result": len(run.turns) == 2 and first.message.text == "find the invoice"
                                  and first.reply.text == "m-1" and second.message.text == "and the lunch?"
                                  and second.message.written_by_triggers == ("nudge",)
                                  and second.reply.text == "m-2" and run.turn(2) is second},
        {"id": "user-agent", "result": [(f.trigger_id, f.turn, f.source) for f in run.firings("nudge")]
                                       == [("nudge", 1, "user_agent")] and run.firing("gone") is None},
        {"id": "as-of", "result": len(early.turns()) == 1 and early["prompt_id"] == "p1"},
        {"id": "env", "result": run.firings(env="inbox") == () and first.firings == run.firings("nudge")},
    ]
'''

RUN_OBJECT_WITHHELD = b'''
from agentenv_local.compat.run_view import RunRecordUnavailable


def verify(mcp_url, *, run):
    try:
        run.firings(env="inbox")
    except RunRecordUnavailable as exc:
        return [{"id": "withheld", "result": exc.source == "env:inbox" and "multi-turn" in exc.reason}]
    return [{"id": "withheld", "result": False}]
'''

ONE_TURN = b'''
def verify(mcp_url, run):
    [turn] = run.turns
    [lock] = run.firings("lock", env="inbox")
    return [{"id": "fired", "result": lock.ok and lock.turn == 1 and lock.source == "env:inbox"
                                     and lock.at is not None and turn.firings == (lock,)
                                     and lock.provoked_by is not None and run.as_of(0).turns == ()}]
'''


def wait_fired(base: str, trigger_id: str) -> None:
    with http(base) as h:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            state = h.get("/triggers/state").json()
            if any(t["id"] == trigger_id and t["fire_count"] for t in state["triggers"]):
                return
            time.sleep(0.05)
    raise AssertionError(f"trigger {trigger_id} did not fire")


def test_a_reference_style_script_reads_turns_and_firings_from_run(inbox):
    run, base = inbox
    # a two-turn conversation: a user simulator's trigger wrote the second user message
    run.state["prompt_responses"].append({
        "prompt_id": "p1", "step_id": "ask", "agent_name": "helper", "prompt_text": "find the invoice",
        "response": "m-2", "turns": [
            {"turn": 0, "prompt": "find the invoice", "response": "m-1", "user_reply": "and the lunch?",
             "triggers_fired": ["nudge"]},
            {"turn": 1, "prompt": "and the lunch?", "response": "m-2"}]})
    result = verifier(run, "turns.py", {"turns.py": RUN_OBJECT}, prompt_id="p1")
    assert {r["id"]: r["result"] for r in result["results"]} == {
        "dict": True, "turns": True, "user-agent": True, "as-of": True, "env": True}
    # an env trigger fires
    with http(base) as h:
        r = h.post("/triggers/register", json={"watch_roles": ["agent"], "triggers": [
            {"id": "lock", "when": {"type": "action", "tool": "echo"},
             "actions": [{"type": "permission", "action": "disable", "role": "other", "tools": ["search_emails"]}]}]})
        assert r.status_code == 200, r.text
    with http(base, **{"AgentEnv-Role": "agent"}) as h:  # the agent's call provokes it
        r = h.post("/step", json={"action": "call_tool", "tool_name": "echo", "arguments": {"text": "hi"}})
        assert r.json()["isError"] is False
    wait_fired(base, "lock")
    # a multi-turn prompt's env firings cannot be placed in turns (ours carry no times): asking for them raises
    assert verifier(run, "withheld.py", {"withheld.py": RUN_OBJECT_WITHHELD}, id="w", prompt_id="p1")["score"] == 1.0
    # a one-turn prompt (graded as the last one, as the reference does without prompt_id): the firing is in turn 1
    run.state["prompt_responses"].append({"prompt_id": "p2", "prompt_text": "say hi", "response": "hi",
                                          "turns": [{"turn": 0, "prompt": "say hi", "response": "hi"}]})
    assert verifier(run, "one.py", {"one.py": ONE_TURN}, id="one")["results"][0]["result"] is True
