"""A crash or a hang in an env loaded into the hub cannot take the hub down (issue 16 item 1).

A hostile env (sync and async tools that raise, hang, sys.exit, block the loop) is deployed in a real hub
session; each faulty call fails with an error naming the env and the fix, and afterwards the hub still deploys
and serves another env. An env version that misbehaved is deployed as a subprocess from then on ("moved out");
an env whose code calls os._exit never loads in the hub.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kits.env_deploy import call_tool, on_hub, pid_alive, put_env, result_text

HOSTILE = '''
import asyncio
import sys
import threading
import time

from agentenv_local.env import Env, tool

RELEASE = threading.Event()  # lets a hung sync tool's thread finish when the test ends


class Hostile(Env):
    @tool()
    def ping(self) -> str:
        """Answers pong."""
        return "pong"

    @tool()
    def raise_sync(self) -> str:
        """Raises."""
        raise RuntimeError("sync tool broke")

    @tool()
    async def raise_async(self) -> str:
        """Raises."""
        raise RuntimeError("async tool broke")

    @tool()
    def hang_sync(self) -> str:
        """Blocks its thread (until the module's RELEASE is set)."""
        RELEASE.wait(600)
        return "released"

    @tool()
    async def hang_async(self) -> str:
        """Awaits forever (the loop stays free)."""
        await asyncio.sleep(600)
        return "woke"

    @tool()
    def exit_sync(self) -> str:
        """Calls sys.exit."""
        sys.exit(4)

    @tool()
    async def exit_async(self) -> str:
        """Calls sys.exit."""
        sys.exit(5)

    @tool()
    async def block_loop(self) -> str:
        """Holds the event loop (time.sleep inside async def)."""
        time.sleep(1.5)
        return "blocked"
'''

PROBE = '''
from agentenv_local.env import Env, tool


class Probe(Env):
    @tool()
    def echo(self, text: str) -> str:
        """Echoes."""
        return text
'''


def _folder(tmp_path: Path, name: str, source: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "server.py").write_text(source)
    return folder


def _hub_still_serves(session, tmp_path: Path) -> None:
    """Another env deploys and answers in the same hub."""
    if session.store.documents.find("envs", "probe") is None:
        put_env(session.store, "probe", _folder(tmp_path, "probe", PROBE), module="server.py:Probe")
    record = on_hub(session, session.hub.envs.deploy("probe"))
    try:
        _names, result = call_tool(record["mcp_url"], "echo", {"text": "alive"})
        assert result_text(result) == "alive" and not result.is_error
    finally:
        on_hub(session, session.hub.envs.teardown(record["instance_id"]))


def _deploy_hostile(session, tmp_path: Path, **fields) -> dict:
    if session.store.documents.find("envs", "hostile") is None:
        put_env(session.store, "hostile", _folder(tmp_path, "hostile", HOSTILE), module="server.py:Hostile",
                call_timeout=1, **fields)
    return on_hub(session, session.hub.envs.deploy("hostile"))


def _release(session) -> None:
    import sys

    for name, module in list(sys.modules.items()):
        # its own namespace only: getattr would run a module's __getattr__ (agentenv_protocol's stand-in raises)
        namespace = getattr(module, "__dict__", {})
        if "RELEASE" in namespace and "Hostile" in namespace:
            namespace["RELEASE"].set()


@pytest.mark.parametrize("tool", ["raise_sync", "raise_async"])
def test_a_tool_that_raises_fails_its_call_and_the_env_keeps_serving(session, tmp_path, tool):
    record = _deploy_hostile(session, tmp_path)
    try:
        assert record["children"][0]["kind"] == "in_process"
        _names, result = call_tool(record["mcp_url"], tool)
        assert result.is_error and "tool broke" in result_text(result)
        _names, result = call_tool(record["mcp_url"], "ping")  # a raising tool is no misbehaviour
        assert result_text(result) == "pong"
    finally:
        on_hub(session, session.hub.envs.teardown(record["instance_id"]))
    _hub_still_serves(session, tmp_path)


CASES = {
    "hang_sync": ("env_call_timeout", "did not answer tool 'hang_sync' within its call_timeout of 1s"),
    "hang_async": ("env_call_timeout", "did not answer tool 'hang_async' within its call_timeout of 1s"),
    "exit_sync": ("env_exited", "called sys.exit(4) in tool 'exit_sync'"),
    "exit_async": ("env_exited", "called sys.exit(5) in tool 'exit_async'"),
    "block_loop": ("env_blocked_hub", "held the hub's event loop for"),
}


@pytest.mark.parametrize("tool", sorted(CASES))
def test_a_misbehaving_tool_fails_its_call_and_its_env_is_moved_out_of_the_hub(session, tmp_path, tool):
    code, said = CASES[tool]
    record = _deploy_hostile(session, tmp_path)
    try:
        assert record["children"][0]["kind"] == "in_process"
        _names, result = call_tool(record["mcp_url"], tool)
        text = result_text(result)
        assert result.is_error and text.startswith(f"{code}: env hostile (in the hub) ") and said in text, text
        assert 'run_as = "subprocess"' in str(result.structured_content), result.structured_content
        if tool == "hang_sync":  # its thread is still held: a daemon, so it cannot hold the hub's exit
            import threading

            held = [t for t in threading.enumerate() if t.name == "in-hub-env"]
            assert held and all(t.daemon for t in held), held
    finally:
        _release(session)
        on_hub(session, session.hub.envs.teardown(record["instance_id"]))
    _hub_still_serves(session, tmp_path)
    # the same env version deploys as a subprocess from now on, where it still answers
    again = _deploy_hostile(session, tmp_path)
    try:
        [child] = again["children"]
        assert child["kind"] == "subprocess" and pid_alive(child["pid"]), child
        assert child["moved_out_of_hub"].startswith("it misbehaved in this hub earlier (")
        _names, result = call_tool(again["mcp_url"], "ping")
        assert result_text(result) == "pong"
    finally:
        on_hub(session, session.hub.envs.teardown(again["instance_id"]))


def test_an_env_that_calls_os_exit_never_loads_in_the_hub(session, tmp_path):
    source = HOSTILE + '''

    @tool()
    def hard_exit(self) -> str:
        """Ends its process."""
        import os
        os._exit(6)
'''
    put_env(session.store, "hostile", _folder(tmp_path, "hostile", source), module="server.py:Hostile")
    record = on_hub(session, session.hub.envs.deploy("hostile"))
    try:
        [child] = record["children"]
        assert child["kind"] == "subprocess", child
        assert child["moved_out_of_hub"] == "server.py calls os._exit, which would end the hub"
        pid = child["pid"]
        _names, result = call_tool(record["mcp_url"], "hard_exit")  # its server is gone mid-call
        assert result.is_error, result
        assert not pid_alive(pid)
    finally:
        on_hub(session, session.hub.envs.teardown(record["instance_id"]))
    _hub_still_serves(session, tmp_path)


def test_asking_for_in_process_with_os_exit_is_refused(session, tmp_path):
    from agentenv_local.hosting.envs.instance import DeployError

    folder = _folder(tmp_path, "hostile", "import os\nos._exit(1)\n")
    put_env(session.store, "hostile", folder, module="server.py:Hostile", run_as="in_process")
    with pytest.raises(DeployError) as caught:
        on_hub(session, session.hub.envs.deploy("hostile"))
    assert "calls os._exit" in caught.value.message and 'run_as = "subprocess"' in (caught.value.hint or "")
    _hub_still_serves(session, tmp_path)
