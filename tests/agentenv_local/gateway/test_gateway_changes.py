"""The gateway's changelog (`urn:agentenv:changes/v1`, `GET /changes`): rows an env reports in its tool results'
`_meta` are taken out of the results, numbered gateway-wide and attributed to exactly the call that made them,
over a real gateway served on HTTP, with real MCP clients, in-process and subprocess (HTTP) children.

Tests marked "needs Gateway.call absorbing" depend on `Gateway.call` handing each child result to
`Gateway._absorb_changes` (the agent-call half of the wiring)."""

from __future__ import annotations

import json
import threading

import pytest
from kits.gateway import ECHO, ROOT, gateway_serving, http, load

from agentenv_local.gateway.changes import ChangeLog, ChangesError, page_params
from agentenv_local.gateway.server import ChildSpec

CRM = ROOT / "examples" / "envs" / "crm" / "server.py"
CRM_SEED = ROOT / "examples" / "envs" / "crm" / "seed.json"
CHANGES_URI = "urn:agentenv:changes/v1"
# The fixtures `kv_file` and `kv` (the env tests' key-value env, KV_SOURCE) come from conftest.py.


def step(h, tool, arguments, role):
    r = h.post("/step", json={"action": "call_tool", "tool_name": tool, "arguments": arguments},
               headers={"AgentEnv-Role": role})
    assert r.status_code == 200, r.text
    return r.json()


def trajectory(h):
    return [json.loads(line) for line in h.get("/trajectory").text.splitlines()]


def changes(h, **query):
    r = h.get("/changes", params=query)
    assert r.status_code == 200, r.text
    return r.json()


def mcp_call(base, tool, arguments, role):
    import asyncio

    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def go():
        async with httpx2.AsyncClient(headers={"AgentEnv-Role": role}, timeout=30) as client, \
                Client(streamable_http_client(base + "/mcp", http_client=client)) as mcp:
            return await mcp.call_tool(tool, arguments)

    return asyncio.run(go())


# --- no child keeps one ------------------------------------------------------------------------------------------

def test_without_a_changelog_child_changes_is_404_and_ids_are_null():
    with gateway_serving("plain", [ChildSpec("echo", load(ECHO))]) as (base, _gw), http(base) as h:
        r = h.get("/changes", params={"after_id": "nope"})
        assert (r.status_code, r.json()) == (404, {"ok": False, "error": "this env keeps no changelog"})
        assert h.get("/state").json()["changelog_id"] is None
        assert step(h, "echo", {"text": "hi"}, "alice")["changelog_id"] is None
        card = h.get("/.well-known/agent-env.json").json()
        assert CHANGES_URI not in {e["uri"] for e in card["capabilities"]["extensions"]}
        done = [e for e in trajectory(h) if e["event_type"] == "tool_call_result"]
        assert (done[0]["changelog_id_before"], done[0]["changelog_id"]) == (None, None)


# --- a declaring child -------------------------------------------------------------------------------------------

def test_a_declaring_child_makes_the_gateway_keep_a_changelog(kv):
    with gateway_serving("store", [ChildSpec("kv", kv)]) as (base, _gw), http(base) as h:
        assert changes(h) == {"changes": [], "changelog_id": 0, "next_after_id": 0, "has_more": False,
                              "oldest_id": None}
        assert h.get("/state").json()["changelog_id"] == 0
        card = h.get("/.well-known/agent-env.json").json()
        ext = next(e for e in card["capabilities"]["extensions"] if e["uri"] == CHANGES_URI)
        assert ext["params"]["endpoint"] == "/changes"
        assert ext["params"]["methods"]["get"]["method"] == "GET"
        assert ext["params"]["methods"]["get"]["endpoint"] == "/changes"
        child_ext = next(e for e in card["children_environments"][0]["capabilities"]["extensions"]
                         if e["uri"] == CHANGES_URI)
        assert "endpoint" not in child_ext["params"]  # a declaration: nothing to rewrite
        assert child_ext["params"]["meta_key"] == "agentenv.io/changes"


