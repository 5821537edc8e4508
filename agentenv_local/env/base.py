"""The authoring model: subclass `Env`, decorate methods, serve.

    from typing import Annotated
    from pydantic import Field
    from agentenv_local.env import Env, environment_card, tool, ToolContext

    @environment_card(name="echo", description="Says back what it's sent.")
    class Echo(Env):
        @tool()
        def echo(self, text: Annotated[str, Field(description="What to say back")]) -> str:
            "Return the text it's sent."
            return text

    if __name__ == "__main__":
        Echo().serve()

Decorators (all checked when the class is created, so mistakes fail at import, not per call):

- `@tool(name=None, *, description=None, hidden_by_default=False, annotations=None, meta=None,
  structured_output=None)`: an MCP tool. The input schema comes from the signature; the description
  defaults to the docstring; `{environment_name}` in the name resolves to the card's name.
- `@reset_data`, `@add_data` (gets the list of parts), `@get_data` (returns parts): the JSON-RPC data plane.
- `@extension(uri, *, op=None, description="", params=None, required=False, method="POST", path=None)`:
  a REST route advertised on the card.
- `@environment_card(name=..., description=..., ...)` on the class (or the class attributes
  `environment_name` / `environment_description`).

Changes: set `keeps_changelog = True` on the class and report each row a tool writes with
`ctx.record_change(table, op, key, before=..., after=...)` (see context.py).

Hooks to override: `on_tool_call(ctx)` (return None to proceed, or a refusal), `on_startup()` /
`on_shutdown()` (sync or async; run once around serving), `extension_params(uri)`,
`declared_extensions()`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from ._params import Binding, build_binding, resolved_hints
from .card import (
    CARD_CONFIG_FIELDS,
    METHOD_ADD,
    METHOD_GET,
    METHOD_RESET,
    RPC_PATH,
    EnvironmentExtension,
)

if TYPE_CHECKING:
    from .card import EnvironmentCard
    from .context import ToolContext

_TOOL_ATTR = "__agentenv_tool__"
_OP_ATTR = "__agentenv_op__"
_EXT_ATTR = "__agentenv_ext__"
_CARD_ATTR = "__agentenv_card__"
_SPEC_ATTR = "__agentenv_spec__"
ENV_NAME_TOKEN = "{environment_name}"
_HTTP_METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE"})


# --- marks the decorators leave on functions ---------------------------------------------------------------

@dataclass(frozen=True)
class ToolMark:
    name: str | None
    description: str | None
    hidden_by_default: bool
    annotations: dict | None
    meta: dict | None
    structured_output: bool | None


@dataclass(frozen=True)
class ExtensionMark:
    uri: str
    op: str | None
    description: str
    params: dict | None
    required: bool | None
    method: str
    path: str | None


def _plain_function(fn: Any, decorator: str) -> Callable:
    if isinstance(fn, (staticmethod, classmethod, property)):
        raise TypeError(f"{decorator} goes on a plain method (def name(self, ...)), not on a {type(fn).__name__}; "
                        f"put {decorator} above the method without @{type(fn).__name__}")
    if not callable(fn):
        raise TypeError(f"{decorator} decorates a method, got {type(fn).__name__}")
    return fn


def _annotations_dict(annotations: Any) -> dict | None:
    if annotations is None:
        return None
    if hasattr(annotations, "model_dump"):
        return annotations.model_dump(by_alias=True, exclude_none=True, mode="json")
    if isinstance(annotations, dict):
        return dict(annotations)
    raise TypeError(f"@tool annotations must be a dict of MCP ToolAnnotations fields (e.g. {{'readOnlyHint': True}}), "
                    f"got {type(annotations).__name__}")


def tool(name: str | None = None, *, description: str | None = None, hidden_by_default: bool = False,
         annotations: Any = None, meta: dict | None = None, structured_output: bool | None = None) -> Callable:
    """Mark a method as an MCP tool (see the module doc). Must be called: `@tool()`, not `@tool`."""
    if callable(name):
        fn_name = getattr(name, "__name__", "the method")
        raise TypeError(f"@tool must be called: write @tool() above {fn_name} (or @tool(name=...)), not bare @tool")
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise TypeError(f"@tool name must be a non-empty string, got {name!r}")
    if meta is not None and not isinstance(meta, dict):
        raise TypeError(f"@tool meta must be a dict, got {type(meta).__name__}")
    mark = ToolMark(name=name, description=description, hidden_by_default=bool(hidden_by_default),
                    annotations=_annotations_dict(annotations), meta=dict(meta) if meta else None,
                    structured_output=structured_output)

    def deco(fn: Callable) -> Callable:
        fn = _plain_function(fn, "@tool()")
        if getattr(fn, _TOOL_ATTR, None) is not None:
            raise TypeError(f"{fn.__name__} is decorated with @tool() twice")
        setattr(fn, _TOOL_ATTR, mark)
        return fn

    return deco


def _op_decorator(method: str, decorator: str) -> Callable:
    def mark(fn: Callable | None = None) -> Callable:
        def deco(f: Callable) -> Callable:
            f = _plain_function(f, decorator)
            setattr(f, _OP_ATTR, method)
            return f

        return deco if fn is None else deco(fn)

    mark.__name__ = decorator.lstrip("@")
    mark.__doc__ = f"Mark the `{method}` handler of the JSON-RPC data plane (use as {decorator} or {decorator}())."
    return mark


reset_data = _op_decorator(METHOD_RESET, "@reset_data")
add_data = _op_decorator(METHOD_ADD, "@add_data")
get_data = _op_decorator(METHOD_GET, "@get_data")


def extension_slug(uri: str) -> str:
    """`urn:agentenv:computer-display/v1` -> `computer-display`; another namespace keeps its name as a path
    (`urn:acme:faults/v2` -> `acme/faults`)."""
    name = uri.removeprefix("urn:").removeprefix("agentenv:")
    head, _, version = name.rpartition("/")
    if head and version[:1] == "v" and version[1:].isdigit():
        name = head
    return name.replace(":", "/")


def extension(uri: str, *, op: str | None = None, description: str = "", params: dict | None = None,
              required: bool | None = False, method: str = "POST", path: str | None = None) -> Callable:
    """Mark a method as the handler of a card-advertised REST extension.

    The route is `path`, else `/agentenv/ext/<method-name>`, or with `op` `/agentenv/ext/<slug>/<op>` (the slug is
    the URI without `urn:agentenv:` and its version). POST (and other verbs) bind the JSON body, GET the query
    string, to the handler's parameters, coerced to their annotated types. The return value is the JSON answer
    (None -> `{}`); an `EnvError` answers its status with `{"ok": false, "error": {...}}`.

    Card entry: `{uri, description, params: {endpoint, methods: {<name>: {method, request}}}, required}`, or with
    `op` (several handlers may share one URI, one per op) `{..., params: {methods: {<op>: {method, endpoint,
    request}}, **extension_params(uri)}}`. An explicit `params` replaces the generated advertisement (not with op).
    """
    if callable(uri):
        raise TypeError("@extension must be called with the extension URI: @extension('urn:agentenv:thing/v1')")
    if not isinstance(uri, str) or not uri.strip():
        raise TypeError(f"@extension needs a URI string, got {uri!r}")
    if op is not None and params is not None:
        raise TypeError("an extension method's extra params come from extension_params(uri), not params= (with op=)")
    http_method = str(method).upper()
    if http_method not in _HTTP_METHODS:
        raise ValueError(f"@extension method must be one of {sorted(_HTTP_METHODS)}, got {method!r}")
    if path is not None and not path.startswith("/"):
        raise ValueError(f"@extension path must start with '/', got {path!r}")
    if op is not None and (not isinstance(op, str) or not op or "/" in op):
        raise ValueError(f"@extension op must be a non-empty name without '/', got {op!r}")
    mark = ExtensionMark(uri=uri, op=op, description=description or "", params=params, required=required,
                         method=http_method, path=path)

    def deco(fn: Callable) -> Callable:
        fn = _plain_function(fn, "@extension(...)")
        setattr(fn, _EXT_ATTR, mark)
        return fn

    return deco


def environment_card(_cls: type | None = None, **config: Any) -> Callable:
    """Configure the class's Environment Card; keyword arguments are card fields (`name`, `description`, ...).

    The card's name at serve time: the `ENVIRONMENT_NAME` environment variable, else this `name`, else the
    class attribute `environment_name`, else the class name.
    """
    if _cls is not None:
        raise TypeError("@environment_card must be called: @environment_card(name=...)")
    unknown = set(config) - CARD_CONFIG_FIELDS
    if unknown:
        raise TypeError(f"unknown Environment Card field(s): {sorted(unknown)}; known: {sorted(CARD_CONFIG_FIELDS)}")
    if "name" in config and (not isinstance(config["name"], str) or not config["name"].strip()):
        raise TypeError(f"@environment_card name must be a non-empty string, got {config['name']!r}")

    def deco(cls: type) -> type:
        if not (isinstance(cls, type) and issubclass(cls, Env)):
            raise TypeError("@environment_card decorates a subclass of agentenv_local.env.Env")
        setattr(cls, _CARD_ATTR, dict(config))
        return cls

    return deco


# --- what a class declares ---------------------------------------------------------------------------------

@dataclass
class ToolDef:
    attr: str
    mark: ToolMark
    fn: Callable
    binding: Binding | None = None   # None until the annotations resolve (forward references)

    @property
    def raw_name(self) -> str:
        return self.mark.name or self.attr

    def description(self) -> str | None:
        return self.mark.description if self.mark.description is not None else inspect.getdoc(self.fn)


@dataclass
class ExtensionDef:
    attr: str
    mark: ExtensionMark
    fn: Callable
    route: str
    binding: Binding | None = None

    @property
    def op_name(self) -> str:
        return self.mark.op or self.attr


@dataclass
class EnvSpec:
    tools: list[ToolDef] = field(default_factory=list)
    operations: dict[str, str] = field(default_factory=dict)      # JSON-RPC method -> attribute
    extensions: list[ExtensionDef] = field(default_factory=list)
    has_hook: bool = False


def _bind_or_defer(fn: Callable, model_name: str) -> Binding | None:
    try:
        hints = resolved_hints(fn)
    except NameError:
        return None   # a forward reference: resolved when the env is first served
    return build_binding(fn, model_name=model_name, hints=hints)


def ensure_binding(defn: ToolDef | ExtensionDef, model_name: str) -> Binding:
    if defn.binding is None:
        try:
            defn.binding = build_binding(defn.fn, model_name=model_name)
        except NameError as e:
            raise TypeError(f"{defn.fn.__qualname__}: cannot resolve its annotations ({e}); define or import the "
                            "types it names at module level") from e
    return defn.binding


def _collect(cls: type) -> EnvSpec:
    members: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        if klass is object:
            continue
        for attr, value in vars(klass).items():
            members[attr] = value
    spec = EnvSpec()
    tool_names: dict[str, str] = {}
    op_attrs: dict[str, str] = {}
    routes: dict[tuple[str, str], str] = {}
    ext_kinds: dict[str, str] = {}
    ext_ops: dict[tuple[str, str], str] = {}
    for attr, value in members.items():
        if attr.startswith("__") or not callable(value):
            continue
        tmark = getattr(value, _TOOL_ATTR, None)
        omark = getattr(value, _OP_ATTR, None)
        emark = getattr(value, _EXT_ATTR, None)
        if sum(m is not None for m in (tmark, omark, emark)) > 1:
            raise TypeError(f"{cls.__name__}.{attr} carries more than one of @tool, @reset_data/@add_data/@get_data "
                            "and @extension; one method serves one purpose")
        if isinstance(tmark, ToolMark):
            defn = ToolDef(attr=attr, mark=tmark, fn=value)
            name = defn.raw_name
            leftover = name.replace(ENV_NAME_TOKEN, "")
            if "{" in leftover or "}" in leftover:
                raise ValueError(f"{cls.__name__}.{attr}: tool name {name!r} has an unknown placeholder; "
                                 f"the only one supported is {ENV_NAME_TOKEN!r}")
            if name in tool_names:
                raise ValueError(f"{cls.__name__}: two tools are named {name!r} (methods {tool_names[name]!r} and "
                                 f"{attr!r}); rename one with @tool(name=...)")
            tool_names[name] = attr
            defn.binding = _bind_or_defer(value, f"{attr}Arguments")
            spec.tools.append(defn)
        elif isinstance(omark, str):
            if omark in op_attrs:
                raise ValueError(f"{cls.__name__}: two methods handle {omark} ({op_attrs[omark]!r} and {attr!r}); "
                                 "keep one")
            op_attrs[omark] = attr
            _check_op_signature(cls, attr, value, omark)
        elif isinstance(emark, ExtensionMark):
            if emark.op is None:
                route = emark.path or f"{RPC_PATH}/ext/{attr}"
            else:
                route = emark.path or f"{RPC_PATH}/ext/{extension_slug(emark.uri)}/{emark.op}"
            kind = "op" if emark.op is not None else "single"
            if ext_kinds.setdefault(emark.uri, kind) != kind or (kind == "single" and emark.uri in
                                                                  {e.mark.uri for e in spec.extensions}):
                raise ValueError(f"{cls.__name__}: several handlers for extension {emark.uri!r}; give each its own "
                                 "op= to serve several methods under one URI")
            if emark.op is not None:
                key = (emark.uri, emark.op)
                if key in ext_ops:
                    raise ValueError(f"{cls.__name__}: two handlers for op {emark.op!r} of {emark.uri!r} "
                                     f"({ext_ops[key]!r} and {attr!r})")
                ext_ops[key] = attr
            if (route, emark.method) in routes:
                raise ValueError(f"{cls.__name__}: {emark.method} {route} is served by both "
                                 f"{routes[(route, emark.method)]!r} and {attr!r}; give one another path=")
            routes[(route, emark.method)] = attr
            spec.extensions.append(ExtensionDef(attr=attr, mark=emark, fn=value, route=route,
                                                binding=_bind_or_defer(value, f"{attr}Params")))
    # data-plane methods in protocol order
    spec.operations = {m: op_attrs[m] for m in (METHOD_RESET, METHOD_ADD, METHOD_GET) if m in op_attrs}
    hook = members.get("on_tool_call")
    spec.has_hook = hook is not None and hook is not Env.__dict__.get("on_tool_call")
    if spec.has_hook:
        assert hook is not None  # has_hook
        try:
            inspect.signature(hook).bind(None, None)
        except TypeError as e:
            raise TypeError(f"{cls.__name__}.on_tool_call must take (self, ctx): the ToolContext as its only "
                            "argument") from e
    return spec


def _check_op_signature(cls: type, attr: str, fn: Callable, method: str) -> None:
    sig = inspect.signature(fn)
    try:
        if method == METHOD_ADD:
            sig.bind(None, [])
        else:
            sig.bind(None)
    except TypeError as e:
        want = "(self, parts)" if method == METHOD_ADD else "(self)"
        raise TypeError(f"{cls.__name__}.{attr} handles {method} and must take {want}") from e


# --- the base class ----------------------------------------------------------------------------------------

class Env:
    """Base class of an environment: decorate methods with @tool(), @reset_data/@add_data/@get_data and
    @extension(...); serve with `serve()` (HTTP), `serve_stdio()`, or in-process through `mcp_server()`.

    Public methods are few on purpose (a tool may be named anything else): `card()`, `list_tools()`,
    `call_tool()`, `data_rpc()`, `mcp_server()`, `client()`, `app()`, `serve()`, `serve_stdio()`,
    `update_tool()`, and the hooks below.
    """

    #: The card's name and description when the class has no @environment_card.
    environment_name: ClassVar[str | None] = None
    environment_description: ClassVar[str | None] = None
    #: Run synchronous tools / handlers on a worker thread instead of inline on the event loop (the default,
    #: like the reference's servers: calls then never overlap, and an env's SQLite connection stays on one thread).
    sync_handlers_in_thread: ClassVar[bool] = False
    #: The env reports the rows its tool calls change (`ctx.record_change(...)`): its card then advertises
    #: `urn:agentenv:changes/v1`, and a gateway in front of it keeps a changelog (`GET /changes`).
    keeps_changelog: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        setattr(cls, _SPEC_ATTR, _collect(cls))

    # hooks ------------------------------------------------------------------------------------------------

    def on_tool_call(self, ctx: ToolContext) -> Any:
        """Runs before every call of one of this env's tools, under the bound context.

        Return None to let the call proceed; anything else answers the call without running the tool: an mcp
        `CallToolResult` (or its wire dict) as is, an `EnvError` (returned or raised) as an error result, a string
        as an error result with that text. May be async.
        """
        return None

    def on_startup(self) -> Any:
        """Runs once before the env serves (HTTP, stdio or the first in-process client). May be async."""
        return None

    def on_shutdown(self) -> Any:
        """Runs once after the env stops serving. May be async."""
        return None

    def extension_params(self, uri: str) -> dict:
        """Extension-level params advertised beside `methods` of an extension served with `op=`."""
        return {}

    def declared_extensions(self) -> list[EnvironmentExtension | dict]:
        """Declaration-only extensions to advertise on the card (a promise with params and no route)."""
        return []

    # the served form ----------------------------------------------------------------------------------------

    def _ae_runtime(self) -> Any:
        rt = self.__dict__.get("_ae_rt")
        if rt is None:
            from .runtime import Runtime

            rt = Runtime(self)
            self.__dict__["_ae_rt"] = rt
        return rt

    def card(self) -> EnvironmentCard:
        """The Environment Card this env serves."""
        return self._ae_runtime().card()

    def list_tools(self) -> list[dict]:
        """The `tools/list` entries in wire form (`name`, `description`, `inputSchema`, `annotations`, `_meta`)."""
        return self._ae_runtime().tool_list()

    async def call_tool(self, name: str, arguments: dict | None = None, *, role: str | None = None,
                        session: str | None = None, virtual_time: Any = None, meta: dict | None = None,
                        headers: Any = None) -> dict:
        """Call a tool in-process (no MCP framing) and return the `tools/call` result in wire form.

        `role`/`session`/`virtual_time` are stamped into `_meta` the way a gateway does.
        """
        return await self._ae_runtime().call_tool_as(name, arguments, role=role, session=session,
                                                     virtual_time=virtual_time, meta=meta, headers=headers)

    async def data_rpc(self, request: dict | bytes | str) -> dict:
        """Answer one JSON-RPC data-plane request (`data/reset`, `data/add`, `data/get`) in-process."""
        return await self._ae_runtime().data_rpc(request)

    async def update_tool(self, name: str, *, description: str) -> None:
        """Change a served tool's description, on the card and in `tools/list` alike."""
        self._ae_runtime().update_tool(name, description=description)

    def mcp_server(self) -> Any:
        """The mcp 2.x low-level `mcp.server.lowlevel.Server` serving this env's tools (one per env object).

        `mcp.Client(env.mcp_server())` talks to it in-process; `server.run(read, write, init_options)` serves it
        over any stream pair.
        """
        return self._ae_runtime().mcp_server()

    def client(self, *, mode: str = "auto", **kwargs: Any) -> Any:
        """An (un-entered) mcp `Client` connected to this env in-process: `async with env.client() as c: ...`."""
        from mcp import Client

        return Client(self.mcp_server(), mode=mode, **kwargs)

    def app(self, *, mcp_path: str = "/mcp", json_response: bool = True, stateless: bool = False) -> Any:
        """A Starlette ASGI app: the card, `/ready`, the data plane, the extensions and MCP streamable HTTP."""
        from .app import build_app

        return build_app(self._ae_runtime(), mcp_path=mcp_path, json_response=json_response, stateless=stateless)

    def serve(self, host: str | None = None, port: int | None = None, *, log_level: str = "warning",
              **app_options: Any) -> None:
        """Serve over HTTP with uvicorn on `host`/`port` (else `MCP_HOST` / `MCP_PORT`, default 127.0.0.1:18765)."""
        from .serve import serve_http

        serve_http(self, host=host, port=port, log_level=log_level, **app_options)

    def serve_stdio(self) -> None:
        """Serve MCP over stdin/stdout (for editors and the gateway's stdio children)."""
        from .serve import serve_stdio

        serve_stdio(self)


setattr(Env, _SPEC_ATTR, EnvSpec())
