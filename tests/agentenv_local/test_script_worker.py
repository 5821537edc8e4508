"""The warm script worker (agentenv_local/script_worker.py): a child forked from the zygote gets what a cold
subprocess gets, scripts can't reach each other or the zygote, timeouts kill the child's process group, output
keeps its size bounds, secrets stay out, a dead zygote is started again and a dead hub takes the zygote with it.
Real processes throughout."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from agentenv_local import procs, script_worker
from agentenv_local.procs import host_env, run_process

ENV = {**host_env(), "PYTHONDONTWRITEBYTECODE": "1"}

PROBE = r'''
import json, os, sys
fds = sorted(int(fd) for fd in os.listdir("/proc/self/fd"))
print(json.dumps({
    "cwd": os.getcwd(), "argv": sys.argv, "path": sys.path, "environ": dict(os.environ),
    "fds": fds[:3], "more_fds": len(fds) - 4,  # 0, 1, 2 and the listing's own
    "name": __name__, "file": __file__, "stdin": sys.stdin.read(), "flags": repr(sys.flags),
    "session_leader": os.getsid(0) == os.getpid(), "group_leader": os.getpgid(0) == os.getpid(),
    "main": sys.modules["__main__"].__dict__.get("MARK"), "dont_write_bytecode": sys.dont_write_bytecode,
}))
print("to stderr", file=sys.stderr)
MARK = 1
sys.exit(int(sys.argv[1]))
'''


def warm(argv: list[str], cwd: Path, timeout: float = 60, env: dict | None = None) -> script_worker.ScriptExit:
    return asyncio.run(script_worker.run_warm([str(a) for a in argv], cwd=str(cwd), env=env or ENV, timeout=timeout))


def script(folder: Path, source: str, name: str = "s.py") -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(source))
    return path


def gone(pid: int) -> bool:
    """No process `pid`, or only its zombie (a reparented one waits for init to reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def wait_gone(pid: int, within_s: float = 20) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if gone(pid):
            return True
        time.sleep(0.05)
    return gone(pid)


def wait_file(path: Path, within_s: float = 30) -> str:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if path.is_file() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.05)
    raise AssertionError(f"{path} was never written")


def test_a_warm_child_gets_what_a_cold_subprocess_gets(tmp_path):
    probe = script(tmp_path, PROBE)
    cold = asyncio.run(run_process([sys.executable, str(probe), "3"], cwd=tmp_path, env=ENV, timeout=60))
    hot = warm([probe, "3"], tmp_path)
    assert (hot.exit_code, hot.timed_out) == (cold.exit_code, cold.timed_out) == (3, False)
    assert hot.stderr == cold.stderr == "to stderr\n"
    seen_cold, seen_warm = json.loads(cold.stdout), json.loads(hot.stdout)
    assert seen_warm == seen_cold
    assert seen_warm["environ"] == ENV and seen_warm["cwd"] == str(tmp_path) and seen_warm["path"][0] == str(tmp_path)
    assert seen_warm["fds"] == [0, 1, 2] and seen_warm["more_fds"] == 0 and seen_warm["session_leader"]


def test_the_script_runs_in_a_fork_of_the_zygote(tmp_path):
    probe = script(tmp_path, "import os\nprint(os.getppid())\n")
    first, second = warm([probe], tmp_path), warm([probe], tmp_path)
    zygote = script_worker.worker_pid()
    assert zygote is not None and int(first.stdout) == int(second.stdout) == zygote != os.getpid()