@pytest.mark.parametrize(("query", "message"), [
    ({"after_id": "x"}, "after_id must be an integer 0 or more, got 'x'"),
    ({"after_id": "1.5"}, "after_id must be an integer 0 or more, got '1.5'"),
    ({"after_id": "-1"}, "after_id must be 0 or more, got -1"),
    ({"limit": "0"}, "limit must be between 1 and 10000, got 0"),
    ({"limit": "10001"}, "limit must be between 1 and 10000, got 10001"),
    ({"limit": ""}, "limit must be an integer between 1 and 10000, got ''"),
])
def test_changes_query_is_validated(kv, query, message):
    with gateway_serving("store", [ChildSpec("kv", kv)]) as (base, _gw), http(base) as h:
        r = h.get("/changes", params=query)
        assert (r.status_code, r.json()) == (400, {"ok": False, "error": message})
        assert h.get("/changes", params={"after_id": "0", "limit": "10000"}).status_code == 200


def test_trigger_tool_actions_are_attributed_as_internal_calls(kv):
    with gateway_serving("store", [ChildSpec("kv", kv)]) as (base, _gw), http(base) as h:
        r = h.post("/triggers/register", json={"watch_roles": ["bob"], "triggers": [
            {"id": "audit", "when": {"type": "action", "tool": "put"},
             "actions": [{"type": "tool", "tool": "put", "as": "auditor",
                          "args": {"key": "audit", "value": "saw ${args.key}"}}],
             "barrier": {"at": "provoking_call"}}]})
        assert r.status_code == 200, r.text
        step(h, "put", {"key": "a", "value": "1"}, "bob")
        events = trajectory(h)
        fired = next(e for e in events if e["event_type"] == "trigger_fired")
        rows = [row for row in changes(h)["changes"] if row["key"] == "audit"]
        assert len(rows) == 1
        row = rows[0]
        assert row["server"] == "kv" and row["op"] == "insert" and row["after"] == {"key": "audit", "value": "saw a"}
        assert row["actors"] == [{"event_type": "internal_tool_call", "role": "auditor", "tool": "put",
                                  "tool_call_event_id": None, "source": "trigger_engine",
                                  "caused_by": [{"trigger_id": "audit", "event_id": fired["event_id"]}]}]
        assert h.get("/state").json()["changelog_id"] == changes(h)["changelog_id"] >= 1


def test_a_subprocess_http_child_declares_on_its_card(tmp_path):
    """The crm example as a subprocess child over HTTP: the gateway learns from its card that it keeps one."""
    with gateway_serving("office", [ChildSpec("crm", str(CRM))]) as (base, _gw), http(base) as h:
        assert changes(h)["changelog_id"] == 0
        card = h.get("/.well-known/agent-env.json").json()
        assert CHANGES_URI in {e["uri"] for e in card["capabilities"]["extensions"]}


# --- end to end through Gateway.call (needs Gateway.call absorbing) ----------------------------------------------

