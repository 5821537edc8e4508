"""The fast command channel into a running container.

The exec agent (exec_agent.py, standard library only) answers one JSON line per request. Two ways in:
- `Channel.connect_socket(path)`: the agent is the container's main process and listens on a unix socket
  in a folder bind-mounted from the host; any host process connects in well under a millisecond;
- `Channel.spawn(container)`: one `podman exec -i CONTAINER python3 -u -c <agent>` kept open (for images
  started with their own command, and for hosts where a bind-mounted socket cannot work, such as a
  Podman machine VM).
Either way a command costs one line each way instead of a `podman exec` (about 150 ms). Requests are
multiplexed by id, so steps can run commands concurrently. A channel belongs to the event loop that
opened it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
from pathlib import Path
from typing import Any

from agentenv_local.errors import AgentenvError
from agentenv_local.paths import MAX_SOCKET_PATH

from .engine import podman_binary, podman_env

AGENT_CODE = Path(__file__).with_name("exec_agent.py").read_text()
LINE_LIMIT = 256 * 1024 * 1024  # a file read comes back as one base64 line
OPEN_TIMEOUT_S = 30.0


class ChannelError(AgentenvError):
    """The channel to a container broke (the container stopped, or has no python3)."""


def agent_argv(python: str = "python3", listen: str | None = None) -> list[str]:
    return [python, "-u", "-c", AGENT_CODE, *(["--listen", listen] if listen else [])]


class Channel:
    def __init__(self, label: str, reader: asyncio.StreamReader, writer: Any, proc=None):
        self.label = label
        self.loop = asyncio.get_running_loop()
        self._reader_stream = reader
        self._writer = writer
        self._proc = proc
        self._pending: dict[int, asyncio.Future] = {}
        self._ids = itertools.count(1)
        self._closed = False
        self._task: asyncio.Task | None = None

    # -- opening ------------------------------------------------------------------------------
    @classmethod
    async def connect_socket(cls, path: Path, label: str) -> Channel:
        path = Path(path)
        fd = None
        target = str(path)
        if len(os.fsencode(target)) > MAX_SOCKET_PATH:  # too long for sun_path: go through an fd of its folder
            fd = os.open(path.parent, os.O_PATH)
            target = f"/proc/self/fd/{fd}/{path.name}"
        try:
            reader, writer = await asyncio.open_unix_connection(target, limit=LINE_LIMIT)
        except OSError as exc:
            raise ChannelError(f"cannot connect to the exec agent of {label}: {exc}") from exc
        finally:
            if fd is not None:
                os.close(fd)
        return await cls(label, reader, writer)._handshake()

    @classmethod
    async def spawn(cls, container: str, config: dict[str, Any] | None = None, python: str = "python3") -> Channel:
        proc = await asyncio.create_subprocess_exec(
            podman_binary(config), "exec", "-i", container, *agent_argv(python),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env=podman_env(config), limit=LINE_LIMIT, start_new_session=True)
        assert proc.stdout is not None and proc.stdin is not None  # both are pipes
        return await cls(container, proc.stdout, proc.stdin, proc)._handshake()

    async def _handshake(self) -> Channel:
        try:
            first = await asyncio.wait_for(self._reader_stream.readline(), OPEN_TIMEOUT_S)
        except TimeoutError:
            first = b""
        if not first.startswith(b'{"id":0,"ready":true'):
            err = b""
            if self._proc is not None:
                with contextlib.suppress(Exception):
                    self._proc.kill()
                    err = await asyncio.wait_for(self._proc.stderr.read(), 2)
            await self.close()
            raise ChannelError(f"could not open a command channel into {self.label}: "
                               f"{(err or first).decode(errors='replace').strip()[-500:] or 'no answer'}",
                               hint="the image needs python3 for the command channel")
        self._task = asyncio.create_task(self._read_loop())
        return self

    # -- traffic ------------------------------------------------------------------------------
    @property
    def alive(self) -> bool:
        return not self._closed and self._task is not None and not self._task.done()

    async def _read_loop(self) -> None:
        why = "the container stopped?"
        try:
            while True:
                line = await self._reader_stream.readline()
                if not line:
                    break
                msg = json.loads(line)
                fut = self._pending.pop(msg.get("id"), None)
                if fut is not None and not fut.done():
                    fut.set_result(msg)
        except (ValueError, asyncio.LimitOverrunError, OSError) as exc:
            why = str(exc)
        self._fail_all(ChannelError(f"the command channel into {self.label} closed ({why})"))

    def _fail_all(self, exc: Exception) -> None:
        pending, self._pending = self._pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(exc)

    async def request(self, op: str, wait: float | None = None, **fields: Any) -> dict:
        """Send one request; `wait` bounds how long we wait for its answer (fields go to the agent)."""
        if not self.alive:
            raise ChannelError(f"the command channel into {self.label} is closed")
        req_id = next(self._ids)
        fut = self.loop.create_future()
        self._pending[req_id] = fut
        self._writer.write((json.dumps({"id": req_id, "op": op, **fields}, separators=(",", ":")) + "\n").encode())
        await self._writer.drain()
        try:
            return await asyncio.wait_for(fut, wait)
        finally:
            self._pending.pop(req_id, None)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            self._writer.close()
        if self._proc is not None and self._proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._proc.kill()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._proc.wait(), 5)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
        self._fail_all(ChannelError(f"the command channel into {self.label} was closed"))


def decode(field: str | None) -> bytes:
    return base64.b64decode(field) if field else b""


def encode(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
