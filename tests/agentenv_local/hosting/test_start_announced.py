"""hosted.start_announced, which `spawn` (a Python agent as a subprocess) and command.spawn_command (a bundle's
command agent) share: real processes that announce their URL (ours or uvicorn's line), that print something else
and exit, that cannot be started; what is left running afterwards (nothing but the announced one, until stopped)
and what lands in the log file."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from agentenv_local.hosting.agents.command import spawn_command
from agentenv_local.hosting.agents.hosted import AgentStartError, spawn

UVICORN = ("import sys, time; print('Uvicorn running on http://127.0.0.1:9/', file=sys.stderr, flush=True); "
           "print('later line', file=sys.stderr, flush=True); time.sleep(60)")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_command_announcing_with_uvicorns_line_is_ready_and_its_later_stderr_is_logged(tmp_path: Path) -> None:
    log = tmp_path / "agent.log"

    async def go() -> tuple[str, int, bool]:
        hosted = await spawn_command([sys.executable, "-c", UVICORN], cwd=str(tmp_path), log_path=log, timeout=30)
        assert hosted.pid is not None and alive(hosted.pid)
        for _ in range(100):  # the drain thread writes the later line
            if "later line" in (log.read_text() if log.exists() else ""):
                break
            await asyncio.sleep(0.05)
        await hosted.stop()
        return hosted.url, hosted.pid, alive(hosted.pid)

    url, pid, still = asyncio.run(go())
    assert url == "http://127.0.0.1:9" and not still
    assert "later line" in log.read_text()


def test_a_command_that_exits_without_a_url_fails_with_what_it_printed(tmp_path: Path) -> None:
    argv = [sys.executable, "-c", "import sys; print('no port for me', file=sys.stderr)"]
    with pytest.raises(AgentStartError) as err:
        asyncio.run(spawn_command(argv, cwd=str(tmp_path), log_path=tmp_path / "a.log", timeout=30, name="quiet"))
    assert "agent 'quiet' (command" in err.value.message and "did not print `serving on" in err.value.message
    assert "no port for me" in err.value.message and "announce its URL" in (err.value.hint or "")


def test_a_command_that_cannot_be_started_says_so(tmp_path: Path) -> None:
    with pytest.raises(AgentStartError) as err:
        asyncio.run(spawn_command([str(tmp_path / "missing-program")], cwd=str(tmp_path), name="ghost"))
    assert "agent 'ghost': cannot run" in err.value.message and "agent.toml" in (err.value.hint or "")


def test_a_python_agent_that_fails_to_start_as_a_subprocess_says_what_it_printed(tmp_path: Path) -> None:
    with pytest.raises(AgentStartError) as err:
        asyncio.run(spawn("no_such_module_here:Agent", {}, log_path=tmp_path / "a.log", timeout=60))
    assert "agent 'no_such_module_here:Agent' (a subprocess) did not start; it printed:" in err.value.message
    assert "no_such_module_here" in err.value.message.split("it printed:", 1)[1]