def test_nothing_a_script_changes_reaches_the_next_script_or_the_hub(tmp_path):
    spoil = script(tmp_path, """
        import builtins, json, os, sys
        import agentenv_local.compat.mcp1 as mcp1
        json.dumps = lambda *a, **k: "patched"
        mcp1.uses_mcp1 = lambda source: "patched"
        builtins.LEAKED = True
        sys.path.append("/leaked")
        sys.modules["leaked_module"] = sys
        os.environ["LEAKED"] = "1"
        os.chdir("/")
        print(os.getppid())
    """, "spoil.py")
    look = script(tmp_path, """
        import builtins, json, os, sys
        import agentenv_local.compat.mcp1 as mcp1
        print(json.dumps({"ppid": os.getppid(), "dumps": json.dumps(1), "mcp1": mcp1.uses_mcp1("x = 1"),
                          "builtin": hasattr(builtins, "LEAKED"), "path": "/leaked" in sys.path,
                          "module": "leaked_module" in sys.modules, "env": os.environ.get("LEAKED"),
                          "cwd": os.getcwd()}))
    """, "look.py")
    spoiled = warm([spoil], tmp_path)
    seen = json.loads(warm([look], tmp_path).stdout)
    assert seen["ppid"] == int(spoiled.stdout)  # the same zygote served both
    assert seen == {"ppid": seen["ppid"], "dumps": "1", "mcp1": False, "builtin": False, "path": False,
                    "module": False, "env": None, "cwd": str(tmp_path)}
    assert json.dumps(1) == "1" and "LEAKED" not in os.environ  # and the hub is another process


def test_many_scripts_at_once_each_get_their_own_fork_and_answer(tmp_path):
    probe = script(tmp_path, "import os, sys\nprint(os.getpid(), sys.argv[1])\nsys.exit(int(sys.argv[1]) % 7)\n")

    async def all_at_once() -> list[script_worker.ScriptExit]:
        return await asyncio.gather(*(script_worker.run_warm([str(probe), str(i)], cwd=str(tmp_path), env=ENV,
                                                              timeout=120) for i in range(40)))

    done = asyncio.run(all_at_once())
    assert [d.exit_code for d in done] == [i % 7 for i in range(40)]
    assert [d.stdout.split()[1] for d in done] == [str(i) for i in range(40)]
    assert len({d.stdout.split()[0] for d in done}) == 40


