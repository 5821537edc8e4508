"""`agentenv env dev`: a real dev server in a subprocess on a free port, real files in tmp_path, real MCP
clients that stay connected while the file is rewritten under them."""

from __future__ import annotations

import asyncio
import contextlib
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import pytest
from kits.env_sdk import DEV_V1, DEV_V2, DevProcess

ROOT = Path(__file__).resolve().parents[3]
ANNOUNCE = re.compile(r"serving (\S+) on (http://\S+)")

V1, V2 = DEV_V1, DEV_V2

BROKEN = V2 + '''
    @tool()
    def broken(self, text: str -> str:
        return text
'''

V3 = V2 + '''
    @tool()
    def whisper(self, text: str) -> str:
        "Say it back, quietly."
        return text.lower()
'''


def _write(path: Path, text: str) -> None:
    path.write_text(text)  # a whole-file write, as an editor saves


async def _wait_until(check, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while True:
        value = await check()
        if value or time.monotonic() > deadline:
            return value
        await asyncio.sleep(0.05)


@pytest.fixture()
def env_file(tmp_path):
    path = tmp_path / "server.py"
    _write(path, V1)
    return path


def test_dev_server_reloads_on_save_and_keeps_the_session(env_file):
    from mcp import Client

    dev = DevProcess(env_file, "--port", "0")
    try:
        match = dev.wait_for(r"serving (\S+) on (http://\S+)")
        assert match.group(1) == "devecho"
        base = match.group(2)
        assert f"watching {env_file.parent}" in dev.output()

        async def scenario():
            changed = asyncio.Event()
            seen: list[str] = []

            async def on_message(message):
                method = getattr(message, "method", None)
                if method == "notifications/tools/list_changed":
                    seen.append(method)
                    changed.set()

            async with Client(base + "/mcp", mode="legacy", message_handler=on_message) as client:
                names = [t.name for t in (await client.list_tools()).tools]
                assert names == ["echo"]
                assert (await client.call_tool("echo", {"text": "hi"})).content[0].text == "hi"

                # 1. a tool added: the same session is told, and re-listing shows it
                mark = dev.mark()
                _write(env_file, V2)
                await asyncio.to_thread(dev.wait_for, r"reloaded devecho: 2 tools \(\+1 -0\)", after=mark)
                await asyncio.wait_for(changed.wait(), 10)
                names = [t.name for t in (await client.list_tools()).tools]
                assert names == ["echo", "shout"]
                assert (await client.call_tool("shout", {"text": "hi"})).content[0].text == "HI"
                async with httpx2.AsyncClient() as h:
                    card = (await h.get(base + "/.well-known/agent-env.json")).json()
                assert card["description"] == "version two"
                assert [t["name"] for t in card["capabilities"]["tools"]] == ["echo", "shout"]

                # 2. a syntax error: the error with its line, and the last good version keeps serving
                mark = dev.mark()
                _write(env_file, BROKEN)
                failed = await asyncio.to_thread(dev.wait_for, r"reload failed: .*server\.py, line (\d+).*SyntaxError",
                                                 after=mark)
                assert int(failed.group(1)) == BROKEN.splitlines().index("    def broken(self, text: str -> str:") + 1
                assert (await client.call_tool("shout", {"text": "still"})).content[0].text == "STILL"
                assert [t.name for t in (await client.list_tools()).tools] == ["echo", "shout"]

                # 3. fixed: the reload succeeds and the session sees the new tool
                changed.clear()
                mark = dev.mark()
                _write(env_file, V3)
                await asyncio.to_thread(dev.wait_for, r"reloaded devecho: 3 tools \(\+1 -0\)", after=mark)
                await asyncio.wait_for(changed.wait(), 10)
                assert [t.name for t in (await client.list_tools()).tools] == ["echo", "shout", "whisper"]
                assert (await client.call_tool("whisper", {"text": "HI"})).content[0].text == "hi"
            return seen

        seen = asyncio.run(scenario())
        assert len(seen) >= 2
    finally:
        dev.stop()


def test_an_import_time_error_shows_the_users_line_and_a_2026_client_keeps_working_and_listens(env_file):
    from mcp import Client

    dev = DevProcess(env_file, "--port", "0")
    try:
        base = dev.wait_for(r"serving \S+ on (http://\S+)").group(1)

        async def scenario():
            async with Client(base + "/mcp", mode="auto") as client:
                assert [t.name for t in (await client.list_tools()).tools] == ["echo"]
                mark = dev.mark()
                _write(env_file, V1 + "\nraise RuntimeError('config missing')\n")
                failed = await asyncio.to_thread(
                    dev.wait_for, r"reload failed: .*server\.py, line (\d+): RuntimeError: config missing", after=mark)
                assert int(failed.group(1)) == len(V1.splitlines()) + 2
                assert (await client.call_tool("echo", {"text": "ok"})).content[0].text == "ok"

                # the 2026 revision has no session to push to: a subscriptions/listen stream gets the event
                async def listen_once():
                    async with client.listen(tools_list_changed=True) as sub:
                        listening.set()
                        async for event in sub:
                            return type(event).__name__

                listening = asyncio.Event()
                listener = asyncio.create_task(listen_once())
                await asyncio.wait_for(listening.wait(), 10)
                mark = dev.mark()
                _write(env_file, V2)
                await asyncio.to_thread(dev.wait_for, r"reloaded devecho: 2 tools", after=mark)
                assert await asyncio.wait_for(listener, 10) == "ToolsListChanged"

                async def listed():
                    return [t.name for t in (await client.list_tools()).tools] == ["echo", "shout"]

                assert await _wait_until(listed)

        asyncio.run(scenario())
    finally:
        dev.stop()


def test_a_file_that_does_not_load_at_first_fails_with_the_error(tmp_path):
    path = tmp_path / "server.py"
    _write(path, "from agentenv_local.env import Env\n\nclass Broken(Env:\n    pass\n")
    proc = subprocess.run([sys.executable, "-m", "agentenv_local.cli.main", "env", "dev", str(path), "--port", "0"],
                          check=False, capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode != 0
    assert "server.py, line 3" in proc.stderr and "SyntaxError" in proc.stderr


def test_stdio_dev_server_reloads_and_notifies(env_file):
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    async def scenario():
        changed = asyncio.Event()

        async def on_message(message):
            if getattr(message, "method", None) == "notifications/tools/list_changed":
                changed.set()

        params = StdioServerParameters(command=sys.executable,
                                       args=["-m", "agentenv_local.cli.main", "env", "dev", str(env_file), "--stdio"],
                                       cwd=str(ROOT))
        async with Client(stdio_client(params), mode="legacy", message_handler=on_message) as client:
            assert [t.name for t in (await client.list_tools()).tools] == ["echo"]
            _write(env_file, V2)
            await asyncio.wait_for(changed.wait(), 15)
            assert [t.name for t in (await client.list_tools()).tools] == ["echo", "shout"]
            assert (await client.call_tool("shout", {"text": "x"})).content[0].text == "X"

    asyncio.run(scenario())


def test_the_watch_filter_and_error_formatting():
    from agentenv_local.env.dev import format_load_error, watched

    assert watched("/x/server.py") and watched("/x/data/seed.json")
    assert not watched("/x/__pycache__/server.cpython-311.pyc")
    assert not watched("/x/state.duckdb") and not watched("/x/out.log") and not watched("/x/.server.py.swp")
    try:
        compile("def f(:\n", "/x/server.py", "exec")
    except SyntaxError as e:
        text = format_load_error(e, Path("/x"))
    assert text.startswith("/x/server.py, line 1: SyntaxError")


def test_reload_in_process_picks_up_sibling_modules_and_runs_the_hooks_in_order(tmp_path, capsys):
    from agentenv_local.env.dev import DevServer

    (tmp_path / "words.py").write_text("GREETING = 'hello'\n")
    (tmp_path / "hooks.py").write_text("EVENTS = []\n")
    server = tmp_path / "server.py"
    source = '''
import hooks
import words
from agentenv_local.env import Env, tool


class Greeter(Env):
    environment_name = "greeter"

    def on_startup(self):
        hooks.EVENTS.append(("start", words.GREETING))

    def on_shutdown(self):
        hooks.EVENTS.append(("stop", words.GREETING))

    @tool()
    def greet(self) -> str:
        return words.GREETING
'''
    server.write_text(source)

    async def scenario():
        dev = DevServer(str(server))
        dev.first_load()
        await dev.start()
        first_hooks = __import__("hooks")
        assert (await dev.current.call_tool("greet", {}))["structuredContent"] == {"result": "hello"}
        (tmp_path / "words.py").write_text("GREETING = 'bonjour'\n")
        assert await dev.reload()
        assert (await dev.current.call_tool("greet", {}))["structuredContent"] == {"result": "bonjour"}
        server.write_text(source.replace("class Greeter(Env):", "class Greeter(Env, metaclass=1):"))
        assert not await dev.reload()
        assert (await dev.current.call_tool("greet", {}))["structuredContent"] == {"result": "bonjour"}
        await dev.stop()
        return first_hooks.EVENTS, __import__("sys").modules.get("hooks")

    try:
        first_events, hooks_now = asyncio.run(scenario())
    finally:
        for name in ("hooks", "words"):
            sys.modules.pop(name, None)
        with contextlib.suppress(ValueError):
            sys.path.remove(str(tmp_path))
    err = capsys.readouterr().err
    assert "reloaded greeter: 1 tools (+0 -0)" in err
    assert "reload failed: greeter:" in err and "server.py, line" in err and "keeping the last good version" in err
    # the first generation's hooks module saw its own start and stop; the reloaded one saw the rest
    assert first_events == [("start", "hello"), ("stop", "hello")]
    assert hooks_now.EVENTS == [("start", "bonjour"), ("stop", "bonjour")]


def test_a_call_in_flight_finishes_on_its_instance_before_that_instance_shuts_down(tmp_path, capsys):
    from agentenv_local.env.dev import DevServer

    server = tmp_path / "server.py"
    source = '''
import asyncio

from agentenv_local.env import Env, tool

GATE = asyncio.Event()
LOG = []


class Slow(Env):
    environment_name = "slow"
    VERSION = 1

    def on_shutdown(self):
        LOG.append(("stop", self.VERSION))

    @tool()
    async def wait(self) -> int:
        await GATE.wait()
        LOG.append(("answered", self.VERSION))
        return self.VERSION
'''
    server.write_text(source)

    async def scenario():
        dev = DevServer(str(server))
        dev.first_load()
        await dev.start()
        first = dev.current
        module = __import__("sys").modules[type(first.env).__module__]
        with dev._using(first):
            call = asyncio.create_task(first.call_tool("wait", {}))
            await asyncio.sleep(0.05)
            server.write_text(source.replace("VERSION = 1", "VERSION = 2"))
            reload = asyncio.create_task(dev.reload())
            await asyncio.sleep(0.2)
            assert dev.current is not first and not reload.done()  # swapped; the old one waits for its call
            assert module.LOG == []
            module.GATE.set()
            result = await call
        assert await reload
        await dev.stop()
        return result, module.LOG

    result, log = asyncio.run(scenario())
    assert result["structuredContent"] == {"result": 1}
    assert log == [("answered", 1), ("stop", 1)]
    assert "reloaded slow: 1 tools (+0 -0)" in capsys.readouterr().err
