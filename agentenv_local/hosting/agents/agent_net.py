"""A coding-CLI agent container with no network but the endpoints it needs (issue 15: "no network inside the
container except the gateway and model endpoint").

    ports = loopback_ports([model_base_url, *gateway_mcp_urls])   # None: an endpoint is not on this machine
    spec = SandboxSpec(..., command=inside_command(agent_argv, ports))  # no exposed ports, no host access
    net = AgentNet(sandbox.app_dir, ports); url = await net.start()      # the agent's A2A URL on this machine

The container gets network `none` (its own loopback only). Its command is agent_net_inside.py, which listens on
127.0.0.1:PORT inside for each allowed port of this machine's loopback and carries the connections over unix
sockets in /app/.agentenv-net (the sandbox's /app is a folder of this machine), where `AgentNet` forwards them to
127.0.0.1:PORT here; the agent's A2A port comes out the same way, to a TCP listener on this machine. So the URLs
the agent is given (127.0.0.1:PORT) are the same inside and out, and nothing else is reachable: no other port
of this machine, no other host. An endpoint elsewhere (a hosted model API) cannot be carried so (its TLS name
and DNS are not there): then the container keeps the slirp4netns network with host loopback (docs/agents.md).

The unix sockets live in a folder the container can write: this side never follows a link there (the folder
and each socket are opened with O_NOFOLLOW and used through /proc/self/fd).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path
from urllib.parse import urlsplit

from agentenv_local.errors import AgentenvError

NET_DIR = ".agentenv-net"  # under the sandbox's /app
INSIDE_CODE = Path(__file__).with_name("agent_net_inside.py").read_text()
_LOOPBACK = ("127.0.0.1", "localhost")


class AgentNetError(AgentenvError):
    """The agent container's relay could not be set up or reached."""


def loopback_ports(urls: list[str | None]) -> list[int] | None:
    """The ports of this machine's loopback the `urls` name (sorted, once each), or None when one of them is
    elsewhere (then the container cannot do without a network)."""
    ports: set[int] = set()
    for url in urls:
        if not url:
            continue
        parts = urlsplit(url)
        if parts.hostname not in _LOOPBACK:
            return None
        ports.add(parts.port or (443 if parts.scheme == "https" else 80))
    return sorted(ports)


def agent_port(ports: list[int]) -> int:
    """The agent's own port inside: 8000, unless an allowed endpoint needs that port."""
    return next(p for p in range(8000, 9000) if p not in ports)


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
    try:
        await asyncio.gather(_pipe(reader, other_writer), _pipe(other_reader, writer))
    finally:
        for w in (writer, other_writer):
            with contextlib.suppress(Exception):
                w.close()


class AgentNet:
    """This machine's half: unix listeners out-PORT.sock -> 127.0.0.1:PORT, and a TCP listener on 127.0.0.1 ->
    the container's a2a.sock. Lives on the loop that started it; `close()` ends it."""

    def __init__(self, app_dir: Path | None, ports: list[int]) -> None:
        if app_dir is None:
            raise AgentNetError("this sandbox provider's container has no /app folder on this machine to relay "
                                "through", hint="run coding-CLI agents in containers with the podman provider")
        self.app_dir, self.ports = Path(app_dir), list(ports)
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
        for port in self.ports:
            path = f"/proc/self/fd/{fd}/out-{port}.sock"
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"out-{port}.sock", dir_fd=fd)

            async def to_host(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, port: int = port) -> None:
                await _bridge(reader, writer, lambda: asyncio.open_connection("127.0.0.1", port))

            self._servers.append(await asyncio.start_unix_server(to_host, path))
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
