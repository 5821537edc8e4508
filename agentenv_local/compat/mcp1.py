"""An mcp 1.x client surface over the mcp 2.x we ship, for scripts written against the reference (mcp 1.x).

The reference's verifier and code scripts open a session the 1.x way::

    async with streamable_http_client(url) as (read, write, _):      # 1.x yields three values, 2.x two
        async with ClientSession(read, write) as session:
            result = await session.call_tool("echo", {"text": "hi"})
    result.isError, result.structuredContent                         # 1.x field names; 2.x: is_error, ...

Most of 1.x still works under 2.x unchanged (`ClientSession(read, write)`, `initialize()`, `call_tool`,
`list_tools`, `sse_client`, `stdio_client`, constructing `types.TextContent(type="text", text=...)`, which 2.x
accepts by alias). What breaks is the three-value transport and the camelCase attribute names. So:

- `uses_mcp1(source)` tells a 1.x script by a spelling only 1.x has (a three-name target for
  `streamable_http_client`, the old name `streamablehttp_client`, or a 1.x camelCase result attribute such as
  `.isError`); a script written for 2.x (`mcp.Client`) is left exactly as it is.
- `prepare_module(module)` gives such a script's module its own `__import__` (through its `__builtins__`), which
  answers `mcp.client.streamable_http` (and `mcp`, `mcp.client` on the way to it) with a facade yielding the three
  values. Why a per-module `__import__` rather than a meta-path finder or `sys.modules` aliases: mcp 2.x itself
  and our runner keep importing the real modules in the same process, so only the script's own import
  statements see the facade. `watch_folder(folder)` does the same for a helper module beside the script (a
  multi-file artifact) that is itself written for 1.x: a meta-path finder that only wraps the loading of modules
  whose file lies in that folder, so nothing else the process imports is touched.
- It also adds read-only camelCase properties (`isError`, `structuredContent`, `inputSchema`, `nextCursor`, ...)
  to mcp 2.x's result models. That is a change to classes, but it is made only in the script's own subprocess
  (the runner calls this before loading a 1.x script) and only adds names 2.x does not use, so 2.x's own code is
  untouched by it. `model_dump()` still gives 2.x's snake_case keys (pass `by_alias=True` for camelCase).
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import os
import sys
import types as pytypes
from collections.abc import AsyncIterator, Callable, Sequence
from importlib.abc import Loader, MetaPathFinder
from importlib.machinery import ModuleSpec, PathFinder
from typing import Any

# camelCase attributes of mcp 1.x's results that 2.x renamed: reading one marks a script as written for 1.x.
MCP1_ATTRIBUTES = frozenset({
    "isError", "structuredContent", "inputSchema", "outputSchema", "nextCursor", "mimeType", "serverInfo",
    "protocolVersion", "resourceTemplates", "uriTemplate", "stopReason", "readOnlyHint", "destructiveHint",
    "idempotentHint", "openWorldHint", "listChanged",
})
_TRANSPORT = "mcp.client.streamable_http"


def uses_mcp1(source: str) -> bool:
    """Whether a script's source is written for mcp 1.x (see the module docstring); False if it does not parse
    (the runner then reports its syntax error as for any script)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in MCP1_ATTRIBUTES:
            return True
        if isinstance(node, ast.Name) and node.id == "streamablehttp_client":
            return True
        if isinstance(node, ast.ImportFrom) and any(a.name == "streamablehttp_client" for a in node.names):
            return True
        if isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                target = item.optional_vars
                if isinstance(target, ast.Tuple) and len(target.elts) == 3 and _calls_transport(item.context_expr):
                    return True
    return False


def _calls_transport(expr: ast.expr) -> bool:
    if not isinstance(expr, ast.Call):
        return False
    func = expr.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return name in ("streamable_http_client", "streamablehttp_client")


@contextlib.asynccontextmanager
async def streamable_http_client(url: str, headers: dict[str, str] | None = None, timeout: float = 30,
                                 sse_read_timeout: float = 300, terminate_on_close: bool = True,
                                 httpx_client_factory: Callable[..., Any] | None = None, auth: Any = None,
                                 http_client: Any = None) -> AsyncIterator[tuple[Any, Any, Callable[[], None]]]:
    """mcp 1.x's `streamable_http_client`: yields (read, write, get_session_id) over 2.x's two-value transport.
    `get_session_id` answers None: 2.x keeps the session id inside its transport."""
    import httpx2
    from mcp.client import streamable_http as real

    async with contextlib.AsyncExitStack() as stack:
        if http_client is None and (headers or auth or httpx_client_factory or timeout != 30
                                    or sse_read_timeout != 300):
            limits = httpx2.Timeout(timeout, read=sse_read_timeout)
            if httpx_client_factory is not None:
                http_client = httpx_client_factory(headers=headers, timeout=limits, auth=auth)
            else:
                http_client = httpx2.AsyncClient(headers=headers, timeout=limits, auth=auth)
            await stack.enter_async_context(http_client)
        read, write = await stack.enter_async_context(
            real.streamable_http_client(url, http_client=http_client, terminate_on_close=terminate_on_close))
        yield read, write, lambda: None


