"""The scripted agent against a real MCP env (echo over HTTP), and the extensions over real HTTP."""

from __future__ import annotations

import pytest
from kits.agents import run, serving_agent

from agentenv_local.agents.client import A2AClient, A2AExtensionError
from agentenv_local.agents.scripted import ScriptedAgent

PLAN = {"turns": [
    [{"tool": "echo", "args": {"text": "ping {input}"}, "save_as": "e"},
     {"tool": "whoami", "save_as": "me"},
     {"if": {"saved": "e", "contains": "ping"}, "then": [{"reply": "echoed {e} as {me.role}"}],
      "else": [{"reply": "no ping"}]},
     {"structured": {"echo": "{e}", "role": "{me.role}"}}],
    [{"tool": "fail", "args": {"code": "nope"}, "allow_error": True, "save_as": "f"},
     {"reply": "second turn saw {f.error}"}, {"end": True}],
]}
SCHEMA = {"type": "object", "required": ["echo", "role"],
          "properties": {"echo": {"type": "string"}, "role": {"type": "string"}}}


def test_scripted_calls_a_real_env_with_role_templating_conditions_structured_and_trajectory(echo_url):
    async def go(base):
        async with A2AClient(base) as client:
            name = await client.mcp_config_add(echo_url, headers={"AgentEnv-Role": "alice"})
            listed = await client.mcp_config_list()
            await client.agent_config_set(plan=PLAN, output_format=SCHEMA)
            first = await client.prompt("hi", context_id="conv", timeout=30)
            second = await client.prompt("again", context_id="conv", timeout=30)
            third = await client.prompt("more", context_id="conv", timeout=30)
            other = await client.prompt("x", context_id="other", timeout=30)
            whole = await client.trajectory_get(task_id=first.id)
            page = await client.trajectory_get(context_id="conv", after=1, limit=2)
            return name, listed, first, second, third, other, whole, page

    with serving_agent(ScriptedAgent()) as base:
        name, listed, first, second, third, other, whole, page = run(go(base))
    assert name.startswith("mcp_") and len(name) == 12 and listed[name] == {"url": echo_url, "has_headers": True}
    assert first.state == "completed" and first.text == "echoed ping hi as alice"
    assert first.structured_output == {"echo": "ping hi", "role": "alice"}
    assert second.text == "second turn saw nope: this tool always fails" and second.data["end_conversation"] is True
    assert third.state == "failed" and third.error["error_code"] == "scripted.no_more_turns"
    assert other.text == "echoed ping x as alice"          # a new context starts at turn 0
    calls = [e for e in whole["trajectory"] if e["type"] == "tool_call"]
    assert [c["tool"] for c in calls] == ["echo", "whoami"]
    assert calls[0]["args"] == {"text": "ping hi"} and calls[0]["result"] == "ping hi" and not calls[0]["is_error"]
    assert calls[0]["duration_ms"] >= 0 and calls[1]["result"]["role"] == "alice"
    assert page["format"] == "agentenv-scripted/1" and len(page["events"]) == 2 and page["next"] == 3
    assert page["has_more"] and page["events"][0]["type"] == "tool_call"


def test_scripted_failures_and_output_format(echo_url):
    async def go(base):
        async with A2AClient(base) as client:
            await client.mcp_config_add(echo_url, name="echo")
            results = {}
            for key, plan, fmt in [
                ("tool_error", [{"tool": "fail", "server": "echo"}], None),
                ("fail", [{"fail": "nope {input}", "code": "custom"}], None),
                ("template", [{"reply": "{missing.x}"}], None),
                ("schema", [{"structured": {"echo": 5}}], SCHEMA),
                ("no_plan", None, None),
            ]:
                await client.agent_config_set(plan=plan, output_format=fmt)
                results[key] = await client.prompt("in", timeout=30)
            return results

    with serving_agent(ScriptedAgent()) as base:
        r = run(go(base))
    assert r["tool_error"].error, r["tool_error"].raw
    assert r["tool_error"].error["error_code"] == "scripted.tool_error" and "always fails" in r["tool_error"].text
    assert r["fail"].error == {"error_type": "agent_error", "error_code": "custom", "error_message": "nope in"}
    assert r["template"].error["error_code"] == "scripted.template_error" and "missing" in r["template"].text
    assert r["schema"].error["error_code"] == "scripted.output_format"
    assert r["no_plan"].error["error_code"] == "scripted.plan_error"


def test_scripted_judge():
    plan = [{"check": {"input": "data.response", "contains": "42"}, "name": "answers 42"},
            {"check": {"input": "data.trajectory", "contains": "echo"}, "name": "used echo"},
            {"check": {"not": {"input": "data.response", "regex": "(?i)sorry"}}, "name": "no apology"},
            {"verdict": {}}]

    async def go(base):
        async with A2AClient(base) as client:
            await client.agent_config_set(plan=plan)
            good = await client.prompt([{"response": "it is 42", "trajectory": [{"tool": "echo"}]}], timeout=30)
            bad = await client.prompt([{"response": "sorry, 41", "trajectory": []}], timeout=30)
            return good, bad

    with serving_agent(ScriptedAgent()) as base:
        good, bad = run(go(base))
    assert good.structured_output["score"] == 1.0 and good.structured_output["passed"] is True
    assert bad.structured_output["score"] == 0.0
    assert [c["name"] for c in bad.structured_output["criteria"]] == ["answers 42", "used echo", "no apology"]


