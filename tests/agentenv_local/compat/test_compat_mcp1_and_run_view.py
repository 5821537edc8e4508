"""compat.mcp1 (which scripts are written for mcp 1.x, and a facade scoped to such a script's own imports) and
compat.run_view (the reference's `Run` that is also our run dict), on real modules and real mcp 2.x types."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agentenv_local.compat import mcp1
from agentenv_local.compat.run_view import Run, RunRecordUnavailable, build_run

REFERENCE_STYLE = [
    "async def v(u):\n    async with streamable_http_client(u) as (read, write, _):\n        pass\n",
    "from mcp.client.streamable_http import streamablehttp_client\n",
    "def v(result):\n    return result.isError\n",
    "def v(tools):\n    return tools.tools[0].inputSchema\n",
    "import mcp.client.streamable_http as t\nasync def v(u):\n"
    "    async with t.streamable_http_client(u) as (r, w, g):\n        pass\n",
]
OURS = [
    "from mcp import Client\nasync def run(input):\n    async with Client(input['env']['mcp_url']) as c:\n"
    "        return (await c.call_tool('echo', {'text': 'x'})).is_error\n",
    "async def v(u):\n    async with streamable_http_client(u) as (read, write):\n        pass\n",
    "def v(tool):\n    return tool['inputSchema']\n",  # a dict key, not a 1.x attribute
    "def broken(:\n",
]


@pytest.mark.parametrize("source", REFERENCE_STYLE)
def test_a_script_written_for_mcp1_is_told_by_a_spelling_only_1x_has(source):
    assert mcp1.uses_mcp1(source)


@pytest.mark.parametrize("source", OURS)
def test_scripts_written_for_mcp2_are_left_alone(source):
    assert not mcp1.uses_mcp1(source)


def test_our_shipped_scripts_are_not_taken_for_mcp1():
    root = Path(__file__).resolve().parents[3]
    scripts = [p for p in (root / "examples").rglob("*.py") if "mcp" in p.read_text(errors="replace")]
    assert scripts and not [p for p in scripts if mcp1.uses_mcp1(p.read_text())]


FACADE_CHECK = """
import importlib.util, sys
from agentenv_local.compat import mcp1

spec = importlib.util.spec_from_file_location("ref_style_under_test", sys.argv[1])
module = importlib.util.module_from_spec(spec)
mcp1.prepare_module(module)
spec.loader.exec_module(module)
import mcp.client.streamable_http as real

assert module.streamable_http_client is mcp1.streamable_http_client is module.streamablehttp_client
assert module.mcp.client.streamable_http.streamable_http_client is mcp1.streamable_http_client
assert module.mcp.client.sse is sys.modules["mcp.client.sse"]  # a later submodule: the real one
assert module.ClientSession is sys.modules["mcp"].ClientSession
assert real.streamable_http_client is not mcp1.streamable_http_client  # the process's own mcp is untouched
result = module.types.CallToolResult(content=[module.types.TextContent(type="text", text="x")], isError=True,
                                     structuredContent={"a": 1})
assert (result.isError, result.structuredContent, result.is_error) == (True, {"a": 1}, True)
print("facade ok")
"""


def test_the_facade_is_seen_only_by_the_prepared_module(tmp_path):
    # in a subprocess of its own, as the runner uses it: the camelCase properties change mcp 2.x's classes there
    script = tmp_path / "ref_style.py"
    script.write_text("import mcp\nimport mcp.client.streamable_http\nfrom mcp.client.streamable_http import "
                      "streamable_http_client, streamablehttp_client\nfrom mcp import ClientSession, types\n"
                      "import mcp.client.sse\n")
    done = subprocess.run([sys.executable, "-c", FACADE_CHECK, str(script)], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0 and done.stdout.strip() == "facade ok", done.stderr


def prompt(turns: list[dict]) -> dict:
    return {"prompt_id": "p", "agent_name": "helper", "prompt_text": turns[0]["prompt"], "turns": turns}


EVENTS = [{"kind": "added", "trigger_id": "t"},
          {"kind": "detected", "trigger_id": "t", "provoking": {"tool": "echo"}, "ts": "2026-01-01T00:00:00+00:00"},
          {"kind": "fired", "trigger_id": "t", "ts": "2026-01-01T00:00:01+00:00",
           "virtual_time": "2025-03-10T09:00:00Z"},
          {"kind": "failed", "trigger_id": "u", "ts": "2026-01-01T00:00:02+00:00"}]


def test_run_is_our_dict_with_the_reference_queries():
    data = {"prompt_id": "p", "response": None, "prompt_responses": [], "seed": {}, "env": {"id": "e"}}
    one = prompt([{"prompt": "hi", "response": "hello"}])
    run = build_run(data, {"prompt": one, "env_events": {"e": EVENTS}})
    assert isinstance(run, dict) and dict(run) == data and json.loads(json.dumps(run)) == data
    [turn] = run.turns
    assert run.turns() == run.turns and (turn.message.text, turn.reply.text, turn.reply.author) == (
        "hi", "hello", "helper")
    fired, failed = run.firings(env="e")
    assert (fired.trigger_id, fired.ok, fired.turn, fired.provoked_by, fired.virtual_time.year) == (
        "t", True, 1, {"tool": "echo"}, 2025)
    assert (failed.ok, failed.provoked_by) == (False, None) and turn.firings == (fired, failed)
    assert run.firing("t") is fired and run.firing("never") is None
    assert run.as_of(0).turns == () and run.as_of(0).firings() == () and dict(run.as_of(0)) == data
    assert run.as_of(5) is run
    with pytest.raises(ValueError, match="turn must be >= 0"):
        run.as_of(-1)
    with pytest.raises(LookupError, match="no turn 2"):
        run.turn(2)
    with pytest.raises(RunRecordUnavailable, match="env:other: no firing log was captured"):
        run.firings(env="other")


def test_without_a_prompt_env_firings_fall_before_the_first_message_and_a_missing_log_raises():
    run = build_run({}, {"prompt": None, "env_events": {"e": EVENTS}, "env_unavailable": {"down": "no gateway"}})
    assert run.turns == ()
    assert [f.turn for f in run.firings(env="e")] == [0, 0]
    with pytest.raises(RunRecordUnavailable, match="env:down: no gateway"):
        run.firings()  # any log missing: the reference refuses an answer that could be incomplete
    assert isinstance(run, Run) and run.unavailable == {"env:down": "no gateway"}