def test_a_timeout_kills_the_childs_whole_process_group(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    slow = script(tmp_path, f"""
        import subprocess, time
        child = subprocess.Popen(["sleep", "600"])
        open({str(pid_file)!r}, "w").write(str(child.pid))
        time.sleep(600)
    """)
    done = warm([slow], tmp_path, timeout=5)
    assert done.timed_out and done.exit_code == 137
    assert wait_gone(int(wait_file(pid_file)))


def test_a_cancelled_script_is_killed(tmp_path):
    pid_file = tmp_path / "pid"
    slow = script(tmp_path, f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(600)\n")

    async def cancel_midway() -> None:
        task = asyncio.create_task(script_worker.run_warm([str(slow)], cwd=str(tmp_path), env=ENV, timeout=600))
        while not (pid_file.is_file() and pid_file.read_text()):
            await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_midway())
    assert wait_gone(int(pid_file.read_text()))


def test_output_keeps_its_size_bound(tmp_path, monkeypatch):
    monkeypatch.setattr(procs, "MAX_OUTPUT_BYTES", 1000)
    loud = script(tmp_path, "import sys\nprint('x' * 5000)\nprint('y' * 5000, file=sys.stderr)\n")
    done = warm([loud], tmp_path)
    for text in (done.stdout, done.stderr):
        assert text.endswith("[output truncated at 1000 bytes]") and len(text) < 1100


def test_secrets_of_the_hub_reach_neither_the_zygote_nor_the_child(tmp_path, monkeypatch):
    script_worker.stop()  # a zygote started now, with the secret in our environment
    monkeypatch.setenv("OPENAI_API_KEY", "sk-very-secret")
    env = {**host_env(), "PYTHONDONTWRITEBYTECODE": "1"}
    probe = script(tmp_path, "import os\nprint(sorted(os.environ))\nprint(os.environ.get('OPENAI_API_KEY'))\n")
    done = warm([probe], tmp_path, env=env)
    assert done.stdout.splitlines()[1] == "None" and "OPENAI_API_KEY" not in done.stdout.splitlines()[0]
    zygote = script_worker.worker_pid()
    assert zygote is not None and b"sk-very-secret" not in Path(f"/proc/{zygote}/environ").read_bytes()


def test_a_request_with_other_variables_than_the_zygotes_is_refused(tmp_path):
    probe = script(tmp_path, "print('ran')\n")
    warm([probe], tmp_path)
    with pytest.raises(script_worker.WorkerUnavailable, match="environment differs"):
        warm([probe], tmp_path, env={**ENV, "EXTRA": "1"})


def test_a_dead_zygote_is_started_again(tmp_path):
    probe = script(tmp_path, "import os\nprint(os.getppid())\n")
    first = int(warm([probe], tmp_path).stdout)
    starts = script_worker.starts
    os.kill(first, signal.SIGKILL)
    assert wait_gone(first)
    second = int(warm([probe], tmp_path).stdout)
    assert second != first and second == script_worker.worker_pid() and script_worker.starts == starts + 1


def test_a_zygote_that_cannot_start_is_reported(tmp_path, monkeypatch):
    script_worker.stop()
    monkeypatch.setattr(script_worker, "_failure", None)
    monkeypatch.setattr(script_worker, "WORKER_MODULE", "agentenv_local.no_such_worker")
    probe = script(tmp_path, "print('ran')\n")
    with pytest.raises(script_worker.WorkerUnavailable, match="No module named 'agentenv_local.no_such_worker'"):
        warm([probe], tmp_path)
    starts = script_worker.starts
    with pytest.raises(script_worker.WorkerUnavailable):  # no new try at once: scripts run cold meanwhile
        warm([probe], tmp_path)
    assert script_worker.starts == starts and script_worker.worker_pid() is None


HUB = r'''
import asyncio, sys
from agentenv_local import script_worker
from agentenv_local.procs import host_env

async def main():
    env = {**host_env(), "PYTHONDONTWRITEBYTECODE": "1"}
    task = asyncio.create_task(script_worker.run_warm([sys.argv[1]], cwd=sys.argv[2], env=env, timeout=600))
    while script_worker.worker_pid() is None:
        await asyncio.sleep(0.05)
    print(script_worker.worker_pid(), flush=True)
    await task

asyncio.run(main())
'''


def test_the_zygote_and_its_scripts_die_with_the_hub(tmp_path):
    pid_file = tmp_path / "script.pid"
    slow = script(tmp_path, f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(600)\n")
    hub = subprocess.Popen([sys.executable, "-c", HUB, str(slow), str(tmp_path)], stdout=subprocess.PIPE, env=ENV,
                           cwd=tmp_path, text=True)
    try:
        assert hub.stdout is not None
        zygote = int(hub.stdout.readline())
        running = int(wait_file(pid_file))
        assert not gone(zygote) and not gone(running)
        hub.kill()  # SIGKILL: no atexit, no cleanup of its own
        hub.wait()
        assert wait_gone(zygote) and wait_gone(running)
    finally:
        if hub.poll() is None:
            hub.kill()
            hub.wait()


@pytest.mark.parametrize("stop_how", ["agentenv down", "SIGKILL"])
def test_a_real_hubs_worker_is_gone_after_down_or_a_killed_hub(tmp_path, stop_how):
    from kits.hub import cli, hub_info, write_bundle

    project = tmp_path / "proj"
    (project / ".agentenv").mkdir(parents=True)
    write_bundle(project, "parent", {"parent": [{"id": "p", "type": "run_code", "script_artifact_id": "p"}]},
                 artifacts={"p": {"p.py": "import os\ndef run(input):\n    return os.getppid()\n"}})
    cli(project, "up", "--detach", check=True)
    try:
        done = cli(project, "run", "./parent", "--json", check=True)
        zygote = json.loads(done.stdout)[0]["context"]["metadata"]["script_results"]["p"]
        assert b"script_worker" in procs.cmdline(zygote) and not gone(zygote)
        if stop_how == "SIGKILL":
            info = hub_info(project)
            assert info is not None
            os.kill(int(info["pid"]), signal.SIGKILL)
        else:
            cli(project, "down", check=True)
        assert wait_gone(zygote)
    finally:
        cli(project, "down")
