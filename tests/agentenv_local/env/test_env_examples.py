"""The example envs: notes (SQLite state, roles, virtual time, data-plane load/export, op extensions)."""

from __future__ import annotations

import json

import httpx2
from kits.data_plane import rpc
from kits.env_sdk import run, serving

from agentenv_local.env import FilePart


def test_notes_tools_use_role_and_virtual_time(notes_env):
    env = notes_env
    added = run(env.call_tool("add_note", {"title": "Standup", "body": "Monday 9am", "tags": ["work"]},
                              role="alice", virtual_time="2025-03-10T09:00:00Z"))
    assert added["isError"] is False
    note = added["structuredContent"]
    assert note == {"id": 1, "title": "Standup", "body": "Monday 9am", "tags": ["work"], "author": "alice",
                    "created_at": "2025-03-10T09:00:00Z"}
    run(env.call_tool("add_note", {"title": "Groceries", "tags": ["home"]}, virtual_time="2025-03-11T10:30:00Z"))
    refused = run(env.call_tool("add_note", {"title": "x"}, role="viewer"))
    assert refused["isError"] and refused["structuredContent"]["code"] == "permission_denied"
    listing = run(env.call_tool("list_notes", {"order": "oldest"}))["structuredContent"]["result"]
    assert [n["title"] for n in listing] == ["Standup", "Groceries"]
    assert [n["title"] for n in run(env.call_tool("list_notes", {"tag": "home"}))["structuredContent"]["result"]] == [
        "Groceries"]
    assert run(env.call_tool("search_notes", {"query": "MONDAY"}))["structuredContent"]["result"][0]["id"] == 1
    missing = run(env.call_tool("get_note", {"note_id": 99}))
    assert missing["content"][0]["text"] == "not_found: no note has id 99"
    assert run(env.call_tool("delete_note", {"note_id": 1}, role="viewer"))["isError"]
    assert run(env.call_tool("delete_note", {"note_id": 1}))["structuredContent"] == {"deleted": 1, "title": "Standup"}
    assert run(env.call_tool("add_note", {"title": ""}))["structuredContent"]["code"] == "invalid_arguments"


def test_notes_data_plane_loads_and_exports(notes_env, tmp_path):
    env = notes_env
    seed = {"notes": [{"title": "A", "body": "first", "tags": ["x"], "created_at": "2025-01-01T00:00:00Z"}]}
    file = tmp_path / "more.json"
    file.write_text(json.dumps({"notes": [{"title": "B", "created_at": "2025-01-02T00:00:00Z"}]}))
    parts = [{"kind": "data", "data": seed}, FilePart.from_path(file, mime_type="application/json").model_dump(),
             {"kind": "text", "text": "C\nfrom text"}]
    assert rpc(env, "data/add", {"parts": parts})["result"] == {}
    exported = rpc(env, "data/get")["result"]["parts"]
    assert [n["title"] for n in exported[0]["data"]["notes"]] == ["A", "B", "C"]
    assert exported[0]["data"]["notes"][2]["body"] == "from text"
    assert rpc(env, "data/reset")["result"] == {}
    assert rpc(env, "data/get")["result"]["parts"] == [{"kind": "data", "data": {"notes": []}}]
    assert rpc(env, "data/add", {"parts": exported})["result"] == {}          # an export loads back as it was
    assert rpc(env, "data/get")["result"]["parts"] == exported
    bad = rpc(env, "data/add", {"parts": [{"kind": "data", "data": {"rows": []}}]})
    assert bad["error"]["code"] == -32000 and bad["error"]["data"]["code"] == "bad_data"
    # ids restart after a reset: a reset env is indistinguishable from a fresh one
    rpc(env, "data/reset")
    assert run(env.call_tool("add_note", {"title": "again"}))["structuredContent"]["id"] == 1


def test_notes_over_http_card_and_op_extensions(notes_env):
    env = notes_env
    run(env.call_tool("add_note", {"title": "t", "tags": ["a"]}, role="alice"))
    run(env.call_tool("add_note", {"title": "u"}))
    with serving(env) as base, httpx2.Client() as h:
        card = h.get(base + "/.well-known/agent-env.json").json()
        uris = [e["uri"] for e in card["capabilities"]["extensions"]]
        assert uris == ["urn:agentenv:notes-stats/v1", "urn:agentenv:intake/v1"]
        stats = card["capabilities"]["extensions"][0]["params"]
        assert stats["version"] == 1 and set(stats["methods"]) == {"count", "authors"}
        assert h.get(base + stats["methods"]["count"]["endpoint"]).json() == {"notes": 2}
        assert h.get(base + stats["methods"]["count"]["endpoint"], params={"tag": "a"}).json() == {"notes": 1}
        assert h.get(base + "/agentenv/ext/notes-stats/authors").json() == {"authors": {"alice": 1, "default": 1}}
        tools = {t["name"]: t for t in card["capabilities"]["tools"]}
        assert set(tools) == {"add_note", "list_notes", "get_note", "search_notes", "delete_note"}
        assert "ctx" not in tools["add_note"]["inputSchema"]["properties"]
        assert tools["add_note"]["inputSchema"]["properties"]["title"]["maxLength"] == 200
