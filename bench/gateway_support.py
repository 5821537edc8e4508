"""Serving a Gateway over in-process envs on a free loopback port, for the benchmarks."""

from __future__ import annotations

import asyncio
import contextlib


@contextlib.asynccontextmanager
async def serve_gateway(children: dict, name: str = "bench"):
    import uvicorn

    from agentenv_local.gateway.children import ChildSpec
    from agentenv_local.gateway.server import Gateway

    gateway = Gateway(name, [ChildSpec(n, env) for n, env in children.items()])
    from agentenv_local.env.serve import bind_socket

    sock = bind_socket("127.0.0.1", 0)
    from agentenv_local.gateway.fastpath import protocol_class

    # as Gateway.serve: its own HTTP protocol answers 2026-revision tools/call and tools/list off the socket
    server = uvicorn.Server(uvicorn.Config(gateway.app(), log_level="warning", lifespan="on",
                                           http=protocol_class(gateway)))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        await task


def forward(upstream: str) -> None:
    """A do-nothing proxy: every connection is piped byte for byte to ``upstream`` (``http://host:port``). It
    prints ``forwarding on http://...`` to stderr, then serves until killed. The benchmark measures it as the
    floor of any extra hop in Python on this machine (two more sends, two more wake-ups per call)."""
    import sys
    from urllib.parse import urlsplit

    from agentenv_local.env.serve import bind_socket

    target = urlsplit(upstream)

    async def pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
        finally:
            writer.close()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(target.hostname, target.port)
        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer), return_exceptions=True)

    async def main() -> None:
        sock = bind_socket("127.0.0.1", 0)
        server = await asyncio.start_server(handle, sock=sock)
        print(f"forwarding on http://127.0.0.1:{sock.getsockname()[1]}", file=sys.stderr, flush=True)
        async with server:
            await server.serve_forever()

    from agentenv_local.loops import uvloop_or_asyncio_loop

    # the loop the standalone gateway runs on (uvicorn's choice), so the floor is measured on equal terms
    with asyncio.Runner(loop_factory=uvloop_or_asyncio_loop) as runner:
        runner.run(main())


@contextlib.contextmanager
def hub_instances(env_file: str, config_toml: str = ""):
    """A long-lived hub in a scratch project with the env at ``env_file`` deployed twice, the way `agentenv env
    deploy` deploys it: in the hub (``run_as = "in_process"``, the default) and as a subprocess. Yields
    {"in_process": mcp_url, "subprocess": mcp_url}."""
    import json
    import shutil
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    agentenv = [sys.executable, "-m", "agentenv_local.cli.main"]
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)

        def cli(*args: str) -> str:
            done = subprocess.run([*agentenv, *args], cwd=project, capture_output=True, text=True, timeout=180,
                                  check=False)
            if done.returncode != 0:
                log = project / ".agentenv" / "logs" / "hub.log"
                tail = log.read_text(errors="replace")[-3000:] if log.is_file() else ""
                raise RuntimeError(f"agentenv {' '.join(args)}: {done.stderr or done.stdout}{tail}")
            return done.stdout

        if config_toml:
            (project / ".agentenv").mkdir()
            (project / ".agentenv" / "config.toml").write_text(config_toml)
        cli("up", "--detach")
        try:
            urls = {}
            for run_as in ("in_process", "subprocess"):
                folder = project / f"echo-{run_as}"
                folder.mkdir()
                shutil.copy(env_file, folder / "server.py")
                (folder / "env.toml").write_text(f'module = "server.py:Echo"\nenvironment_name = "echo"\n'
                                                 f'run_as = "{run_as}"\n')
                cli("env", "put", str(folder), "--id", f"echo-{run_as}")
                out = cli("env", "deploy", "--id", f"echo-{run_as}", "--json")
                urls[run_as] = json.loads(out[: out.rindex("}") + 1])["mcp_url"]
            yield urls
        finally:
            subprocess.run([*agentenv, "down"], cwd=project, capture_output=True, timeout=60, check=False)