def _facades() -> dict[str, pytypes.ModuleType]:
    """The modules a 1.x script's `import` statements get instead of the real ones, by dotted name."""
    import mcp
    import mcp.client
    from mcp.client import streamable_http as real_transport

    def copy(real: pytypes.ModuleType, **overrides: Any) -> pytypes.ModuleType:
        facade = pytypes.ModuleType(real.__name__, real.__doc__)
        facade.__dict__.update({k: v for k, v in vars(real).items() if k not in ("__spec__", "__loader__")})
        facade.__dict__.update(overrides)
        # a submodule the script imports later (`import mcp.client.sse`) is found on the real package
        facade.__dict__["__getattr__"] = lambda attr: getattr(real, attr)
        return facade

    transport = copy(real_transport, streamable_http_client=streamable_http_client,
                     streamablehttp_client=streamable_http_client)
    client = copy(mcp.client, streamable_http=transport)
    return {"mcp": copy(mcp, client=client), "mcp.client": client, _TRANSPORT: transport}


def add_camel_case_properties() -> None:
    """Give each mcp 2.x model a read-only property for each camelCase alias 1.x spelled its field with."""
    import mcp.types as mcp_types
    from pydantic import BaseModel

    for value in list(vars(mcp_types).values()):
        if not (isinstance(value, type) and issubclass(value, BaseModel)):
            continue
        for name, field in value.model_fields.items():
            alias = field.alias
            if alias and alias != name and alias.isidentifier() and alias not in vars(value):
                setattr(value, alias, _read_as(name))


def prepare_module(module: pytypes.ModuleType) -> None:
    """Make `module` (a script not yet executed) see the mcp 1.x facade in its own import statements."""
    add_camel_case_properties()
    facades = _facades()
    real_import = builtins.__import__

    def scoped_import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
        found = real_import(name, globals, locals, fromlist, level)  # the real module loads (or fails) as always
        if level != 0 or not (name == "mcp" or name.startswith("mcp.")):
            return found
        return facades.get(name, found) if fromlist else facades["mcp"]

    module.__dict__["__builtins__"] = {**vars(builtins), "__import__": scoped_import}


def _read_as(name: str) -> property:
    """A read-only property answering attribute `name` (the 2.x field a 1.x camelCase alias stands for)."""

    def read(self: Any) -> Any:
        return getattr(self, name)

    return property(read)


class _FolderFinder(MetaPathFinder):
    """Finds what the path finder finds; for a module whose file lies in `folder` and is written for mcp 1.x, wraps
    its loader so the module is prepared (`prepare_module`) before it runs."""

    def __init__(self, folder: str) -> None:
        self.folder = os.path.realpath(folder) + os.sep

    def find_spec(self, fullname: str, path: Sequence[str] | None = None, target: Any = None) -> ModuleSpec | None:
        spec = PathFinder.find_spec(fullname, path, target)
        origin = spec.origin if spec is not None else None
        if spec is None or spec.loader is None or not origin or not origin.endswith(".py"):
            return None
        if not os.path.realpath(origin).startswith(self.folder):
            return None
        try:
            with open(origin, encoding="utf-8", errors="replace") as f:
                if not uses_mcp1(f.read()):
                    return None
        except OSError:
            return None
        spec.loader = _PreparingLoader(spec.loader)
        return spec


class _PreparingLoader(Loader):
    def __init__(self, inner: Loader) -> None:
        self.inner = inner

    def create_module(self, spec: ModuleSpec) -> pytypes.ModuleType | None:
        return self.inner.create_module(spec)

    def exec_module(self, module: pytypes.ModuleType) -> None:
        prepare_module(module)
        self.inner.exec_module(module)


def watch_folder(folder: str) -> None:
    """Prepare each module written for mcp 1.x that is later imported from `folder` (a script's own folder)."""
    sys.meta_path.insert(0, _FolderFinder(folder))
