"""A coding-CLI agent container's network (hosting/agents/agent_net.py): a real Podman container with network
none whose command is the relay (agent_net_inside.py), and this machine's half (AgentNet). A host process reaches
the server inside through the relay's A2A listener; a command inside reaches the allowed port of this machine's
loopback (as 127.0.0.1:PORT, the URL the agent is given), and nothing else: not another port of this machine (on
127.0.0.1 nor at slirp4netns' host address 10.0.2.2), not another host."""

from __future__ import annotations

import asyncio
import json
import os
import stat
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from agentenv_local.hosting.agents import agent_net
from agentenv_local.sandbox_api import SandboxSpec

pytestmark = pytest.mark.timeout(900)  # the runtime image is built first when the sources changed

PROBE = """
import json, socket
def reach(host, port):
    try:
        with socket.create_connection((host, port), timeout=3) as s:
            s.settimeout(3)
            return s.recv(100).decode().strip() or "connected"
    except OSError as exc:
        return type(exc).__name__
print(json.dumps({name: reach(host, int(port)) for name, host, port in
                  [("allowed", "127.0.0.1", ALLOWED), ("other", "127.0.0.1", OTHER),
                   ("other_via_slirp", "10.0.2.2", OTHER), ("outside", "1.1.1.1", 53)]}))
"""


async def _line_server(text: bytes) -> tuple[asyncio.AbstractServer, int]:
    async def answer(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(text)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def _until(check: Callable[[], Awaitable[Any]], tries: int = 300) -> Any:
    for _ in range(tries):
        try:
            if found := await check():
                return found
        except OSError:
            pass
        await asyncio.sleep(0.1)
    raise AssertionError("the relay never answered")


def test_the_container_reaches_the_allowed_port_only_and_the_host_reaches_its_server(provider_factory) -> None:
    provider = provider_factory()
    image = provider.runtime_image()

    async def go() -> tuple[str, dict[str, str], list[str], bool, int]:
        allowed, allowed_port = await _line_server(b"allowed\n")
        other, other_port = await _line_server(b"other\n")
        inner = agent_net.agent_port([allowed_port])
        serve = ["python", "-m", "http.server", str(inner), "--bind", "127.0.0.1", "--directory", "/tmp"]
        sandbox = await provider.create(SandboxSpec(
            name="agent-net", mode="container", image=image, command=agent_net.inside_command(serve, [allowed_port],
                                                                                                inner)))
        net = agent_net.AgentNet(sandbox.app_dir, [allowed_port])
        try:
            url = await net.start()

            async def listing() -> str:
                reader, writer = await asyncio.open_connection("127.0.0.1", int(url.rsplit(":", 1)[1]))
                writer.write(b"GET / HTTP/1.0\r\n\r\n")
                await writer.drain()
                head = (await reader.read(200)).decode()
                writer.close()
                return head.split("\r\n", 1)[0]

            status = await _until(listing)
            probe = PROBE.replace("ALLOWED", str(allowed_port)).replace("OTHER", str(other_port))
            ran = await sandbox.exec(["python3", "-c", probe], timeout=60)
            assert ran.exit_code == 0, ran.stderr
            folder = sandbox.app_dir / agent_net.NET_DIR
            sockets = sorted(p.name for p in folder.iterdir() if stat.S_ISSOCK(os.lstat(p).st_mode))
            inspected = await asyncio.to_thread(provider.api().inspect_container, sandbox.sandbox_id)
            no_network = (inspected.get("HostConfig") or {}).get("NetworkMode") == "none"
            return status, json.loads(ran.stdout), sockets, no_network, allowed_port
        finally:
            await net.close()
            await sandbox.terminate()
            for server in (allowed, other):
                server.close()

    status, reached, sockets, no_network, allowed_port = asyncio.run(go())
    assert status.startswith("HTTP/1.0 200")  # this machine -> the relay's A2A listener -> the server inside
    assert no_network
    assert sockets == ["a2a.sock", f"out-{allowed_port}.sock"]
    assert reached["allowed"] == "allowed"
    assert reached["other"] == "ConnectionRefusedError"
    assert reached["other_via_slirp"] != "other" and reached["outside"] != "connected", reached


def test_only_endpoints_on_this_machines_loopback_can_be_relayed() -> None:
    assert agent_net.loopback_ports(["http://127.0.0.1:4100/v1", None, "http://localhost:4200/mcp",
                                     "http://127.0.0.1:4100/other"]) == [4100, 4200]
    assert agent_net.loopback_ports(["http://127.0.0.1:4100", "https://api.anthropic.com/v1"]) is None
    assert agent_net.agent_port([8000, 8001]) == 8002 and agent_net.agent_port([4100]) == 8000
