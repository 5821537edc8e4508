"""The one process: `python -m agentenv_one_process.host --reply-fd N`, started by the provider for one env instance.

It listens on 127.0.0.1 (a free port) and serves nothing until told to. The provider writes one JSON command a
line on its stdin and reads one JSON answer a line from the pipe `--reply-fd` (stdout and stderr are the log, which
an env's own prints may fill):

    -> (at start)                                          <- {"ok": true, "port": 40123, "pid": 4242}
    -> {"op": "load", "name": "tally", "prefix": "/0-tally",
        "target": "/.../tally/server.py:Tally", "mcp_path": "/mcp"}
                                                           <- {"ok": true} | {"ok": false, "error": "..."}

Each server gets its own Env object, runtime and MCP app (with its own session manager and data plane, behind the
HTTP guard and the instance's admin token), mounted at its prefix: nothing is shared between them but the
interpreter. When stdin closes (the provider stops it, or the hub is gone) the servers are shut down and the
process exits, so an instance never leaves it behind.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import threading
from typing import Any


class Lifespan:
    """Drives one ASGI app's lifespan (startup, shutdown) by hand: mounted apps get none from the server."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.inbox: asyncio.Queue[dict] = asyncio.Queue()
        self.answers: asyncio.Queue[dict] = asyncio.Queue()
        self.task: asyncio.Task | None = None

    async def _send(self, message: dict) -> None:
        await self.answers.put(message)

    async def _call(self, kind: str) -> None:
        await self.inbox.put({"type": f"lifespan.{kind}"})
        answer = await self.answers.get()
        if answer["type"] != f"lifespan.{kind}.complete":
            raise RuntimeError(answer.get("message") or f"its {kind} failed")

    async def startup(self) -> None:
        scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": {}}
        self.task = asyncio.create_task(self.app(scope, self.inbox.get, self._send))
        await self._call("startup")

    async def shutdown(self) -> None:
        if self.task is not None and not self.task.done():
            await self._call("shutdown")


class Host:
    """The servers this process serves, by path prefix."""

    def __init__(self, admin_token: str | None, reply: Any) -> None:
        from starlette.routing import Router

        self.admin_token = admin_token
        self.reply_file = reply
        self.router = Router(routes=[])
        self.lifespans: list[Lifespan] = []

    def reply(self, **answer: Any) -> None:
        self.reply_file.write(json.dumps(answer) + "\n")
        self.reply_file.flush()

    async def load(self, name: str, prefix: str, target: str, mcp_path: str) -> None:
        """Import one server and mount it at `prefix`; an import that raises or exits is answered, not fatal."""
        from starlette.routing import Mount

        from agentenv_local.env import load_env
        from agentenv_local.env.app import build_app
        from agentenv_local.env.runtime import Runtime

        try:
            env = await asyncio.get_running_loop().run_in_executor(None, load_env, target)
        except (Exception, SystemExit) as e:
            kind = "SystemExit" if isinstance(e, SystemExit) else type(e).__name__
            self.reply(ok=False, error=f"cannot load {target.rsplit('/', 1)[-1]}: {kind}: {e}")
            return
        runtime = Runtime(env, name=name)  # its card's name, as ENVIRONMENT_NAME gives it in a process of its own
        env.__dict__["_ae_rt"] = runtime
        app = build_app(runtime, mcp_path=mcp_path, admin_token=self.admin_token, own_hosts=["127.0.0.1"])
        lifespan = Lifespan(app)
        try:
            await lifespan.startup()
        except Exception as e:
            self.reply(ok=False, error=f"{name} did not start: {type(e).__name__}: {e}")
            return
        self.lifespans.append(lifespan)
        self.router.routes.append(Mount(prefix, app=app))
        self.reply(ok=True)

    async def close(self) -> None:
        for lifespan in reversed(self.lifespans):
            try:
                await asyncio.wait_for(lifespan.shutdown(), 5)
            except Exception as e:  # one server's failing shutdown must not keep the others running
                print(f"one_process: a server's shutdown failed: {e}", file=sys.stderr, flush=True)


async def serve(reply_fd: int) -> None:
    import uvicorn

    from agentenv_local.env.app import admin_token_from_environ
    from agentenv_local.env.serve import KEEP_ALIVE_S, bind_socket

    reply = os.fdopen(reply_fd, "w", encoding="utf-8")
    host = Host(admin_token_from_environ(), reply)
    sock = bind_socket("127.0.0.1", 0)  # loopback only, any free port
    config = uvicorn.Config(host.router, lifespan="off", log_level="warning", access_log=False,
                            timeout_keep_alive=KEEP_ALIVE_S, timeout_graceful_shutdown=3)
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        if serving.done():
            serving.result()  # raises why it could not serve
            return
        await asyncio.sleep(0.01)
    host.reply(ok=True, port=sock.getsockname()[1], pid=os.getpid())
    commands = read_commands(asyncio.get_running_loop())
    try:
        while True:
            reading = asyncio.ensure_future(commands.get())
            await asyncio.wait({reading, serving}, return_when=asyncio.FIRST_COMPLETED)
            if not reading.done():  # the server stopped (SIGTERM): so does the process
                reading.cancel()
                break
            line = reading.result()
            if not line:  # the provider closed stdin, or the hub is gone: never outlive it
                break
            command = json.loads(line)
            if command.get("op") == "load":
                await host.load(command["name"], command["prefix"], command["target"], command["mcp_path"])
            else:
                host.reply(ok=False, error=f"unknown op {command.get('op')!r}")
    finally:
        await host.close()
        server.should_exit = True
        await serving


def read_commands(loop: asyncio.AbstractEventLoop) -> asyncio.Queue[str]:
    """stdin's lines ("" at its end), read by a daemon thread: a blocked read never keeps the process alive."""
    lines: asyncio.Queue[str] = asyncio.Queue()

    def pump() -> None:
        while True:
            line = sys.stdin.readline()
            loop.call_soon_threadsafe(lines.put_nowait, line)
            if not line:
                return

    threading.Thread(target=pump, name="one-process-commands", daemon=True).start()
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agentenv_one_process.host")
    parser.add_argument("--reply-fd", type=int, required=True, help="the pipe the answers are written to")
    parser.add_argument("--instance", default="", help="the env instance it serves (shown in ps)")
    args = parser.parse_args(argv)
    asyncio.run(serve(args.reply_fd))
    return 0


if __name__ == "__main__":
    sys.exit(main())
