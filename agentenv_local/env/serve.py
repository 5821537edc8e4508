"""Running an env: over HTTP (uvicorn), over stdio, or loaded from a file for `python -m agentenv_local.env`.

    python -m agentenv_local.env examples/envs/echo/server.py            # HTTP on MCP_HOST:MCP_PORT
    python -m agentenv_local.env examples/envs/echo/server.py --port 0   # any free port (printed)
    python -m agentenv_local.env examples/envs/echo/server.py:Echo --stdio
    python -m agentenv_local.env examples/envs/echo/server.py --card     # print the card and exit

Once the HTTP server listens it prints one line to stderr:
`agentenv env 'echo' serving on http://127.0.0.1:18765 (card /.well-known/agent-env.json, mcp /mcp)`;
`GET /ready` answers 200 from then on.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import importlib.util
import json
import os
import pathlib
import socket
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .base import Env

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 18765


class EnvLoadError(Exception):
    """The target names no env that can be loaded; the message says what was found instead."""


def resolve_bind(host: str | None, port: int | str | None) -> tuple[str, int]:
    host = host or os.environ.get("MCP_HOST") or DEFAULT_HOST
    if port is None:
        port = os.environ.get("MCP_PORT") or DEFAULT_PORT
    try:
        port = int(port)
    except (TypeError, ValueError):
        raise ValueError(f"the port must be a number, got {port!r}") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"the port must be between 0 and 65535, got {port}")
    return host, port


# How long our HTTP servers keep an idle connection open: well past the 5 s after which httpx (ours, mcp's, the
# reference's clients) stops reusing one. With both at uvicorn's default 5 s, a request sent on a connection idle
# that long could cross the server closing it and be lost to a connection reset (seen under load as `cannot
# reach .../a2a` and ReadErrors in MCP calls between conversation turns).
KEEP_ALIVE_S = 30


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening-ready socket on host:port (port 0 = any free port), SO_REUSEADDR set."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    family, _type, _proto, _canon, addr = infos[0]
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY on accepted connections only when the listening
    # socket's proto says TCP; with proto 0, Nagle + delayed ACKs add ~40 ms to every small response.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(addr)
    except OSError as e:
        sock.close()
        raise OSError(e.errno, f"cannot listen on {host}:{port}: {e.strerror}; pick another port with --port "
                               "(or MCP_PORT), or --port 0 for any free one") from None
    # Listen now, before uvicorn starts: a client that read the "serving on" line may connect at
    # once, and its connection must wait in the backlog rather than be refused.
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def serve_http(env: Env, host: str | None = None, port: int | None = None, *, log_level: str = "warning",
               announce: bool = True, **app_options: Any) -> None:
    import uvicorn

    host, port = resolve_bind(host, port)
    sock = bind_socket(host, port)
    port = sock.getsockname()[1]
    runtime = env._ae_runtime()
    from .app import admin_token_from_environ, build_app

    # the data plane's credential, when the hub started this server; the guard also accepts the bound address
    app_options.setdefault("admin_token", admin_token_from_environ())
    app = build_app(runtime, own_hosts=[host], **app_options)
    config = uvicorn.Config(app, log_level=log_level, lifespan="on", timeout_graceful_shutdown=3,
                            access_log=False, timeout_keep_alive=KEEP_ALIVE_S)
    server = uvicorn.Server(config)
    if announce:
        shown = f"[{host}]" if ":" in host else host
        mcp_path = app_options.get("mcp_path", "/mcp")
        print(f"agentenv env {runtime.name!r} serving on http://{shown}:{port} "
              f"(card /.well-known/agent-env.json, mcp {mcp_path})", file=sys.stderr, flush=True)
    server.run(sockets=[sock])


def serve_stdio(env: Env) -> None:
    import anyio

    anyio.run(serve_stdio_async, env)


async def serve_stdio_async(env: Env) -> None:
    from mcp.server.lowlevel import NotificationOptions

    from agentenv_local.mcp_stdio import run_over_stdio

    server = env.mcp_server()
    options = server.create_initialization_options(NotificationOptions(tools_changed=True))
    await run_over_stdio(server, options)  # requests piped in are answered even if stdin closes at once


# --- loading an env from a file or module ---------------------------------------------------------------------

def _split_target(target: str) -> tuple[str, str | None]:
    """`path/server.py:Echo` / `pkg.mod:Echo` -> (module ref, "Echo"); a Windows drive colon is not a separator."""
    base, sep, attr = target.rpartition(":")
    if sep and attr.isidentifier() and base and not (len(base) == 1 and base.isalpha()):
        return base, attr
    return target, None


def load_module(path_or_module: str) -> Any:
    """Import a Python file (its folder goes first on sys.path, for its sibling imports) or a dotted module."""
    path = pathlib.Path(path_or_module)
    if path.suffix == ".py" or path.is_file() or os.sep in path_or_module:
        path = path.resolve()
        if not path.is_file():
            raise EnvLoadError(f"no such file: {path}")
        folder = str(path.parent)
        if folder not in sys.path:
            sys.path.insert(0, folder)
        digest = hashlib.sha1(str(path).encode()).hexdigest()[:8]
        name = f"agentenv_env_{path.stem}_{digest}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise EnvLoadError(f"cannot import {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(name, None)
            raise
        return module
    try:
        return importlib.import_module(path_or_module)
    except ModuleNotFoundError as e:
        raise EnvLoadError(f"cannot import {path_or_module!r}: {e}") from None


def load_env(target: str | type | Any) -> Env:
    """An env object from `path/to/server.py[:Name]`, `package.module[:Name]`, an Env subclass or an Env.

    Without `:Name` the module must define exactly one Env subclass (or one Env object); `Name` may name either.
    """
    from .base import Env

    if isinstance(target, Env):
        return target
    if isinstance(target, type):
        if not issubclass(target, Env):
            raise EnvLoadError(f"{target.__name__} is not a subclass of agentenv_local.env.Env")
        return target()
    module_ref, attr = _split_target(str(target))
    module = load_module(module_ref)
    if attr:
        value = getattr(module, attr, None)
        if value is None:
            raise EnvLoadError(f"{module_ref} has no {attr!r}; envs defined there: {_env_names(module) or 'none'}")
        if isinstance(value, Env):
            return value
        if isinstance(value, type) and issubclass(value, Env):
            return value()
        raise EnvLoadError(f"{module_ref}:{attr} is a {type(value).__name__}, not an Env subclass or object")
    objects = [v for v in vars(module).values() if isinstance(v, Env)]
    if len(objects) == 1:
        return objects[0]
    classes = [v for v in vars(module).values()
               if isinstance(v, type) and issubclass(v, Env) and v is not Env and v.__module__ == module.__name__]
    if len(classes) == 1:
        return classes[0]()
    if not classes and not objects:
        raise EnvLoadError(f"{module_ref} defines no Env subclass (class MyEnv(agentenv_local.env.Env): ...)")
    raise EnvLoadError(f"{module_ref} defines several envs ({_env_names(module)}); pick one with "
                       f"{module_ref}:NAME")


def _env_names(module: Any) -> str:
    from .base import Env

    names = [k for k, v in vars(module).items()
             if (isinstance(v, type) and issubclass(v, Env) and v is not Env) or isinstance(v, Env)]
    return ", ".join(sorted(names))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m agentenv_local.env",
        description="Serve an environment written with agentenv_local.env: MCP streamable HTTP at /mcp, the card, "
                    "the data plane and extensions (default), or MCP over stdio (--stdio).")
    parser.add_argument("target", help="path/to/server.py[:ClassName] or package.module[:ClassName]")
    parser.add_argument("--stdio", action="store_true", help="serve MCP over stdin/stdout instead of HTTP")
    parser.add_argument("--host", default=None, help=f"address to bind (default: $MCP_HOST or {DEFAULT_HOST})")
    parser.add_argument("--port", type=int, default=None,
                        help=f"port to bind (default: $MCP_PORT or {DEFAULT_PORT}; 0 = any free port)")
    parser.add_argument("--name", default=None, help="the card name (same as ENVIRONMENT_NAME)")
    parser.add_argument("--card", action="store_true", help="print the Environment Card as JSON and exit")
    parser.add_argument("--sse", action="store_true", help="answer MCP POSTs with SSE streams instead of JSON")
    parser.add_argument("--log-level", default="warning", help="uvicorn log level (default: warning)")
    args = parser.parse_args(argv)
    if args.name:
        os.environ["ENVIRONMENT_NAME"] = args.name
    try:
        env = load_env(args.target)
        if args.card:
            print(json.dumps(env.card().to_wire(), indent=2))
            return 0
        if args.stdio:
            serve_stdio(env)
        else:
            serve_http(env, host=args.host, port=args.port, log_level=args.log_level, json_response=not args.sse)
    except (EnvLoadError, ValueError, TypeError, OSError) as e:
        print(f"Error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


__all__ = [
    "EnvLoadError",
    "bind_socket",
    "load_env",
    "load_module",
    "main",
    "resolve_bind",
    "serve_http",
    "serve_stdio",
    "serve_stdio_async",
]
