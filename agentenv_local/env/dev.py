"""`agentenv env dev PATH[:Class]`: serve an env from source and reload it on every save.

One stable front (the HTTP app on a fixed port, or stdio) whose handlers delegate to the *current* env
instance. A watcher (watchfiles) on the env's folder reloads on every save:

1. the env file is imported afresh under a new module name (sibling modules from the same folder that were
   imported from it are dropped from `sys.modules` first, so they are re-imported too);
2. the new Env is built and its `on_startup` hooks run;
3. it is swapped in (one assignment: every request after that sees the new instance), MCP sessions still
   connected get `notifications/tools/list_changed` if the tool list changed, and the old instance's
   `on_shutdown` runs once the calls still in flight on it have finished.

If anything in 1-2 fails (a syntax error, an import error, an exception in the class body, a decorator error,
a failing `on_startup`), the error is printed (file, line, message) and the last good version keeps serving.

How the notification reaches clients with mcp 2.x:
- handshake-era sessions (protocol revisions up to 2025-11-25; stateful `Mcp-Session-Id` over HTTP, or a
  stdio connection): the front remembers each connection (`Connection` objects, weakly) when it sees
  `notifications/initialized`, `tools/list` or `tools/call` from it, and calls
  `connection.send_tool_list_changed()` on reload. It rides the connection's standalone channel (the GET SSE
  stream over HTTP, the pipe over stdio); a client receives it in its `message_handler`.
- the 2026 revision: change notifications only travel on `subscriptions/listen` streams; the front serves
  `subscriptions/listen` with mcp's `ListenHandler` over an in-memory bus and publishes `ToolsListChanged()`.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import itertools
import os
import pathlib
import sys
import time
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .serve import EnvLoadError, _split_target, bind_socket, resolve_bind

if TYPE_CHECKING:
    from .runtime import Runtime

# Changes to these files trigger a reload: Python sources and the data files an env reads next to itself.
# Anything else (the state an env writes, logs, editors' temporary files) is ignored, so an env that writes
# into its own folder does not reload itself in a loop.
WATCHED_SUFFIXES = (".py", ".json", ".jsonl", ".yaml", ".yml", ".toml", ".csv", ".tsv", ".sql", ".ini", ".cfg")
_IGNORED_DIRS = {"__pycache__", ".git", ".venv", "venv", "node_modules", ".mypy_cache", ".pytest_cache",
                 ".ruff_cache", ".idea", ".vscode"}
_counter = itertools.count(1)


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def watched(path: str) -> bool:
    """Whether a change to `path` should trigger a reload."""
    p = pathlib.PurePath(path)
    if any(part in _IGNORED_DIRS for part in p.parts):
        return False
    name = p.name
    if name.startswith((".", "#")):
        return False
    return name.endswith(WATCHED_SUFFIXES)


def format_load_error(exc: BaseException, folder: pathlib.Path) -> str:
    """A short, readable account of why loading failed: file, line, message and the user's frames."""
    if isinstance(exc, SyntaxError):
        lines = [f"{exc.filename}, line {exc.lineno}: {type(exc).__name__}: {exc.msg}"]
        if exc.text:
            lines.append("    " + exc.text.rstrip("\n").strip())
            if exc.offset:
                indent = len(exc.text) - len(exc.text.lstrip())
                lines.append("    " + " " * max(0, exc.offset - 1 - indent) + "^")
        return "\n".join(lines)
    frames = traceback.extract_tb(exc.__traceback__)
    own = [f for f in frames if _inside(f.filename, folder)]
    shown = (own or frames)[-3:]
    message = f"{type(exc).__name__}: {exc}"
    if not shown:
        return message
    last = shown[-1]
    lines = [f"{last.filename}, line {last.lineno}: {message}"]
    for frame in shown:
        lines.append(f"  File \"{frame.filename}\", line {frame.lineno}, in {frame.name}")
        if frame.line:
            lines.append(f"    {frame.line.strip()}")
    if own and frames and frames[-1] is not own[-1]:
        tail = frames[-1]
        lines.append(f"  File \"{tail.filename}\", line {tail.lineno}, in {tail.name}")
        if tail.line:
            lines.append(f"    {tail.line.strip()}")
    lines.append(f"  {message}")
    return "\n".join(lines)


def _inside(filename: str | None, folder: pathlib.Path) -> bool:
    if not filename:
        return False
    try:
        return pathlib.Path(filename).resolve().is_relative_to(folder)
    except (OSError, ValueError):
        return False


