"""A coding-CLI agent container's network (hosting/agents/agent_net.py): a real Podman container with network
none whose command is the relay (agent_net_inside.py), and this machine's half (AgentNet). A host process reaches
the server inside through the relay's A2A listener; a command inside reaches the allowed port of this machine's
loopback (as 127.0.0.1:PORT, the URL the agent is given), and nothing else: not another port of this machine (on
127.0.0.1 nor at slirp4netns' host address 10.0.2.2), not another host."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import ssl
import stat
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
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


def test_the_plan_relays_loopback_tunnels_https_elsewhere_and_gives_up_on_plain_http_elsewhere() -> None:
    plan = agent_net.network_plan(["http://127.0.0.1:4100/v1", None, "http://localhost:4200/mcp",
                                   "http://127.0.0.1:4100/other"])
    assert plan == agent_net.NetPlan(ports=[4100, 4200], agent_port=8000)
    assert plan.inside_ports == [4100, 4200] and "HTTPS_PROXY" not in plan.env_vars
    plan = agent_net.network_plan(["http://127.0.0.1:8000/mcp", "https://API.Anthropic.com/v1",
                                   "https://llm.example:8443"])
    assert plan is not None and plan.tunnels == [("api.anthropic.com", 443), ("llm.example", 8443)]
    assert (plan.ports, plan.proxy_port, plan.agent_port, plan.inside_ports) == ([8000], 8001, 8002, [8000, 8001])
    assert plan.env_vars["HTTPS_PROXY"] == "http://127.0.0.1:8001" and "127.0.0.1" in plan.env_vars["NO_PROXY"]
    assert agent_net.network_plan(["http://127.0.0.1:4100", "http://10.1.2.3:4000/v1"]) is None
    assert agent_net.agent_port([8000, 8001]) == 8002 and agent_net.agent_port([4100]) == 8000


# -- the CONNECT tunnel to an https endpoint elsewhere ---------------------------------------------------------
def _tls_context(folder: Path) -> ssl.SSLContext:
    """A server context for a certificate of `localhost`; its PEM is folder/ca.pem (what a client trusts)."""
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost", "-keyout", str(folder / "key.pem"),
                    "-out", str(folder / "ca.pem")], check=True, capture_output=True)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(folder / "ca.pem", folder / "key.pem")
    return context


async def _https_server(context: ssl.SSLContext) -> tuple[asyncio.AbstractServer, int]:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(Exception):
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 6\r\nconnection: close\r\n\r\nremote")
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=context)
    return server, server.sockets[0].getsockname()[1]


async def _raw(path: str, request: bytes) -> str:
    reader, writer = await asyncio.open_unix_connection(path)
    writer.write(request)
    await writer.drain()
    line = (await reader.readline()).decode().strip()
    writer.close()
    return line


def test_the_tunnel_opens_only_the_planned_endpoint(tmp_path: Path) -> None:
    """This machine's half alone: CONNECT to the planned host:port is joined to it; any other target, another
    method, a malformed or oversized head is refused with a status and closed."""
    async def go() -> dict[str, str]:
        target, port = await _line_server(b"remote\n")
        net = agent_net.AgentNet(tmp_path, [], [("localhost", port)], 8001)
        await net.start()
        sock = str(tmp_path / agent_net.NET_DIR / "out-8001.sock")
        try:
            reader, writer = await asyncio.open_unix_connection(sock)
            writer.write(f"CONNECT LOCALHOST:{port} HTTP/1.1\r\nHost: localhost:{port}\r\n\r\n".encode())
            await writer.drain()
            status = (await reader.readuntil(b"\r\n\r\n")).decode().split("\r\n", 1)[0]
            through = (await reader.readline()).decode().strip()
            writer.close()
            return {
                "allowed": f"{status} / {through}",
                "other_port": await _raw(sock, f"CONNECT localhost:{port + 1} HTTP/1.1\r\n\r\n".encode()),
                "other_host": await _raw(sock, f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode()),
                "forward": await _raw(sock, f"GET http://localhost:{port}/ HTTP/1.1\r\n\r\n".encode()),
                "garbage": await _raw(sock, b"hello\r\n\r\n"),
                "huge": await _raw(sock, b"CONNECT localhost:1 HTTP/1.1\r\nX: " + b"a" * 70000 + b"\r\n\r\n"),
            }
        finally:
            await net.close()
            target.close()

    seen = asyncio.run(go())
    assert seen["allowed"] == "HTTP/1.1 200 Connection established / remote", seen
    assert seen["other_port"].startswith("HTTP/1.1 403") and seen["other_host"].startswith("HTTP/1.1 403"), seen
    assert seen["forward"].startswith("HTTP/1.1 405") and seen["garbage"].startswith("HTTP/1.1 400"), seen
    assert seen["huge"].startswith("HTTP/1.1 431"), seen


TUNNEL_PROBE = """
import json, os, socket, ssl, httpx2
def via_proxy(url):
    try:
        ctx = ssl.create_default_context(cafile="/app/ca.pem")
        with httpx2.Client(verify=ctx, timeout=10) as client:  # HTTPS_PROXY from the environment, as the agent's
            return client.get(url).text
    except Exception as exc:
        return type(exc).__name__
