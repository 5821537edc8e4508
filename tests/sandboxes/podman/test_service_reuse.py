"""The Podman fast path for one-shot commands (issue 16 item 4): the project's Podman service outlives the
command that started it (the next one reuses it; it exits after `service_idle_s` unused), a dead one is
replaced, concurrent starts share one, and a terminated sandbox's container is removed by a detached
process, so a command that exits right after leaves nothing behind. Services are counted by pid and
socket, never timed."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from kits.hub import cli, wait_until
from kits.podman import containers_left, project_containers

from agentenv_local.sandbox_api import SandboxSpec
from sandboxes.podman.service import PodmanService, stop_project_service

ROOT = Path(__file__).resolve().parents[3]


def _services_on(socket: Path) -> list[int]:
    """Pids of the `podman system service` processes serving `socket`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"service" in argv and f"unix://{socket}".encode() in argv:
            found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] == "Z")


def _project_id(state_dir: Path) -> str:
    return hashlib.sha256(str(state_dir.resolve()).encode()).hexdigest()[:12]


@pytest.fixture
def state_dir(tmp_path, podman_base_image):
    state = tmp_path / "proj" / ".agentenv"
    state.mkdir(parents=True)
    yield state
    stop_project_service(state)
    names = project_containers(_project_id(state))
    if names:
        subprocess.run(["podman", "rm", "-f", *names], capture_output=True)


def test_a_second_one_shot_command_reuses_the_first_ones_service(state_dir):
    project = state_dir.parent
    assert "passed (hello: 1)" in cli(project, "run", "hello", "--sandbox", "podman", check=True).stdout
    service = PodmanService(state_dir)
    first = service.read_info()["pid"]
    assert _services_on(service.socket) == [first]  # left running by the command that started it
    assert containers_left(_project_id(state_dir)) == []  # its sandbox was removed after it exited

    assert "passed (hello: 1)" in cli(project, "run", "hello", "--sandbox", "podman", check=True).stdout
    assert service.read_info()["pid"] == first and _services_on(service.socket) == [first]  # no second start
    assert containers_left(_project_id(state_dir)) == []


def test_a_dead_service_is_replaced(state_dir):
    service = PodmanService(state_dir)
    service.client().ping()
    first = service.read_info()["pid"]
    service.release()
    os.killpg(first, signal.SIGKILL)  # as if it crashed: its socket file stays behind
    wait_until(lambda: not _alive(first), what="the killed service to be gone")
    assert service.socket.exists()

    again = PodmanService(state_dir)
    assert again.client().ping()
    second = again.read_info()["pid"]
    assert second != first and _services_on(again.socket) == [second]
    # the long-lived user of the first one notices too: its next call gets the live service
    assert service.client().ping() and service.read_info()["pid"] == second
    assert _services_on(again.socket) == [second]


def test_two_concurrent_commands_start_one_service(state_dir):
    script = textwrap.dedent("""
        import sys
        from pathlib import Path
        sys.path.insert(0, sys.argv[2])
        from sandboxes.podman.service import PodmanService
        service = PodmanService(Path(sys.argv[1]))
        assert service.client().ping()
        print(service.read_info()["pid"])
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script, str(state_dir), str(ROOT)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    pids = {int(out.strip()) for out, _err in outs}
    assert len(pids) == 1 and _services_on(PodmanService(state_dir).socket) == list(pids)


def test_an_unused_service_exits_by_itself_and_the_next_call_starts_another(state_dir):
    service = PodmanService(state_dir, {"service_idle_s": 1})
    assert service.client().ping()
    first = service.read_info()["pid"]
    assert service.read_info()["idle_exit_s"] == 1
    service.release()  # no client holds it any more
    wait_until(lambda: not _alive(first), timeout=60, what="the idle service to exit")
    again = PodmanService(state_dir, {"service_idle_s": 1})
    assert again.client().ping() and again.read_info()["pid"] != first


def test_a_terminated_sandbox_is_removed_after_its_process_exits(state_dir):
    """The process terminates its sandbox and exits at once (os._exit: nothing waits for anything): the
    detached removal (at niceness 10) still takes the container and the work folder away."""
    script = textwrap.dedent("""
        import asyncio, os, sys
        from pathlib import Path
        sys.path.insert(0, sys.argv[2])
        from agentenv_local.sandbox_api import SandboxSpec
        from sandboxes.podman import PodmanSandboxProvider

        async def main():
            provider = PodmanSandboxProvider(Path(sys.argv[1]), {"pool_size": 0})
            sandbox = await provider.create(SandboxSpec(name="box", memory_mb=256))
            assert (await sandbox.exec("echo hi")).stdout == "hi\\n"
            await sandbox.terminate()
            remover = next(iter(provider._removers.values())).pid  # not reaped yet: its stat stays readable
            stat = Path(f"/proc/{remover}/stat").read_text()
            while "(nice)" in stat:  # `nice` sets the niceness, then becomes the removal's shell
                await asyncio.sleep(0.01)
                stat = Path(f"/proc/{remover}/stat").read_text()
            niceness = stat.rsplit(")", 1)[1].split()[16]
            print(sandbox.sandbox_id, len(provider._removers), niceness, flush=True)

        asyncio.run(main())
        os._exit(0)
    """)
    proc = subprocess.run([sys.executable, "-c", script, str(state_dir), str(ROOT)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    sandbox_id, handed_off, niceness = proc.stdout.split()
    assert handed_off == "1"  # terminate handed the removal off instead of doing it
    assert niceness == "10"  # at a lower priority than the command finishing beside it
    assert containers_left(_project_id(state_dir)) == []
    wait_until(lambda: not (state_dir / "sandboxes" / "podman" / sandbox_id).exists(), timeout=60,
               what="the work folder to be deleted")


def test_a_long_lived_users_warm_pool_outlives_the_service(state_dir):
    """A long-lived hub keeps its warm pool when the service exits from idleness under it: pooled containers
    do not depend on the service, and the next call that needs one starts it again."""
    from sandboxes.podman import PodmanSandboxProvider

    provider = PodmanSandboxProvider(state_dir, {"pool_size": 1, "pool_fill_after": 1, "service_idle_s": 1})
    spec = SandboxSpec(name="box", memory_mb=256)

    async def go() -> None:
        first = await provider.create(spec)
        image = first.meta["image"]
        await first.terminate()
        for _ in range(600):
            if provider.pool.ready_count(spec, image) == 1:
                break
            await asyncio.sleep(0.05)
        assert provider.pool.ready_count(spec, image) == 1
        before = provider.service.read_info()["pid"]
        provider.service.release()  # as between episodes: nobody talks to the service
        await asyncio.to_thread(lambda: wait_until(lambda: not _alive(before), timeout=60,
                                                   what="the idle service to exit"))
        pooled = await provider.create(spec)
        assert pooled.meta.get("acquired_at")  # from the pool, with no service running
        assert (await pooled.exec("echo pooled")).stdout == "pooled\n"
        await pooled.terminate()
        await asyncio.to_thread(provider.containers)  # needs the service: started again
        assert provider.service.read_info()["pid"] != before
        await provider.aclose()

    asyncio.run(go())
    provider.wait_removals()
    assert containers_left(_project_id(state_dir)) == []
    info = json.loads((state_dir / "podman" / "service.json").read_text())
    assert _services_on(Path(info["socket"])) == [info["pid"]]  # aclose left it for the next command