def test_extensions_skills_peers_triggers():
    async def go(base):
        async with A2AClient(base) as client:
            added = await client.skill_add("pdf-tools", "Work with PDFs", "# PDF\nUse it.")
            skills = await client.skill_list()
            errors = {}
            for key, args in [("dup", ("pdf-tools", "again", "x")), ("bad", ("-bad name", "d", "x"))]:
                with pytest.raises(A2AExtensionError) as e:
                    await client.skill_add(*args)
                errors[key] = e.value
            card = await client.card(refresh=True)
            await client.peer_agents_set([{"name": "helper", "url": "http://127.0.0.1:1/a2a"}])
            peers = await client.peer_agents_list()
            with pytest.raises(A2AExtensionError) as dup_mcp:
                await client.mcp_config_add("http://x/mcp", name="a")
                await client.mcp_config_add("http://x/mcp", name="b")
            registered = await client.triggers_register([
                {"id": "greet", "when": {"type": "step", "turn": 1}, "actions": [{"type": "say", "text": "hello"}]},
                {"id": "bye", "when": {"type": "conversational", "where": {"message": {"regex": "(?i)done"}}},
                 "actions": [{"type": "say", "text": "thanks"}, {"type": "end"}]},
                {"id": "env", "when": {"type": "all", "of": [{"type": "step", "turn": 2, "cmp": "gte"},
                                                               {"type": "env_trigger", "env_id": "mail",
                                                                "trigger_id": "t1"}]},
                 "actions": [{"type": "say", "text": "saw the mail"}]},
            ])
            d1 = await client.triggers_decide(1, "hi", context_id="c")
            d1again = await client.triggers_decide(2, "hmm", context_id="c")
            d3 = await client.triggers_decide(3, "ok", context_id="c", env_triggers={"mail": {"t1": "fired"}})
            d4 = await client.triggers_decide(4, "all done", context_id="c", env_triggers={"mail": {"t1": "fired"}})
            reset = await client.triggers_decide(1, "hi", context_id="c")
            with pytest.raises(A2AExtensionError) as bad_trigger:
                await client.triggers_register([{"id": "x", "when": {"type": "nope"}, "actions": [{"type": "end"}]}])
            with pytest.raises(A2AExtensionError) as changed:
                await client.triggers_register([{"id": "greet", "when": {"type": "step", "turn": 2},
                                                 "actions": [{"type": "end"}]}])
            state = await client.triggers_state()
            return (added, skills, errors, card, peers, dup_mcp.value, registered, d1, d1again, d3, d4, reset,
                    bad_trigger.value, changed.value, state)

    with serving_agent(ScriptedAgent()) as base:
        (added, skills, errors, card, peers, dup_mcp, registered, d1, d1again, d3, d4, reset, bad_trigger, changed,
         state) = run(go(base))
    assert added == {"name": "pdf-tools"} and skills["pdf-tools"] == {"description": "Work with PDFs"}
    assert errors["dup"].status == 409 and errors["bad"].status == 400 and "name" in errors["bad"].detail
    assert any(s["name"] == "pdf-tools" for s in card["skills"])
    assert peers == [{"name": "helper", "url": "http://127.0.0.1:1/a2a", "description": None}]
    assert dup_mcp.status == 409
    assert registered["added"] == ["greet", "bye", "env"]
    assert d1 == {"parts": [{"kind": "text", "text": "hello"}], "done": False, "fired": ["greet"]}
    assert d1again == {"parts": [], "done": False, "fired": []}
    assert d3["fired"] == ["env"] and d3["parts"][0]["text"] == "saw the mail"
    assert d4 == {"parts": [{"kind": "text", "text": "thanks"}], "done": True, "fired": ["bye"]}
    assert reset["fired"] == ["greet"]          # turn 1 again: the context starts over
    assert bad_trigger.status == 400 and "when.type" in bad_trigger.detail
    assert changed.status == 400 and "different spec" in changed.detail
    assert [e["kind"] for e in state["firing_log"]].count("fired") == 4


def test_trajectory_errors():
    async def go(base):
        async with A2AClient(base) as client:
            out = {}
            for key, kwargs in [("unknown_task", {"task_id": "nope"}), ("unknown_ctx", {"context_id": "nope"}),
                                ("bad_limit", {"context_id": "x", "after": 0, "limit": 0})]:
                with pytest.raises(A2AExtensionError) as e:
                    await client.trajectory_get(**kwargs)
                out[key] = e.value
            return out

    with serving_agent(ScriptedAgent()) as base:
        out = run(go(base))
    assert out["unknown_task"].status == 404 and out["unknown_ctx"].status == 404
    assert out["bad_limit"].status == 400 and "limit" in out["bad_limit"].detail