def connect(target):
    with socket.create_connection(("127.0.0.1", @PROXY@), timeout=5) as s:
        s.sendall(f"CONNECT {target} HTTP/1.1\\r\\n\\r\\n".encode())
        return s.recv(200).decode().split("\\r\\n", 1)[0]
def direct(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=3).close()
        return "connected"
    except OSError as exc:
        return type(exc).__name__
print(json.dumps({"https": via_proxy("https://localhost:@PORT@/"), "other": connect("localhost:@OTHER@"),
                  "elsewhere": connect("1.1.1.1:443"), "direct": direct(@PORT@)}))
"""


def test_a_container_reaches_an_https_endpoint_elsewhere_only_through_the_tunnel(provider_factory,
                                                                                 tmp_path: Path) -> None:
    """A container with network none and the plan's HTTPS_PROXY: httpx2 (the model proxy's client) reaches the
    https endpoint by name through the tunnel, TLS verified end to end; the tunnel opens nothing else, and the
    endpoint is not reachable directly."""
    provider = provider_factory()
    image = provider.runtime_image()
    context = _tls_context(tmp_path)

    async def go() -> dict[str, str]:
        server, port = await _https_server(context)
        other, other_port = await _line_server(b"other\n")
        plan = agent_net.NetPlan(ports=[], tunnels=[("localhost", port)], proxy_port=8001, agent_port=8000)
        serve = ["python", "-m", "http.server", "8000", "--bind", "127.0.0.1", "--directory", "/tmp"]
        env = {key: value for key, value in plan.env_vars.items() if key.lower() != "no_proxy"}  # localhost too
        sandbox = await provider.create(SandboxSpec(
            name="agent-tunnel", mode="container", image=image, env_vars=env,
            command=agent_net.inside_command(serve, plan.inside_ports, plan.agent_port)))
        net = agent_net.AgentNet(sandbox.app_dir, plan.ports, plan.tunnels, plan.proxy_port)
        try:
            await net.start()
            await sandbox.write_file("/app/ca.pem", (tmp_path / "ca.pem").read_bytes())
            probe = (TUNNEL_PROBE.replace("@PROXY@", "8001").replace("@OTHER@", str(other_port))
                     .replace("@PORT@", str(port)))
            ran = await sandbox.exec(["python3", "-c", probe], timeout=60)
            assert ran.exit_code == 0, ran.stderr
            return dict(json.loads(ran.stdout))
        finally:
            await net.close()
            await sandbox.terminate()
            server.close()
            other.close()

    reached = asyncio.run(go())
    assert reached["https"] == "remote", reached
    assert reached["other"].startswith("HTTP/1.1 403") and reached["elsewhere"].startswith("HTTP/1.1 403"), reached
    assert reached["direct"] == "ConnectionRefusedError", reached
