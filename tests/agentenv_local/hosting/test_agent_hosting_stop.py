"""Agent subprocesses are stopped as a process group through procs.stop_group: a hosted agent's `stop()`,
and the sweep of what a dead hub left in `agent_instances` (only a pid that still is an agent server)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from kits.hub import InProcessHub, wait_until

from agentenv_local.hosting.agents.hosted import spawn
from agentenv_local.hosting.agents.instances import COLLECTION
from agentenv_local.procs import pid_alive


def _gone(pid: int) -> bool:
    """Not running (a zombie child of ours counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state == "Z"


def _agent_with_a_child(folder: Path) -> str:
    """A Python agent whose module starts a `sleep` in its process group and writes the sleep's pid beside it."""
    module = folder / "forking_agent.py"
    module.write_text(textwrap.dedent(f"""
        import subprocess
        from pathlib import Path

        from agentenv_local.agents.scripted import ScriptedAgent

        _child = subprocess.Popen(["sleep", "300"])
        Path({str(folder / "child.pid")!r}).write_text(str(_child.pid))
    """))
    return f"{module}:ScriptedAgent"


def test_stopping_a_subprocess_agent_stops_what_it_started_too(tmp_path):
    async def scenario() -> tuple[int, int]:
        hosted = await spawn(_agent_with_a_child(tmp_path), {})
        assert hosted.pid and hosted.url.startswith("http://127.0.0.1:")
        child = int(wait_until(lambda: (tmp_path / "child.pid").exists() and (tmp_path / "child.pid").read_text(),
                               what="the agent's child pid"))
        assert pid_alive(child)
        await hosted.stop()
        return hosted.pid, child

    agent_pid, child_pid = asyncio.run(scenario())
    assert _gone(agent_pid)
    wait_until(lambda: _gone(child_pid), timeout=10, what="the agent's own child to be stopped with its group")


def _tmpdir_of(pid: int) -> str:
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return next(item.split(b"=", 1)[1].decode() for item in environ if item.startswith(b"TMPDIR="))


def test_a_subprocess_agent_gets_a_tmpdir_that_goes_with_it_even_when_it_is_killed(tmp_path):
    """A coding-CLI agent keeps its private HOME and workspace in its TMPDIR and removes them as it shuts down,
    but a killed one cannot (the suite left dozens in /tmp): the hub gives each agent process a TMPDIR of its
    own and removes it after the process is gone, however it ended. One the agent's env_vars name is left be."""
    async def scenario() -> tuple[str, str]:
        stopped = await spawn(_agent_with_a_child(tmp_path), {})
        graceful = _tmpdir_of(stopped.pid or 0)
        (Path(graceful) / "agentenv-claude-code-home-x").mkdir()
        await stopped.stop()
        killed = await spawn(_agent_with_a_child(tmp_path), {})
        scratch = _tmpdir_of(killed.pid or 0)
        (Path(scratch) / "agentenv-claude-code-home-y").mkdir()
        os.kill(killed.pid or 0, signal.SIGKILL)  # no shutdown of its own
        await killed.stop()
        return graceful, scratch

    graceful, killed = asyncio.run(scenario())
    assert graceful != killed and graceful.startswith(tempfile.gettempdir())
    assert not Path(graceful).exists() and not Path(killed).exists()

    async def own() -> str:
        mine = tmp_path / "mine"
        mine.mkdir()
        hosted = await spawn(_agent_with_a_child(tmp_path), {}, env_vars={"TMPDIR": str(mine)})
        found = _tmpdir_of(hosted.pid or 0)
        await hosted.stop()
        return found

    assert asyncio.run(own()) == str(tmp_path / "mine") and (tmp_path / "mine").is_dir()


def _own_session(argv: list[str]) -> subprocess.Popen:
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def _leftover(project: Path, instances: dict[str, int]) -> None:
    """Records as a killed hub leaves them: `running`, with the pid of their subprocess."""
    hub = InProcessHub(project)
    for instance_id, pid in instances.items():
        hub.store.records.save(COLLECTION, instance_id, {"instance_id": instance_id, "status": "running",
                                                         "runtime": "subprocess", "pid": pid,
                                                         "created_at": time.time()})
    hub.close()


def test_the_next_hub_stops_a_left_behind_agent_group_and_leaves_a_reused_pid_alone(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    # Stands in for `python -m agentenv_local.agents ...` (its mark is in the command line), with a child.
    agent = _own_session([sys.executable, "-c", "import subprocess, time; subprocess.Popen(['sleep', '300']); "
                          "time.sleep(300)", "agentenv_local.agents"])
    other = _own_session(["sleep", "300"])  # the number a dead agent had, now some other program's
    try:
        wait_until(lambda: subprocess.run(["pgrep", "-g", str(agent.pid)], capture_output=True,
                                          text=True).stdout.count("\n") >= 2, what="the agent's child")
        children = [int(p) for p in subprocess.run(["pgrep", "-g", str(agent.pid)], capture_output=True,
                                                   text=True).stdout.split() if int(p) != agent.pid]
        _leftover(project, {"agent-left": agent.pid, "agent-reused": other.pid})

        hub = InProcessHub(project)  # its AgentInstances sweeps what the last one left
        try:
            rows = {r["id"]: r["body"] for r in hub.store.records.query({"collection": COLLECTION})}
        finally:
            hub.close()
        assert set(rows) == {"agent-left", "agent-reused"}
        assert {body["status"] for body in rows.values()} == {"terminated"}
        assert agent.poll() is not None
        wait_until(lambda: all(_gone(pid) for pid in children), timeout=10, what="the agent's child to stop")
        assert other.poll() is None and pid_alive(other.pid)
    finally:
        for proc in (agent, other):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
