"""A coding-CLI agent container with no network but the endpoints it needs (issue 15: "no network inside the
container except the gateway and model endpoint").

    plan = network_plan([model_base_url, *gateway_mcp_urls])     # None: an endpoint cannot be carried
    spec = SandboxSpec(..., command=inside_command(agent_argv, plan.inside_ports, plan.agent_port),
                       env_vars={**plan.env_vars, ...})                # no exposed ports, no host access
    net = AgentNet(sandbox.app_dir, plan.ports, plan.tunnels, plan.proxy_port); url = await net.start()

The container gets network `none` (its own loopback only). Its command is agent_net_inside.py, which listens on
127.0.0.1:PORT inside for each allowed port of this machine's loopback and carries the connections over unix
sockets in /app/.agentenv-net (the sandbox's /app is a folder of this machine), where `AgentNet` forwards them to
127.0.0.1:PORT here; the agent's A2A port comes out the same way, to a TCP listener on this machine. So the URLs
the agent is given (127.0.0.1:PORT) are the same inside and out, and nothing else is reachable: no other port
of this machine, no other host.

An https endpoint elsewhere (a hosted model API) goes through a tunnel instead: one more port inside (the
plan's proxy_port, given to the agent as HTTPS_PROXY) whose connections this side reads as HTTP CONNECT requests,
opening only the planned host:port (DNS and the connection on this machine, TLS end to end between the agent's
client and the endpoint: the relay sees only ciphertext). A plain-http endpoint elsewhere cannot be carried so
(a proxy would forward its requests, not tunnel them): then the container keeps the slirp4netns network with host
loopback (docs/agents.md).

The unix sockets live in a folder the container can write: this side never follows a link there (the folder
and each socket are opened with O_NOFOLLOW and used through /proc/self/fd).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from agentenv_local.errors import AgentenvError

NET_DIR = ".agentenv-net"  # under the sandbox's /app
INSIDE_CODE = Path(__file__).with_name("agent_net_inside.py").read_text()
_LOOPBACK = ("127.0.0.1", "localhost")


class AgentNetError(AgentenvError):
    """The agent container's relay could not be set up or reached."""


def agent_port(ports: list[int]) -> int:
    """The agent's own port inside: 8000, unless an allowed endpoint needs that port."""
    return next(p for p in range(8000, 9000) if p not in ports)


@dataclass(frozen=True)
class NetPlan:
    """What an agent container with network none is given: the loopback `ports` of this machine it reaches, the
    https endpoints elsewhere (`tunnels`, host and port) it reaches through the CONNECT port `proxy_port`, and
    the port its own A2A server listens on inside."""

    ports: list[int]
    tunnels: list[tuple[str, int]] = field(default_factory=list)
    proxy_port: int | None = None
    agent_port: int = 8000

    @property
    def inside_ports(self) -> list[int]:
        """The ports the relay listens on inside (the tunnel's too: it is carried like the others)."""
        return self.ports + ([self.proxy_port] if self.proxy_port is not None else [])

    @property
    def env_vars(self) -> dict[str, str]:
        """The agent's variables: its A2A address inside and, with tunnels, the proxy its HTTP client takes for
        https (loopback stays direct)."""
        env = {"A2A_HOST": "127.0.0.1", "A2A_PORT": str(self.agent_port)}
        if self.proxy_port is not None:
            proxy = f"http://127.0.0.1:{self.proxy_port}"
            env.update(HTTPS_PROXY=proxy, https_proxy=proxy, NO_PROXY="127.0.0.1,localhost",
                       no_proxy="127.0.0.1,localhost")
        return env


def network_plan(urls: list[str | None]) -> NetPlan | None:
    """How a container with network none reaches `urls`: loopback ones through the relay, https ones elsewhere
    through the CONNECT tunnel; None when one cannot be carried (plain http elsewhere, or no host)."""
    ports: set[int] = set()
    tunnels: set[tuple[str, int]] = set()
    for url in urls:
        if not url:
            continue
        parts = urlsplit(url)
        if parts.hostname in _LOOPBACK:
            ports.add(parts.port or (443 if parts.scheme == "https" else 80))
        elif parts.scheme == "https" and parts.hostname:
            tunnels.add((parts.hostname.lower(), parts.port or 443))
        else:
            return None
    taken = sorted(ports)
    proxy = agent_port(taken) if tunnels else None
    return NetPlan(ports=taken, tunnels=sorted(tunnels), proxy_port=proxy,
                   agent_port=agent_port(taken + ([proxy] if proxy is not None else [])))


def inside_command(agent_argv: list[str], ports: list[int], a2a_port: int) -> list[str]:
    """The container's command: the relay (agent_net_inside.py) that starts `agent_argv` (listening on
    127.0.0.1:a2a_port) and carries `ports`."""
    return ["python", "-u", "-c", INSIDE_CODE, f"/app/{NET_DIR}", str(a2a_port), ",".join(map(str, ports)), "--",
            *agent_argv]


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        pass


Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def _bridge(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                  connect: Callable[[], Awaitable[Streams]]) -> None:
    try:
        other_reader, other_writer = await connect()
    except OSError:
        writer.close()
        return
    await _join((reader, writer), (other_reader, other_writer))


async def _join(one: Streams, other: Streams) -> None:
    """Carry bytes both ways until both directions end; then close both."""
    try:
        await asyncio.gather(_pipe(one[0], other[1]), _pipe(other[0], one[1]))
    finally:
        for w in (one[1], other[1]):
            with contextlib.suppress(Exception):
                w.close()


