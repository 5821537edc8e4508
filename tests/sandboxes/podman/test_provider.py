"""The podman sandbox provider against the real Podman: lifecycle, files, the channel, isolation, limits,
the warm pool, and finding a sandbox again from a fresh process."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from kits.leaks import pids_listening_on, sockets_on
from kits.podman import project_containers
from kits.servers import accepting

from agentenv_local.errors import NotFoundError, StepError
from agentenv_local.sandbox_api import NetworkPolicy, SandboxSpec
from sandboxes.podman.provider import owner_alive, owner_token


def run(coro):
    return asyncio.run(coro)


def spec(**kw) -> SandboxSpec:
    return SandboxSpec(**{"name": "box", "memory_mb": 256, **kw})


def test_lifecycle_commands_and_files(provider_factory):
    provider = provider_factory()

    async def go():
        sandbox = await provider.create(spec(env_vars={"GREETING": "hi"}))
        assert sandbox.sandbox_id in project_containers(provider.project)
        result = await sandbox.exec("echo $GREETING; echo oops >&2; exit 3")
        assert (result.exit_code, result.stdout, result.stderr) == (3, "hi\n", "oops\n")
        assert (await sandbox.exec(["pwd"])).stdout == "/app\n"
        # /app is a bind-mounted folder; elsewhere goes through the exec agent.
        await sandbox.write_file("/app/dir/a.txt", b"alpha")
        await sandbox.write_file("rel.txt", b"beta")
        await sandbox.write_file("/tmp/t.bin", bytes(range(256)))
        assert (await sandbox.exec(["cat", "/app/dir/a.txt"])).stdout == "alpha"
        assert await sandbox.read_file("/tmp/t.bin") == bytes(range(256))
        assert await sandbox.exists("/app/dir", "dir") and await sandbox.exists("/tmp/t.bin", "file")
        assert not await sandbox.exists("/tmp/nope")
        assert await sandbox.list_files("/app") == ["dir/a.txt", "rel.txt"]
        with pytest.raises(NotFoundError):
            await sandbox.read_file("/etc/nope")
        # Commands run concurrently over the one channel: each waits until all five have started (one at a
        # time, the first would wait for the others until its timeout).
        await sandbox.exec("mkdir -p /tmp/barrier")
        barrier = "touch /tmp/barrier/{i}; until [ $(ls /tmp/barrier | wc -l) -ge 5 ]; do sleep 0.05; done; echo {i}"
        results = await asyncio.gather(*(sandbox.exec(barrier.format(i=i), timeout=20) for i in range(5)))
        assert [(r.stdout, r.timed_out) for r in results] == [(f"{i}\n", False) for i in range(5)]
        timed = await sandbox.exec("sleep 30", timeout=0.5)
        assert timed.timed_out and not timed.ok
        assert (await sandbox.exec(["no-such-program"])).exit_code == 127
        await sandbox.terminate()
        await sandbox.terminate()  # idempotent
        with pytest.raises(NotFoundError):  # gone for the API at once; its container goes in the background
            await provider.get(sandbox.sandbox_id)
        assert provider.wait_removals() >= 1
        assert sandbox.sandbox_id not in project_containers(provider.project)
        assert not sandbox.folder.exists()
        with pytest.raises(NotFoundError):
            await provider.get(sandbox.sandbox_id)
        assert await provider.terminate(sandbox.sandbox_id) is False

    run(go())


def test_symlink_in_app_cannot_lead_the_host_out(provider_factory):
    provider = provider_factory()

    async def go():
        sandbox = await provider.create(spec())
        assert (await sandbox.exec("ln -s /etc /app/escape && ln -s / /app/root")).ok
        for path in ("/app/escape/hostname", "/app/root/etc/passwd"):
            with pytest.raises(StepError, match="is a symbolic link"):
                await sandbox.read_file(path)
            with pytest.raises(StepError, match="is a symbolic link"):
                await sandbox.write_file(path, b"no")
        await sandbox.terminate()

    run(go())


def test_found_again_from_a_fresh_process(provider_factory, tmp_path):
    provider = provider_factory()
    sandbox = run(provider.create(spec()))
    run(sandbox.write_file("/app/mark", b"from the first process"))
    code = (
        "import asyncio, sys, json\n"
        "from pathlib import Path\n"
        "from sandboxes.podman import PodmanSandboxProvider\n"
        "async def main():\n"
        f"    p = PodmanSandboxProvider(Path({str(tmp_path / '.agentenv')!r}), {{'pool_size': 0}})\n"
        f"    s = await p.get({sandbox.sandbox_id!r})\n"
        "    r = await s.exec(['cat', '/app/mark'])\n"
        "    print(json.dumps([r.stdout, [x['sandbox_id'] for x in await p.list()]]))\n"
        "    await p.aclose()\n"
        "asyncio.run(main())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    stdout, listed = json.loads(out.stdout)
    assert stdout == "from the first process" and listed == [sandbox.sandbox_id]
    run(sandbox.terminate())


def _host_addresses() -> list[str]:
    out = subprocess.run(["hostname", "-I"], capture_output=True, text=True).stdout.split()
    return ["127.0.0.1", *[a for a in out if ":" not in a]]


def test_network_none_cannot_reach_the_host(provider_factory):
    listener = socket.socket()
    listener.bind(("0.0.0.0", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    provider = provider_factory()

    async def go():
        sandbox = await provider.create(spec())
        probe = ("import socket,sys\n"
                 "for host in sys.argv[2:]:\n"
                 "    try:\n"
                 "        socket.create_connection((host, int(sys.argv[1])), timeout=2); print('reached', host)\n"
                 "    except OSError as e: print('blocked', host, e)\n")
        result = await sandbox.exec(["python3", "-c", probe, str(port), *_host_addresses()])
        await sandbox.terminate()
        return result

    with accepting(listener) as accepted:
        result = run(go())
    assert "reached" not in result.stdout and result.stdout.count("blocked") == len(_host_addresses())
    assert not accepted


def test_hardening_defaults(provider_factory):
    provider = provider_factory()

    async def go():
        sandbox = await provider.create(spec())
        caps = await sandbox.exec("grep CapEff /proc/self/status")
        nnp = await sandbox.exec("grep NoNewPrivs /proc/self/status")
        ro = await sandbox.exec("touch /usr/x")
        ip = await sandbox.exec("python3 -c 'import socket; print(socket.if_nameindex())'")
        await sandbox.terminate()
        return caps, nnp, ro, ip

    caps, nnp, ro, ip = run(go())
    assert caps.stdout.split()[1] == "0000000000000000"
    assert nnp.stdout.split()[1] == "1"
    assert ro.exit_code != 0 and "Read-only file system" in ro.stderr
    assert "'lo'" in ip.stdout and "eth0" not in ip.stdout


def test_a_read_only_mount_is_seen_and_cannot_be_written(provider_factory, tmp_path):
    """read_only_mounts (how a CLI agent's container gets its CLI from the setup cache): the folder's files are
    there, read-only, whatever uid the container runs as; the host's copy is untouched; a missing one is refused."""
    shared = tmp_path / "shared"
    (shared / "bin").mkdir(parents=True)
    (shared / "bin" / "tool").write_text("#!/bin/sh\necho tool ran\n")
    (shared / "bin" / "tool").chmod(0o755)
    provider = provider_factory()

    async def go():
        sandbox = await provider.create(spec(read_only_mounts={"/opt/shared": str(shared)}))
        try:
            ran = await sandbox.exec("/opt/shared/bin/tool")
            write = await sandbox.exec("echo x > /opt/shared/bin/tool")
            new = await sandbox.exec("touch /opt/shared/new")
            return ran, write, new
        finally:
            await sandbox.terminate()

    ran, write, new = run(go())
    assert ran.stdout == "tool ran\n", ran
    assert write.exit_code != 0 and "Read-only file system" in write.stderr
    assert new.exit_code != 0 and not (shared / "new").exists()
    assert (shared / "bin" / "tool").read_text() == "#!/bin/sh\necho tool ran\n"
    with pytest.raises(StepError, match="not on this machine"):
        run(provider.create(spec(read_only_mounts={"/opt/shared": str(tmp_path / "gone")})))


def test_memory_hungry_command_is_killed_and_says_why(provider_factory):
    provider = provider_factory()

    async def go():
        sandbox = await provider.create(spec(memory_mb=128))
        result = await sandbox.exec(["python3", "-c", "x = bytearray(512 * 1024 * 1024); print('survived')"])
        alive_after = await sandbox.exec(["echo", "still here"])
        await sandbox.terminate()
        return result, alive_after

    result, alive_after = run(go())
    assert result.exit_code == 137 and "survived" not in result.stdout
    assert result.killed_reason and "memory" in result.killed_reason and "128 MiB" in result.killed_reason
    assert alive_after.stdout == "still here\n"  # the sandbox itself lives on


def test_allowlist_is_refused_and_allow_all_publishes_ports(provider_factory):
    provider = provider_factory()

    async def go():
        with pytest.raises(StepError, match="allowlist"):
            await provider.create(spec(network_policy=NetworkPolicy(mode="allowlist", allow_hosts=["pypi.org"])))
        sandbox = await provider.create(spec(exposed_ports=[8000]))
        await sandbox.exec("cd /tmp && echo served > index.html && (python3 -m http.server 8000 >/dev/null 2>&1 &)")
        url = sandbox.tunnel_urls["8000"]
        assert url.startswith("http://127.0.0.1:")
        import urllib.request

        body = None
        for _ in range(100):
            try:
                body = await asyncio.to_thread(lambda: urllib.request.urlopen(url + "/index.html", timeout=2).read())
                break
            except OSError:
                await asyncio.sleep(0.1)
        await sandbox.terminate()
        return body

    assert run(go()) == b"served\n"


def _own_clients_reach(port: int) -> str:
    """Listen on 127.0.0.1:`port` (once what held it is gone) and connect to it: "ours" when our listener got the
    connection, else what the client met."""
    # Wait for the port to be free. Once its holder is gone the number is free for the whole machine, and any
    # process's outgoing connection may get it as its ephemeral local port meanwhile (CI run of stop 33: bind
    # failed with EADDRINUSE; the forwarder's random port is in the same range): such a connection ends soon.
    deadline = time.monotonic() + 30
    while True:
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            server.bind(("127.0.0.1", port))
            break
        except OSError as exc:
            server.close()
            if time.monotonic() > deadline:
                raise AssertionError(f"port {port} stayed taken: {exc}; its sockets:\n  " +
                                     "\n  ".join(sockets_on(port))) from None
            time.sleep(0.1)
    server.listen(1)
    with accepting(server) as accepted:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
        except OSError as exc:
            return f"the client met {exc!r}"
        deadline = time.monotonic() + 5
        while not accepted and time.monotonic() < deadline:
            time.sleep(0.02)
    return "ours" if accepted else "a connection our listener never saw"


def test_a_published_port_leaves_nothing_behind_when_its_container_dies_hard(provider_factory, podman_base_image):
    """A container's published port is held by a process, and nothing outlives that process: when everything that
    held it is killed (a crash, no teardown), the next server to bind the port on 127.0.0.1 gets its own clients.
    On rootful Podman's bridge the port was also a NAT rule, which outlived what held the port and sent the next
    server's local clients to the dead container: the suite's rare "connection refused" from a server just
    started (seven such rules were left on this machine after a run)."""
    provider = provider_factory()

    async def go():
        sandbox = await provider.create(spec(exposed_ports=[8000]))
        port = int(sandbox.tunnel_urls["8000"].rsplit(":", 1)[1])
        holders = pids_listening_on(port)
        try:
            for pid in holders:  # the crash: what holds the port dies, nobody tears the network down
                os.kill(pid, signal.SIGKILL)
            got = await asyncio.to_thread(_own_clients_reach, port)
        finally:
            await sandbox.terminate()
        return holders, got

    holders, got = run(go())
    assert holders, "no process held the published port"
    assert got == "ours"


def test_container_that_exits_at_start_reports_its_logs(provider_factory, podman_base_image):
    from sandboxes.podman import images

    provider = provider_factory()
    context = provider.state_dir.parent / "ctx"
    context.mkdir(parents=True)
    (context / "Containerfile").write_text(
        'ARG BASE\nFROM ${BASE}\nCMD ["bash", "-c", "echo cannot find my config file >&2; exit 3"]\n')
    ref = images.build("test-dies-at-start", "1", context, build_args={"BASE": podman_base_image})["ref"]

    async def go():
        with pytest.raises(StepError) as info:
            await provider.create(spec(mode="container", image=ref))
        return info.value.message

    message = run(go())
    assert "exited at start" in message and "cannot find my config file" in message
    assert project_containers(provider.project) == []


def test_unknown_image_is_not_pulled(provider_factory):
    provider = provider_factory()
    with pytest.raises(NotFoundError, match="not in Podman's local storage"):
        run(provider.create(spec(mode="container", image="localhost/agentenv/never-built:1")))


def test_warm_pool_hands_out_started_containers(provider_factory):
    provider = provider_factory({"pool_size": 1})

    async def go():
        first = await provider.create(spec(run_id="run-a"))
        image = first.meta["image"]
        # one sandbox asked for (a one-shot command): nothing is warmed that exit would only remove
        assert not provider.pool.filling(spec(), image) and provider.pool.ready_count(spec(), image) == 0
        assert len(project_containers(provider.project)) == 1
        second_cold = await provider.create(spec(run_id="run-a2"))  # the second: now the pool warms one
        assert not second_cold.meta.get("acquired_at")
        for _ in range(300):  # the pool refills in the background
            if provider.pool.ready_count(spec(), image) == 1:
                break
            await asyncio.sleep(0.05)
        assert provider.pool.ready_count(spec(), image) == 1
        second = await provider.create(spec(run_id="run-b", env_vars={"WHO": "second"}))
        assert second.meta.get("acquired_at") and second.meta["run_id"] == "run-b"
        assert (await second.exec("echo $WHO")).stdout == "second\n"
        listed = {r["sandbox_id"]: r for r in await provider.list()}
        assert listed[second.sandbox_id]["run_id"] == "run-b"
        await first.terminate()
        await second_cold.terminate()
        await second.terminate()
        await provider.aclose()  # empties the pool
        return image

    run(go())
    provider.wait_removals()
    assert project_containers(provider.project) == []


def test_owner_token_liveness():
    assert owner_alive(owner_token())
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    token = owner_token(proc.pid)
    proc.wait()
    assert not owner_alive(token)
    assert not owner_alive(None)


def test_a_configured_service_that_does_not_answer_is_explained(provider_factory, tmp_path):
    from agentenv_local.errors import AgentenvError

    provider = provider_factory({"socket": f"unix://{tmp_path}/nobody-home.sock"})
    with pytest.raises(AgentenvError) as info:
        run(provider.create(spec()))
    assert "does not answer" in info.value.message and "podman system service" in info.value.hint
    assert "does not answer" in provider.unusable_reason()