def test_rows_are_numbered_attributed_and_never_reach_the_agent(kv):
    with gateway_serving("store", [ChildSpec("kv", kv)]) as (base, _gw), http(base) as h:
        over_mcp = mcp_call(base, "put", {"key": "a", "value": "1"}, "alice")
        assert over_mcp.is_error is False and "agentenv.io/changes" not in (over_mcp.meta or {})
        put_b = step(h, "put", {"key": "b", "value": "2"}, "bob")
        assert "_meta" not in put_b and put_b["changelog_id"] == 2
        gone = step(h, "delete", {"key": "a"}, "bob")
        assert "_meta" not in gone and gone["changelog_id"] == 3
        read = step(h, "get", {"key": "b"}, "carol")
        assert read["structuredContent"] == {"result": "2"} and read["changelog_id"] == 3
        assert h.get("/state").json()["changelog_id"] == 3

        events = trajectory(h)
        calls = {e["event_id"]: e for e in events if e["event_type"] == "tool_call"}
        done = [e for e in events if e["event_type"] == "tool_call_result"]
        assert [(e["changelog_id_before"], e["changelog_id"]) for e in done] == [(0, 1), (1, 2), (2, 3), (3, 3)]
        assert all("_meta" not in e["tool_call_result"] for e in done)

        page = changes(h)
        rows = page["changes"]
        assert [r["id"] for r in rows] == [1, 2, 3] and page["changelog_id"] == 3
        assert [(r["op"], r["key"]) for r in rows] == [("insert", "a"), ("insert", "b"), ("delete", "a")]
        assert rows[2]["before"] == {"key": "a", "value": "1"} and rows[2]["after"] is None
        for row, result in zip(rows, done, strict=False):
            assert row["server"] == "kv" and row["timestamp_utc"]
            (actor,) = row["actors"]
            assert actor["tool_call_event_id"] == result["tool_call_event_id"]
            call = calls[actor["tool_call_event_id"]]
            assert actor["event_type"] == "tool_call"
            assert actor["role"] == call["role"] and actor["tool"] == call["tool_call"]["function_name"]
        assert [r["actors"][0]["role"] for r in rows] == ["alice", "bob", "bob"]
        assert rows[1]["actors"][0]["source"] == "step_api" and "source" not in rows[0]["actors"][0]


@pytest.mark.parametrize("mode", ["performance", "consistent"])
def test_concurrent_roles_each_get_one_exact_actor(kv, mode):
    roles = [f"r{i}" for i in range(6)]
    with gateway_serving("store", [ChildSpec("kv", kv)], mode=mode) as (base, _gw), http(base) as h:
        errors: list[BaseException] = []

        def write(role):
            try:
                with http(base) as mine:
                    step(mine, "put_slowly", {"key": role, "value": role, "pause": 0.1}, role)
            except BaseException as e:  # reported below
                errors.append(e)

        threads = [threading.Thread(target=write, args=(role,)) for role in roles]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert not errors
        rows = changes(h)["changes"]
        assert len(rows) == 2 * len(roles) and [r["id"] for r in rows] == list(range(1, 2 * len(roles) + 1))
        for row in rows:
            (actor,) = row["actors"]
            assert actor["role"] == row["key"].removesuffix(".shadow")
        if mode == "performance":  # the calls overlapped, and still each row names its one call
            keys = [r["key"] for r in rows]
            assert keys.index(roles[-1]) < max(keys.index(f"{role}.shadow") for role in roles)
        events = trajectory(h)
        for result in (e for e in events if e["event_type"] == "tool_call_result"):
            mine = [r for r in rows if r["actors"][0]["tool_call_event_id"] == result["tool_call_event_id"]]
            assert len(mine) == 2


def test_paging_and_truncation_through_the_gateway(kv):
    with gateway_serving("store", [ChildSpec("kv", kv)]) as (base, _gw), http(base) as h:
        assert step(h, "bulk", {"n": 25}, "alice")["changelog_id"] == 25
        first = changes(h, limit=10)
        assert [r["id"] for r in first["changes"]] == list(range(1, 11))
        assert (first["next_after_id"], first["has_more"]) == (10, True)
        last = changes(h, after_id=20, limit=10)
        assert [r["id"] for r in last["changes"]] == [21, 22, 23, 24, 25]
        assert (last["next_after_id"], last["has_more"]) == (25, False)
        assert changes(h, after_id=25)["changes"] == [] and changes(h, after_id=999)["changes"] == []
        assert len(changes(h)["changes"]) == 25  # default limit 1000

        big = step(h, "bulk", {"n": 1003}, "alice")
        assert "_meta" not in big and big["changelog_id"] == 1025
        rows = changes(h, after_id=25, limit=10000)["changes"]
        assert len(rows) == 1000 and rows[-1]["truncated"] == 3 and "truncated" not in rows[-2]


