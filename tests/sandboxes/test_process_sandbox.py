"""The process sandbox provider against real folders and real subprocesses."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentenv_local.errors import NotFoundError, StepError
from agentenv_local.plugins import registry
from sandboxes.base import NetworkPolicy, SandboxSpec
from sandboxes.process import ProcessSandboxProvider, rewrite_app_paths, tagged_pids


def run(coro):
    return asyncio.run(coro)


def alive(pid: int) -> bool:
    """Running (a zombie counts as dead: it was killed, nobody reaped it yet)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_dead(pid: int, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def provider(tmp_path):
    return ProcessSandboxProvider(tmp_path / "state")


@pytest.fixture
def sandbox(provider):
    sb = run(provider.create(SandboxSpec(name="box", env_vars={"GREETING": "hi", "DATA": "/app/data"})))
    yield sb
    run(sb.terminate())


def test_registered_as_the_process_provider():
    cls = registry().get("sandbox_providers", "process")
    assert cls is ProcessSandboxProvider
    assert cls.isolation == "none" and cls.supported_modes == ("vm",)


def test_create_makes_a_work_folder_with_metadata(provider, sandbox):
    assert sandbox.sandbox_id.startswith("process-") and len(sandbox.sandbox_id) == len("process-") + 12
    folder = provider.root / sandbox.sandbox_id
    assert folder.is_dir()
    meta = json.loads((folder / ".sandbox.json").read_text())
    assert meta["status"] == "running" and meta["spec"]["name"] == "box"
    assert meta["expires_at"] - meta["created_at"] == pytest.approx(7200)
    [record] = run(provider.list())
    assert record["sandbox_id"] == sandbox.sandbox_id and record["sandbox_type"] == "process"


def test_get_works_from_a_fresh_process(provider, sandbox):
    run(sandbox.write_file("/app/notes/a.txt", b"written by the parent"))
    code = f"""
import asyncio, json
from pathlib import Path
from sandboxes.process import ProcessSandboxProvider

async def main():
    sb = await ProcessSandboxProvider(Path({str(provider.state_dir)!r})).get({sandbox.sandbox_id!r})
    data = await sb.read_file("notes/a.txt")
    res = await sb.exec("echo $AGENTENV_SANDBOX; cat /app/notes/a.txt")
    await sb.write_file("/app/from_child.txt", b"child")
    return {{"name": sb.spec.name, "env": sb.spec.env_vars, "data": data.decode(), "out": res.stdout}}

print(json.dumps(asyncio.run(main())))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    assert seen["name"] == "box" and seen["env"]["GREETING"] == "hi"
    assert seen["data"] == "written by the parent"
    assert seen["out"] == f"{sandbox.sandbox_id}\nwritten by the parent"
    assert run(sandbox.read_file("from_child.txt")) == b"child"


def test_exec_runs_in_the_folder_with_app_rewritten_and_env(sandbox):
    res = run(sandbox.exec("pwd; echo $GREETING $DATA $AGENTENV_SANDBOX; echo x > /app/made.txt"))
    assert res.ok, res.stderr
    pwd, env_line = res.stdout.splitlines()
    assert Path(pwd) == sandbox.root
    assert env_line == f"hi {sandbox.root}/data {sandbox.sandbox_id}"
    assert run(sandbox.read_file("/app/made.txt")) == b"x\n"

    argv = run(sandbox.exec(["cat", "/app/made.txt"]))
    assert argv.ok and argv.stdout == "x\n"
    extra = run(sandbox.exec(["sh", "-c", "echo $EXTRA"], env={"EXTRA": "/app/y"}))
    assert extra.stdout.strip() == f"{sandbox.root}/y"

    failed = run(sandbox.exec("echo oops >&2; exit 3"))
    assert failed.exit_code == 3 and failed.stderr == "oops\n" and not failed.ok
    missing = run(sandbox.exec(["no-such-command-xyz"]))
    assert missing.exit_code == 127


def test_exec_cwd(sandbox):
    run(sandbox.write_file("sub/f.txt", b"1"))
    assert run(sandbox.exec("ls", cwd="/app/sub")).stdout == "f.txt\n"
    assert run(sandbox.exec("ls", cwd="sub")).stdout == "f.txt\n"
    with pytest.raises(NotFoundError):
        run(sandbox.exec("ls", cwd="/app/nope"))


def test_app_rewriting_touches_only_app_paths():
    root = "/r/sb"
    assert rewrite_app_paths("cd /app && cat /app/x '/app/y' PATH=/bin:/app/bin", root) == \
        "cd /r/sb && cat /r/sb/x '/r/sb/y' PATH=/bin:/r/sb/bin"
    for untouched in ("/application", "/apps/x", "x/app", "http://host:80/app/x", "/app.txt", "~/app"):
        assert rewrite_app_paths(untouched, root) == untouched


def test_background_job_does_not_block_exec(sandbox):
    res = run(sandbox.exec("sleep 30 & echo $!", timeout=20))
    assert res.ok and not res.timed_out  # it did not wait for the job (that would time out at 20 s)
    pid = int(res.stdout)
    assert alive(pid)  # returned while the job still runs; left running on purpose: servers are started this way
    run(sandbox.terminate())
    assert wait_dead(pid)


def test_timeout_kills_the_whole_process_group(sandbox):
    res = run(sandbox.exec("sleep 60 & echo $! > /app/bg.pid; echo started; sleep 60", timeout=0.5))
    assert res.timed_out and not res.ok
    assert res.exit_code == 137
    assert res.stdout == "started\n"
    bg = int(run(sandbox.read_file("bg.pid")))
    assert wait_dead(bg)


def test_paths_outside_app_are_refused(sandbox, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("secret")
    for bad in ("/etc/passwd", "../outside.txt", "/app/../../outside.txt", "a/../../x", "/tmp/x"):
        with pytest.raises(StepError):
            run(sandbox.read_file(bad))
        with pytest.raises(StepError):
            run(sandbox.write_file(bad, b"no"))
    with pytest.raises(StepError, match="only has /app"):
        run(sandbox.exists("/etc"))
    # the host never follows a symlink inside the folder (one could lead out of it)
    assert run(sandbox.exec(f"ln -s {tmp_path} /app/link")).ok
    with pytest.raises(StepError, match="'link' is a symbolic link"):
        run(sandbox.read_file("link/outside.txt"))
    with pytest.raises(StepError, match="'link' is a symbolic link"):
        run(sandbox.write_file("link/outside.txt", b"no"))
    with pytest.raises(StepError):
        run(sandbox.exec("ls", cwd="/etc"))
    assert outside.read_text() == "secret"


def test_files_roundtrip_list_and_exists(sandbox):
    run(sandbox.write_file("/app/a/b/c.txt", b"c"))
    run(sandbox.write_file("top.bin", b"\x00\x01"))
    assert run(sandbox.read_file("a/b/c.txt")) == b"c"
    assert run(sandbox.list_files("/app")) == ["a/b/c.txt", "top.bin"]  # .sandbox.json is hidden
    assert run(sandbox.list_files("/app/a")) == ["b/c.txt"]
    assert run(sandbox.list_files("missing")) == []
    assert run(sandbox.exists("a", "dir")) and not run(sandbox.exists("a", "file"))
    assert run(sandbox.exists("top.bin", "file")) and run(sandbox.exists("/app/top.bin"))
    assert not run(sandbox.exists("/app/.sandbox.json"))
    with pytest.raises(NotFoundError):
        run(sandbox.read_file("nope.txt"))
    with pytest.raises(StepError, match="reserved"):
        run(sandbox.write_file("/app/.sandbox.json", b"{}"))


def test_terminate_kills_background_processes_and_is_idempotent(provider):
    sb = run(provider.create(SandboxSpec(name="t")))
    res = run(sb.exec("nohup sleep 300 >/dev/null 2>&1 & echo $!"))
    pid = int(res.stdout)
    # a process in the middle of exec (nohup, then sleep) shows an empty environment for an instant
    deadline = time.monotonic() + 10
    while pid not in tagged_pids(sb.sandbox_id):
        assert alive(pid) and time.monotonic() < deadline
        time.sleep(0.01)
    folder = sb.root
    run(sb.terminate())
    assert wait_dead(pid)
    assert not folder.exists()
    with pytest.raises(NotFoundError):
        run(provider.get(sb.sandbox_id))
    run(sb.terminate())  # twice is fine
    assert run(provider.terminate(sb.sandbox_id)) is False
    assert run(provider.list()) == []
    with pytest.raises(NotFoundError):
        run(sb.exec("true"))


def test_terminate_by_id_from_the_provider(provider):
    sb = run(provider.create(SandboxSpec(name="t")))
    assert run(provider.terminate(sb.sandbox_id)) is True
    assert not sb.root.exists()


def test_get_refuses_unknown_and_malformed_ids(provider):
    for bad in ("process-000000000000", "../etc", "process-../../x", ""):
        with pytest.raises(NotFoundError):
            run(provider.get(bad))


def test_network_isolation_and_container_mode_are_refused(provider):
    for mode in ("none", "allowlist"):
        with pytest.raises(StepError, match="cannot enforce network isolation"):
            run(provider.create(SandboxSpec(name="n", network_policy=NetworkPolicy(mode=mode))))
    with pytest.raises(StepError, match="'container'"):
        run(provider.create(SandboxSpec(name="c", mode="container", image="x")))
    ok = run(provider.create(SandboxSpec(name="a", network_policy=NetworkPolicy(mode="allow_all"))))
    run(ok.terminate())
    assert run(provider.list()) == []


def test_config_root_moves_the_sandboxes(tmp_path):
    provider = ProcessSandboxProvider(tmp_path / "state", {"root": str(tmp_path / "elsewhere")})
    sb = run(provider.create(SandboxSpec(name="r", exposed_ports=[8123])))
    try:
        assert sb.root.parent == (tmp_path / "elsewhere").resolve()
        assert sb.tunnel_urls == {"8123": "http://127.0.0.1:8123"}
    finally:
        run(sb.terminate())


def test_cancelling_exec_kills_the_command(sandbox):
    async def scenario():
        task = asyncio.create_task(sandbox.exec("echo $$ > /app/pid; sleep 60", timeout=None))
        for _ in range(100):
            await asyncio.sleep(0.05)
            if (sandbox.root / "pid").exists() and (sandbox.root / "pid").read_text().strip():
                break
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return int((sandbox.root / "pid").read_text())

    pid = run(scenario())
    assert wait_dead(pid)



def test_terminate_by_id_finishes_a_half_done_teardown(provider):
    sb = run(provider.create(SandboxSpec(name="t")))
    pid = int(run(sb.exec("nohup sleep 300 >/dev/null 2>&1 & echo $!")).stdout)
    # a crash after the status was written but before processes and folder were cleaned up
    meta = json.loads((sb.root / ".sandbox.json").read_text())
    (sb.root / ".sandbox.json").write_text(json.dumps({**meta, "status": "terminated"}))
    with pytest.raises(NotFoundError):
        run(provider.get(sb.sandbox_id))
    assert run(provider.terminate(sb.sandbox_id)) is False
    assert wait_dead(pid) and not sb.root.exists()


def test_commands_do_not_inherit_our_secrets(sandbox, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    monkeypatch.setenv("AGENTENV_MODEL_API_KEY", "also-secret")
    result = run(sandbox.exec("env"))
    assert result.ok
    assert "sk-should-not-leak" not in result.stdout and "also-secret" not in result.stdout
    assert "PATH=" in result.stdout and "GREETING=hi" in result.stdout  # what it needs still arrives


@pytest.mark.parametrize("mounts, says", [
    ({"opt/x": "/usr"}, "not an absolute path"),
    ({"/opt/x": "usr"}, "not an absolute path"),
    ({"/opt/../app": "/usr"}, "without '..'"),
    ({"/app": "/usr"}, "a folder the sandbox itself uses"),
    ({"/app/cli": "/usr"}, "a folder the sandbox itself uses"),
    ({"/tmp/": "/usr"}, "a folder the sandbox itself uses"),
    ({"/": "/usr"}, "a folder the sandbox itself uses"),
    ({"/.agentenv/x": "/usr"}, "a folder the sandbox itself uses"),
    ({"/proc/self": "/usr"}, "a folder the sandbox itself uses"),
    ({"/run": "/usr"}, "a folder the sandbox itself uses"),
])
def test_a_read_only_mount_must_be_absolute_and_clear_of_the_sandbox_own_folders(mounts, says):
    from pydantic import ValidationError

    from agentenv_local.sandbox_api import SandboxSpec

    with pytest.raises(ValidationError, match=says):
        SandboxSpec(name="box", read_only_mounts=mounts)
    for allowed in ("/opt/x", "/tmp/checkout/.cache/agent-clis/openhands-venv", "/root/.pyenv/versions/3.12.7"):
        assert SandboxSpec(name="box", read_only_mounts={allowed: "/usr"}).read_only_mounts == {allowed: "/usr"}


def test_the_process_provider_refuses_read_only_mounts(tmp_path):
    from agentenv_local.sandbox_api import SandboxSpec
    from sandboxes.process import ProcessSandboxProvider

    provider = ProcessSandboxProvider(tmp_path / ".agentenv")
    with pytest.raises(StepError, match="cannot mount folders"):
        asyncio.run(provider.create(SandboxSpec(name="box", read_only_mounts={"/opt/x": "/usr"})))
    assert not list((tmp_path / ".agentenv").rglob("sandbox.json"))
