"""resume.forget stops the agent process a dead hub left behind, found by the pid in the run's journal, and
only that: by the time a run is resumed the number may belong to another process, which must live on."""

from __future__ import annotations

import subprocess
import sys
import time

from agentenv_local.procs import announced_url, pid_alive
from agentenv_local.tasks.resume import forget


def _state(pid: int) -> dict:
    return {"deployed_agents": [{"step_id": "agent", "runtime": "subprocess", "pid": pid}], "metadata": {}}


def _gone_within(proc: subprocess.Popen, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return True
        time.sleep(0.05)
    return False


def test_a_left_behind_agent_is_stopped_and_its_record_marked():
    agent = subprocess.Popen([sys.executable, "-m", "agentenv_local.agents", "scripted", "--port", "0"],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert agent.stderr is not None  # left behind means serving: wait for its "serving on" line
        assert any(announced_url(line) for line in agent.stderr), "the agent never served"
        state = _state(agent.pid)
        forget(state, ["agent"], {"agent"})
        assert _gone_within(agent, 30)
        assert state["deployed_agents"][0]["torn_down"] is True
    finally:
        agent.kill()
        agent.wait()


def test_a_pid_that_now_belongs_to_another_process_is_left_alone():
    other = subprocess.Popen(["sleep", "60"])
    try:
        forget(_state(other.pid), ["agent"], {"agent"})
        time.sleep(0.2)
        assert other.poll() is None and pid_alive(other.pid)
    finally:
        other.kill()
        other.wait()