MAX_CONNECT_HEAD = 2 ** 16  # a CONNECT request's head: the stream reader's own limit, where readuntil gives up
CONNECT_HEAD_TIMEOUT_S = 10.0


def _answer(writer: asyncio.StreamWriter, status: str, why: str) -> None:
    body = why.encode() + b"\n"
    writer.write(f"HTTP/1.1 {status}\r\ncontent-type: text/plain\r\ncontent-length: {len(body)}\r\n"
                 "connection: close\r\n\r\n".encode() + body)
    writer.close()


async def connect_tunnel(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                         allowed: set[tuple[str, int]]) -> None:
    """Serve one CONNECT request (HTTP/1.x, `CONNECT host:port`): a host and port in `allowed` is opened here and
    the two streams joined; anything else gets a 4xx and the connection closes. The head is bounded in size and
    time (the other end is the container)."""
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), CONNECT_HEAD_TIMEOUT_S)
    except asyncio.LimitOverrunError:
        return _answer(writer, "431 Request Header Fields Too Large", f"a head is at most {MAX_CONNECT_HEAD} bytes")
    except (asyncio.IncompleteReadError, asyncio.TimeoutError, ConnectionError, OSError):
        writer.close()
        return None
    parts = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        return _answer(writer, "400 Bad Request", "not an HTTP/1.x request")
    if parts[0] != "CONNECT":
        return _answer(writer, "405 Method Not Allowed", "this proxy only tunnels (CONNECT host:port)")
    host, _, port_text = parts[1].rpartition(":")
    target = (host.strip("[]").lower(), int(port_text)) if port_text.isdigit() else None
    if target is None or target not in allowed:
        return _answer(writer, "403 Forbidden", f"{parts[1]} is not an endpoint this agent is given")
    try:
        other_reader, other_writer = await asyncio.open_connection(*target)
    except OSError as exc:
        return _answer(writer, "502 Bad Gateway", f"{parts[1]} could not be reached: {type(exc).__name__}")
    writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
    await _join((reader, writer), (other_reader, other_writer))
    return None


class AgentNet:
    """This machine's half: unix listeners out-PORT.sock -> 127.0.0.1:PORT (out-PROXY.sock -> the CONNECT tunnel
    to `tunnels`), and a TCP listener on 127.0.0.1 -> the container's a2a.sock. Lives on the loop that started
    it; `close()` ends it."""

    def __init__(self, app_dir: Path | None, ports: list[int], tunnels: list[tuple[str, int]] | None = None,
                 proxy_port: int | None = None) -> None:
        if app_dir is None:
            raise AgentNetError("this sandbox provider's container has no /app folder on this machine to relay "
                                "through", hint="run coding-CLI agents in containers with the podman provider")
        if bool(tunnels) != (proxy_port is not None):
            raise ValueError("tunnels and proxy_port go together")
        self.app_dir, self.ports = Path(app_dir), list(ports)
        self.tunnels, self.proxy_port = {(h.lower(), p) for h, p in tunnels or []}, proxy_port
        self._dir_fd: int | None = None
        self._servers: list[asyncio.AbstractServer] = []
        self.url = ""

    def _open_dir(self) -> int:
        """The relay folder under /app, made here if the container has not yet, opened without following a link."""
        app_fd = os.open(self.app_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            with contextlib.suppress(FileExistsError):
                os.mkdir(NET_DIR, 0o755, dir_fd=app_fd)
            fd = os.open(NET_DIR, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=app_fd)
            owner = os.fstat(app_fd)
            with contextlib.suppress(PermissionError):
                os.fchown(fd, owner.st_uid, owner.st_gid)  # the container's root owns /app (user namespace)
            return fd
        except OSError as exc:
            raise AgentNetError(f"cannot set up the agent container's relay folder in {self.app_dir}: {exc}") from exc
        finally:
            os.close(app_fd)

    async def start(self) -> str:
        fd = self._dir_fd = self._open_dir()
        handlers: list[tuple[int, Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]]] = []
        for port in self.ports:
            async def to_host(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, port: int = port) -> None:
                await _bridge(reader, writer, lambda: asyncio.open_connection("127.0.0.1", port))

            handlers.append((port, to_host))
        if self.proxy_port is not None:
            async def tunnel(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
                await connect_tunnel(reader, writer, self.tunnels)

            handlers.append((self.proxy_port, tunnel))
        for port, handler in handlers:
            path = f"/proc/self/fd/{fd}/out-{port}.sock"
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"out-{port}.sock", dir_fd=fd)
            self._servers.append(await asyncio.start_unix_server(handler, path))
            os.chmod(f"out-{port}.sock", 0o666, dir_fd=fd, follow_symlinks=False)
        server = await asyncio.start_server(self._to_agent, "127.0.0.1", 0)
        self._servers.append(server)
        self.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        return self.url

    async def _connect_agent(self) -> Streams:
        assert self._dir_fd is not None
        sock_fd = os.open("a2a.sock", os.O_PATH | os.O_NOFOLLOW, dir_fd=self._dir_fd)
        try:
            if not stat.S_ISSOCK(os.fstat(sock_fd).st_mode):
                raise ConnectionRefusedError("a2a.sock is not a socket")
            return await asyncio.open_unix_connection(f"/proc/self/fd/{sock_fd}")
        finally:
            os.close(sock_fd)

    async def _to_agent(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _bridge(reader, writer, self._connect_agent)

    async def close(self) -> None:
        for server in self._servers:
            server.close()
        self._servers = []
        if self._dir_fd is not None:
            os.close(self._dir_fd)
            self._dir_fd = None