class DevServer:
    """The stable front and the reload machinery for one env file."""

    def __init__(self, target: str, *, mcp_path: str = "/mcp", debounce_ms: int = 300) -> None:
        ref, attr = _split_target(str(target))
        path = pathlib.Path(ref)
        if path.suffix != ".py" and not path.is_file():
            raise EnvLoadError(f"`agentenv env dev` serves a Python file (path/to/server.py[:Class]), got {ref!r}")
        self.path = path.resolve()
        if not self.path.is_file():
            raise EnvLoadError(f"no such file: {self.path}")
        self.attr = attr
        self.folder = self.path.parent
        self.mcp_path = mcp_path
        self.debounce_ms = debounce_ms
        self.current: Runtime | None = None
        self.generation = 0
        self.reloads = 0
        self._digest = hashlib.sha1(str(self.path).encode()).hexdigest()[:8]
        self._module_names: list[str] = []
        self._inflight: dict[int, int] = {}
        self._notifier: Any = None  # _notify.ToolsChangedNotifier, made with the MCP front
        self._server: Any = None
        self._started = False
        self._baseline = set(sys.modules)  # modules the host had before the env: never purged

    # --- loading ------------------------------------------------------------------------------------------

    def _folder_modules(self) -> dict[str, Any]:
        """Modules imported from the env's folder since the dev server started (siblings, old generations)."""
        found = {}
        for name, module in list(sys.modules.items()):
            if name in self._baseline or name.split(".")[0] == "agentenv_local":
                continue
            filename = getattr(module, "__file__", None)
            if filename and "site-packages" not in filename and _inside(filename, self.folder):
                found[name] = module
        return found

    def load(self) -> Runtime:
        """Import the env file afresh and build its runtime (no startup hooks yet). Raises on any failure."""
        from .base import Env

        folder = str(self.folder)
        if folder not in sys.path:
            sys.path.insert(0, folder)
        importlib.invalidate_caches()
        previous = self._folder_modules()
        for stale in previous:  # so the env's own imports from its folder load their new source too
            del sys.modules[stale]
        name = f"agentenv_dev_{self.path.stem}_{self._digest}_{next(_counter)}"
        spec = importlib.util.spec_from_file_location(name, self.path)
        if spec is None or spec.loader is None:
            raise EnvLoadError(f"cannot import {self.path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
            env = self._pick(module, Env)
            runtime = env._ae_runtime()
        except BaseException:
            # put the serving version's modules back: the half-imported new ones must not shadow them
            for partial in self._folder_modules():
                sys.modules.pop(partial, None)
            sys.modules.update(previous)
            raise
        return runtime

    def _pick(self, module: Any, env_base: type) -> Any:
        where = str(self.path)
        if self.attr:
            value = getattr(module, self.attr, None)
            if isinstance(value, env_base):
                return value
            if isinstance(value, type) and issubclass(value, env_base):
                return value()
            if value is None:
                raise EnvLoadError(f"{where} has no {self.attr!r}")
            raise EnvLoadError(f"{where}:{self.attr} is a {type(value).__name__}, not an Env subclass or object")
        objects = [v for v in vars(module).values() if isinstance(v, env_base)]
        if len(objects) == 1:
            return objects[0]
        classes = [v for v in vars(module).values() if isinstance(v, type) and issubclass(v, env_base)
                   and v is not env_base and v.__module__ == module.__name__]
        if len(classes) == 1:
            return classes[0]()
        if not classes and not objects:
            raise EnvLoadError(f"{where} defines no Env subclass (class MyEnv(agentenv_local.env.Env): ...)")
        names = sorted(getattr(c, "__name__", "?") for c in classes)
        raise EnvLoadError(f"{where} defines several envs ({', '.join(names)}); pick one with {where}:NAME")

    def first_load(self) -> None:
        """The first load: a failure raises EnvLoadError with the formatted error (nothing to keep serving)."""
        try:
            self.current = self.load()
        except EnvLoadError:
            raise
        except (Exception, SystemExit) as e:  # whatever the user's module raises is reported
            raise EnvLoadError(f"{self.path} does not load:\n{format_load_error(e, self.folder)}") from None

    @property
    def name(self) -> str:
        return self.current.name if self.current is not None else self.path.stem

    # --- lifecycle ----------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Run the first loaded runtime's startup hooks (`load()` must have succeeded first)."""
        if self.current is None:
            self.current = self.load()
        await self.current.startup()
        self._started = True

    async def stop(self) -> None:
        runtime, self.current = self.current, None
        if runtime is not None and self._started:
            self._started = False
            await self._drain(runtime)
            with contextlib.suppress(Exception):
                await runtime.shutdown()

    async def reload(self, changes: Any = ()) -> bool:
        """Load the env afresh and swap it in; on failure print the error and keep the current one."""
        started = time.monotonic()
        try:
            new = self.load()
        except (Exception, SystemExit) as e:  # whatever the user's module raises at import
            self._report_failure(e)
            return False
        try:
            await new.startup()
        except Exception as e:  # the user's hook: reported, the old version keeps serving
            self._report_failure(e, what="on_startup failed")
            return False
        old = self.current
        before = {t["name"] for t in old.tool_list()} if old is not None else set()
        old_list = old.tool_list() if old is not None else []
        self.current = new
        self.generation += 1
        self.reloads += 1
        self._refresh_server_identity()
        after = {t["name"] for t in new.tool_list()}
        added, removed = sorted(after - before), sorted(before - after)
        detail = ""
        if added or removed:
            detail = " [" + " ".join([f"+{n}" for n in added] + [f"-{n}" for n in removed]) + "]"
        ms = (time.monotonic() - started) * 1000
        _log(f"reloaded {new.name}: {len(after)} tools (+{len(added)} -{len(removed)}){detail} in {ms:.0f} ms")
        if new.tool_list() != old_list:
            await self.notify_tools_changed()
        if old is not None:
            await self._drain(old)
            try:
                await old.shutdown()
            except Exception as e:  # the user's hook: reported, the reload stands
                _log(f"warning: the previous {old.name} instance's on_shutdown failed: {type(e).__name__}: {e}")
        return True

    def _report_failure(self, exc: BaseException, *, what: str = "reload failed") -> None:
        keeping = ("keeping the last good version serving" if self.current is not None
                   else "nothing is serving yet")
        text = format_load_error(exc, self.folder)
        _log(f"{what}: {self.name}: {text}\n  ({keeping}; fix the file and save again)")

    async def _drain(self, runtime: Runtime, timeout: float = 30.0) -> None:
        import anyio

        deadline = time.monotonic() + timeout
        while self._inflight.get(id(runtime), 0) > 0 and time.monotonic() < deadline:
            await anyio.sleep(0.02)

    @contextlib.contextmanager
    def _using(self, runtime: Runtime):
        key = id(runtime)
        self._inflight[key] = self._inflight.get(key, 0) + 1
        try:
            yield runtime
        finally:
            left = self._inflight[key] - 1
            if left:
                self._inflight[key] = left
            else:
                del self._inflight[key]

    def _runtime(self) -> Runtime:
        if self.current is None:
            raise RuntimeError("the env is not loaded")
        return self.current

    # --- MCP front ----------------------------------------------------------------------------------------

    def _remember(self, ctx: Any) -> None:
        if self._notifier is not None:
            self._notifier.remember(ctx)

    async def notify_tools_changed(self) -> None:
        if self._notifier is not None:  # no MCP front yet: nobody to tell
            await self._notifier.notify()

    def _refresh_server_identity(self) -> None:
        if self._server is not None and self.current is not None:
            self._server.name = self.current.name
            self._server.instructions = self.current.description

    def mcp_server(self) -> Any:
        """The front's low-level MCP server: every handler reads the current runtime."""
        if self._server is not None:
            return self._server
        from agentenv_local import __version__

        from ._notify import ToolsChangedNotifier

        dev = self
        self._notifier = notifier = ToolsChangedNotifier()

        async def on_list_tools(ctx: Any, params: Any) -> dict:
            dev._remember(ctx)
            return {"tools": dev._runtime().tool_list(), "resultType": "complete", "ttlMs": 0,
                    "cacheScope": "private"}

        async def on_call_tool(ctx: Any, params: Any) -> dict:
            dev._remember(ctx)
            request = getattr(ctx, "request", None)
            headers = getattr(request, "headers", None) if request is not None else None
            with dev._using(dev._runtime()) as runtime:
                result = await runtime.call_tool(params.name, params.arguments or {}, meta=params.meta or {},
                                                 headers=headers, transport="mcp")
            result["resultType"] = "complete"
            return result

        def input_schema(name: str) -> dict | None:
            return dev.current.input_schema(name) if dev.current is not None else None

        current = self._runtime()
        server = notifier.server_class()(current.name, version=__version__, instructions=current.description,
                                         get_tool_input_schema=input_schema, on_list_tools=on_list_tools,
                                         on_call_tool=on_call_tool,
                                         on_subscriptions_listen=notifier.listen_handler())
        notifier.install(server)  # remembers sessions on notifications/initialized
        self._server = server
        return server

    # --- HTTP front ---------------------------------------------------------------------------------------

    def app(self, *, json_response: bool = True, session_idle_timeout: float | None = 30 * 60,
            admin_token: str | None = None, own_hosts: Any = ()) -> Any:
        from mcp.server.streamable_http_manager import (
            StreamableHTTPASGIApp,
            StreamableHTTPSessionManager,
        )
        from mcp.server.transport_security import TransportSecuritySettings
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.routing import Route

        from .app import _extension_response, _json, data_plane_refusal, guarded
        from .card import RPC_PATH, WELL_KNOWN_PATH

        dev = self
        state = {"ready": False}
        manager = StreamableHTTPSessionManager(
            app=self.mcp_server(), json_response=json_response, stateless=False,
            security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            session_idle_timeout=session_idle_timeout)

        async def card(request: Request) -> Any:
            return _json(dev._runtime().card(dev.mcp_path).to_wire())

        async def ready(request: Request) -> Any:
            if state["ready"] and dev.current is not None:
                return _json({"ok": True, "generation": dev.generation})
            return _json({"ok": False, "error": "not serving yet"}, 503)

        async def rpc(request: Request) -> Any:
            refused = data_plane_refusal(admin_token, request.headers)
            if refused is not None:
                return refused
            body = await request.body()
            with dev._using(dev._runtime()) as runtime:
                return _json(await runtime.data_rpc(body))

        async def extension(request: Request) -> Any:
            route, method = request.url.path, request.method
            with dev._using(dev._runtime()) as runtime:
                served = next((e for e in runtime.extensions if e.route == route and e.method == method), None)
                if served is None:
                    known = any(e.route == route for e in runtime.extensions)
                    return _json({"error": f"{method} {route} is not served by {runtime.name}"}, 405 if known else 404)
                return await _extension_response(runtime, served, request)

        routes = [
            Route(WELL_KNOWN_PATH, card, methods=["GET"]),
            Route("/ready", ready, methods=["GET"]),
            Route(RPC_PATH, rpc, methods=["POST"]),
            Route(self.mcp_path, StreamableHTTPASGIApp(manager)),
            # extensions come and go with reloads: one catch-all looks the route up on the current instance
            Route("/{path:path}", extension, methods=["GET", "POST", "PUT", "PATCH", "DELETE"]),
        ]

        @contextlib.asynccontextmanager
        async def lifespan(app: Any):
            import anyio

            await self.start()
            try:
                async with manager.run(), anyio.create_task_group() as tg:
                    tg.start_soon(self.watch)
                    state["ready"] = True
                    try:
                        yield
                    finally:
                        state["ready"] = False
                        tg.cancel_scope.cancel()
            finally:
                await self.stop()

        return guarded(Starlette(routes=routes, lifespan=lifespan), own_hosts)

    # --- watching -----------------------------------------------------------------------------------------

    async def watch(self, stop_event: Any = None) -> None:
        """Reload on every (debounced) batch of changes under the env's folder, until cancelled."""
        import watchfiles

        def keep(change: Any, path: str) -> bool:
            return watched(path)

        async for changes in watchfiles.awatch(self.folder, watch_filter=keep, debounce=self.debounce_ms,
                                               step=50, stop_event=stop_event, recursive=True):
            shown = sorted({os.path.relpath(p, self.folder) for _c, p in changes})
            _log(f"change detected: {', '.join(shown[:5])}{' ...' if len(shown) > 5 else ''}; reloading")
            await self.reload(changes)


def serve_dev_http(target: str, host: str | None = None, port: int | None = None, *,
                   log_level: str = "warning", json_response: bool = True,
                   announce: Callable[[str], None] | None = None) -> None:
    import uvicorn

    dev = DevServer(target)
    host, port = resolve_bind(host, port)
    dev.first_load()  # fails fast (with the error) if the first version does not load
    sock = bind_socket(host, port)
    port = sock.getsockname()[1]
    from .app import admin_token_from_environ

    app = dev.app(json_response=json_response, admin_token=admin_token_from_environ(), own_hosts=[host])
    config = uvicorn.Config(app, log_level=log_level, lifespan="on", timeout_graceful_shutdown=3, access_log=False)
    server = uvicorn.Server(config)
    shown = f"[{host}]" if ":" in host else host
    line = (f"serving {dev.name} on http://{shown}:{port}  (mcp {dev.mcp_path}; watching {dev.folder}; "
            "Ctrl-C to stop)")
    (announce or _log)(line)
    server.run(sockets=[sock])


def serve_dev_stdio(target: str) -> None:
    import anyio

    dev = DevServer(target)
    dev.first_load()
    anyio.run(_serve_dev_stdio, dev)


async def _serve_dev_stdio(dev: DevServer) -> None:
    import anyio
    from mcp.server.stdio import stdio_server

    server = dev.mcp_server()
    options = server.create_initialization_options()
    _log(f"serving {dev.name} over stdio  (watching {dev.folder}; Ctrl-C to stop)")
    await dev.start()
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(dev.watch)
            async with stdio_server() as (read_stream, write_stream):
                await server.run(read_stream, write_stream, options)
            tg.cancel_scope.cancel()
    finally:
        await dev.stop()


__all__ = ["DevServer", "format_load_error", "serve_dev_http", "serve_dev_stdio", "watched"]