def test_a_subprocess_crm_child_reports_its_writes():
    with gateway_serving("office", [ChildSpec("crm", str(CRM))]) as (base, _gw), http(base) as h:
        seed = json.loads(CRM_SEED.read_text())
        r = h.post("/svc/mcp-crm/agentenv", json={"jsonrpc": "2.0", "id": 1, "method": "data/add",
                                                   "params": {"parts": [{"kind": "data", "data": seed}]}})
        assert r.json()["result"] == {}
        assert changes(h)["changes"] == []  # the data plane is not a tool call
        moved = step(h, "update_deal_stage", {"deal_id": "deal-101", "stage": "closed_won"}, "alice")
        assert moved["isError"] is False and "_meta" not in moved and moved["changelog_id"] == 2
        deal, activity = changes(h)["changes"]
        assert (deal["server"], deal["table"], deal["op"], deal["key"]) == ("crm", "deals", "update", "deal-101")
        assert (deal["before"]["stage"], deal["after"]["stage"]) == ("negotiation", "closed_won")
        assert (activity["table"], activity["op"], activity["before"]) == ("activities", "insert", None)
        assert activity["after"]["kind"] == "stage_change" and activity["after"]["actor"] == "alice"
        assert deal["actors"][0]["role"] == activity["actors"][0]["role"] == "alice"


# --- ChangeLog on its own ----------------------------------------------------------------------------------------

def test_changelog_absorb_page_and_bounds():
    log = ChangeLog()
    assert log.keeps is False and log.head_or_none() is None
    plain = {"content": [], "isError": False, "_meta": {"other": 1}}
    assert log.absorb("kv", plain, {"event_type": "tool_call"}) == (None, None)
    assert plain["_meta"] == {"other": 1}
    actor = {"event_type": "tool_call", "role": "a", "tool": "t", "tool_call_event_id": "event_1"}
    result = {"content": [], "isError": False, "_meta": {"agentenv.io/changes": [
        {"table": "t", "op": "insert", "key": 1, "after": {"id": 1}},
        {"table": "t", "op": "upsert", "key": 2},  # malformed: skipped
        "junk",
    ]}}
    assert log.absorb("kv", result, actor) == (0, 1)
    assert "_meta" not in result and log.keeps is True and log.head_or_none() == 1
    mixed = {"content": [], "_meta": {"keep": True, "agentenv.io/changes": [], "agentenv.io/changes_truncated": 0}}
    assert log.absorb("kv", mixed, actor) == (1, 1) and mixed["_meta"] == {"keep": True}
    (row,) = log.page()["changes"]
    assert row == {"id": 1, "server": "kv", "table": "t", "op": "insert", "key": 1, "before": None,
                   "after": {"id": 1}, "timestamp_utc": row["timestamp_utc"], "actors": [actor]}

    small = ChangeLog(max_rows=3)
    for i in range(5):
        small.absorb("kv", {"_meta": {"agentenv.io/changes": [{"table": "t", "op": "insert", "key": i}]}}, actor)
    page = small.page(0, 10)
    assert [r["id"] for r in page["changes"]] == [3, 4, 5] and page["oldest_id"] == 3
    assert [r["id"] for r in small.page(3, 10)["changes"]] == [4, 5]
    assert [r["id"] for r in small.page(4, 1)["changes"]] == [5]


def test_page_params():
    assert page_params(None, None) == (0, 1000)
    assert page_params(" 7 ", "10000") == (7, 10000)
    with pytest.raises(ChangesError) as err:
        page_params("0", "abc")
    assert err.value.status == 400 and err.value.to_wire() == {
        "ok": False, "error": "limit must be an integer between 1 and 10000, got 'abc'"}
