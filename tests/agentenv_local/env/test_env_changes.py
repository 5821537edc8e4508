"""An env that keeps a changelog: `ctx.record_change(...)` rows come back in the tool result's
`_meta["agentenv.io/changes"]` on every transport (in-process, in-memory MCP, streamable HTTP, stdio), capped per
call, validated, and the card advertises `urn:agentenv:changes/v1` only when the env declares it."""

from __future__ import annotations

import sys
import textwrap

import pytest
from kits.env_sdk import ROOT, run, serving

from agentenv_local.env import Env, ToolContext, environment_card, tool

CHANGES = "agentenv.io/changes"
TRUNCATED = "agentenv.io/changes_truncated"

# A key-value env in a file of its own (for stdio and subprocess children); imported by the tests too.
KV_SOURCE = textwrap.dedent('''
    import asyncio

    from agentenv_local.env import Env, ToolContext, environment_card, record_change, tool


    @environment_card(name="kv", description="A key-value store that reports what it changes.")
    class Kv(Env):
        keeps_changelog = True

        def __init__(self):
            self.data = {}

        def _write(self, key, value):
            before = {"key": key, "value": self.data[key]} if key in self.data else None
            self.data[key] = value
            # deeper code reports through the current call's context
            record_change("kv", "update" if before else "insert", key, before=before,
                          after={"key": key, "value": value})

        @tool()
        def put(self, key: str, value: str) -> dict:
            "Set a key."
            self._write(key, value)
            return {"ok": True}

        @tool()
        async def put_slowly(self, ctx: ToolContext, key: str, value: str, pause: float = 0.05) -> dict:
            "Set a key, then its shadow after a pause (so concurrent calls interleave)."
            self._write(key, value)
            await asyncio.sleep(pause)
            ctx.record_change("kv", "insert", key + ".shadow", after={"key": key + ".shadow", "value": value})
            return {"ok": True}

        @tool()
        def delete(self, ctx: ToolContext, key: str) -> dict:
            "Delete a key."
            value = self.data.pop(key)
            ctx.record_change("kv", "delete", key, before={"key": key, "value": value})
            return {"ok": True}

        @tool()
        def bulk(self, ctx: ToolContext, n: int) -> int:
            "Insert n keys."
            for i in range(n):
                ctx.record_change("kv", "insert", f"k{i}", after={"key": f"k{i}", "value": str(i)})
            return n

        @tool()
        def get(self, key: str) -> str:
            "Read a key (changes nothing)."
            return self.data.get(key, "")

        @tool()
        def bad(self, ctx: ToolContext, op: str) -> dict:
            "Record a row with any op."
            ctx.record_change("kv", op, "x", after={"key": "x"})
            return {}
''')


@environment_card(name="threaded")
class Threaded(Env):
    sync_handlers_in_thread = True
    keeps_changelog = True

    @tool()
    def write(self, ctx: ToolContext) -> str:
        "Write a composite-keyed row from the worker thread."
        ToolContext.current().record_change("orders", "insert", {"tenant": "t1", "id": 7},
                                            after={"tenant": "t1", "id": 7, "total": 9.5})
        return "ok"


@environment_card(name="undeclared")
class Undeclared(Env):
    @tool()
    def write(self, ctx: ToolContext) -> str:
        "Records a row without declaring a changelog."
        ctx.record_change("t", "insert", 1, after={"id": 1})
        return "ok"


@pytest.fixture()
def kv_file(tmp_path):
    path = tmp_path / "kv_env.py"
    path.write_text(KV_SOURCE)
    return path


@pytest.fixture()
def kv(kv_file):
    from agentenv_local.env import load_env

    return load_env(kv_file)


def test_rows_ride_in_the_result_meta_in_process(kv):
    first = run(kv.call_tool("put", {"key": "a", "value": "1"}))
    assert first["isError"] is False and first["structuredContent"] == {"ok": True}
    assert first["_meta"] == {CHANGES: [{"table": "kv", "op": "insert", "key": "a", "before": None,
                                         "after": {"key": "a", "value": "1"}}]}
    second = run(kv.call_tool("put", {"key": "a", "value": "2"}))
    assert second["_meta"][CHANGES] == [{"table": "kv", "op": "update", "key": "a",
                                         "before": {"key": "a", "value": "1"}, "after": {"key": "a", "value": "2"}}]
    gone = run(kv.call_tool("delete", {"key": "a"}))
    assert gone["_meta"][CHANGES] == [{"table": "kv", "op": "delete", "key": "a",
                                       "before": {"key": "a", "value": "2"}, "after": None}]
    # a call that records nothing carries no meta key at all
    assert "_meta" not in run(kv.call_tool("get", {"key": "a"}))


def test_rows_are_per_call_over_the_in_memory_mcp_client(kv):
    async def go():
        async with kv.client() as client:
            put = await client.call_tool("put", {"key": "b", "value": "x"})
            read = await client.call_tool("get", {"key": "b"})
            return put, read

    put, read = run(go())
    assert put.meta[CHANGES] == [{"table": "kv", "op": "insert", "key": "b", "before": None,
                                  "after": {"key": "b", "value": "x"}}]
    assert CHANGES not in (read.meta or {})


def test_rows_over_streamable_http(kv):
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def go(url):
        async with Client(streamable_http_client(url)) as client:
            return await client.call_tool("put", {"key": "h", "value": "over http"})

    with serving(kv) as base:
        result = run(go(base + "/mcp"))
    assert result.meta[CHANGES] == [{"table": "kv", "op": "insert", "key": "h", "before": None,
                                     "after": {"key": "h", "value": "over http"}}]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_rows_over_stdio(kv_file, mode):
    from mcp import Client, StdioServerParameters

    async def go():
        params = StdioServerParameters(command=sys.executable, args=["-m", "agentenv_local.env", str(kv_file),
                                                                     "--stdio"], cwd=str(ROOT))
        async with Client(params, mode=mode) as client:
            put = await client.call_tool("put", {"key": "s", "value": "over stdio"})
            read = await client.call_tool("get", {"key": "s"})
            return put, read

    put, read = run(go())
    assert put.meta[CHANGES] == [{"table": "kv", "op": "insert", "key": "s", "before": None,
                                  "after": {"key": "s", "value": "over stdio"}}]
    assert read.structured_content == {"result": "over stdio"} and CHANGES not in (read.meta or {})


def test_rows_are_capped_per_call(kv):
    from agentenv_local.env.context import MAX_CHANGES_PER_CALL

    result = run(kv.call_tool("bulk", {"n": MAX_CHANGES_PER_CALL + 7}))
    rows = result["_meta"][CHANGES]
    assert len(rows) == MAX_CHANGES_PER_CALL == 1000
    assert rows[0]["key"] == "k0" and rows[-1]["key"] == "k999"
    assert result["_meta"][TRUNCATED] == 7
    exact = run(kv.call_tool("bulk", {"n": MAX_CHANGES_PER_CALL}))
    assert len(exact["_meta"][CHANGES]) == 1000 and TRUNCATED not in exact["_meta"]


def test_a_bad_row_is_a_clear_error(kv):
    from agentenv_local.env import bound

    answer = run(kv.call_tool("bad", {"op": "upsert"}))
    assert answer["isError"] is True
    assert "record_change: op must be 'insert', 'update' or 'delete', got 'upsert'" in answer["content"][0]["text"]
    assert "_meta" not in answer
    ctx = ToolContext.as_caller("alice")
    with pytest.raises(ValueError, match="op must be 'insert', 'update' or 'delete', got 'UPDATE'"):
        ctx.record_change("kv", "UPDATE", "k")
    with pytest.raises(ValueError, match="table must be a non-empty string"):
        ctx.record_change("", "insert", "k")
    with pytest.raises(ValueError, match="key must identify the row"):
        ctx.record_change("kv", "insert", None)
    with pytest.raises(TypeError, match="after must be a dict of the row's columns or None, got list"):
        ctx.record_change("kv", "insert", "k", after=[1, 2])
    with pytest.raises(TypeError, match="before must be JSON-able"):
        ctx.record_change("kv", "delete", "k", before={"v": object()})
    with bound(ctx):
        from agentenv_local.env import record_change

        row = {"key": "k", "value": "v"}
        record_change("kv", "insert", "k", after=row)
        row["value"] = "changed later"  # a recorded row is a copy
    assert ctx.recorded_changes == [{"table": "kv", "op": "insert", "key": "k", "before": None,
                                     "after": {"key": "k", "value": "v"}}]


def test_outside_a_tool_call_a_row_is_validated_and_dropped():
    from agentenv_local.env import EMPTY, record_change

    assert ToolContext.current() is EMPTY
    record_change("kv", "insert", "k", after={"key": "k"})  # no call bound: nothing to report it to
    assert EMPTY.recorded_changes == []
    with pytest.raises(ValueError):
        record_change("kv", "merge", "k")


def test_rows_from_a_worker_thread_and_non_string_keys():
    result = run(Threaded().call_tool("write", {}))
    assert result["_meta"][CHANGES] == [{"table": "orders", "op": "insert", "key": {"tenant": "t1", "id": 7},
                                         "before": None, "after": {"tenant": "t1", "id": 7, "total": 9.5}}]


def test_the_card_advertises_changes_only_when_declared(kv, echo_env):
    exts = {e.uri: e for e in kv.card().capabilities.extensions or []}
    entry = exts["urn:agentenv:changes/v1"]
    assert entry.params == {"delivery": "tool_result_meta", "meta_key": CHANGES, "truncated_meta_key": TRUNCATED,
                            "max_rows_per_call": 1000, "ops": ["insert", "update", "delete"]}
    assert entry.required is False
    assert "urn:agentenv:changes/v1" not in {e.uri for e in echo_env.card().capabilities.extensions or []}

    env = Undeclared()
    assert "urn:agentenv:changes/v1" not in {e.uri for e in env.card().capabilities.extensions or []}
    # the rows still ride along (a gateway keeps a changelog once it sees any)
    assert run(env.call_tool("write", {}))["_meta"][CHANGES][0]["key"] == 1
