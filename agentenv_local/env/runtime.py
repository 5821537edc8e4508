"""An env as served: its resolved name and card, its tools, data plane and extensions, and one dispatch path
that every transport (MCP over HTTP or stdio, in-process calls, the gateway) goes through."""

from __future__ import annotations

import contextlib
import contextvars
import datetime as _dt
import inspect
import logging
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._params import ArgumentsError, Binding
from ._results import (
    call_result_wire,
    error_result,
    failure_result,
    is_call_tool_result,
    text_result,
    to_call_result,
)
from .base import _CARD_ATTR, _SPEC_ATTR, ENV_NAME_TOKEN, ToolMark, ensure_binding
from .card import (
    MCP_PATH,
    MCP_TRANSPORT,
    EnvironmentCapabilities,
    EnvironmentCard,
    EnvironmentExtension,
    EnvironmentInterface,
    EnvironmentTool,
)
from .context import (
    CHANGE_OPS,
    CHANGES_EXTENSION_URI,
    CHANGES_META_KEY,
    CHANGES_TRUNCATED_META_KEY,
    HIDDEN_BY_DEFAULT_META_KEY,
    MAX_CHANGES_PER_CALL,
    ROLE_META_KEY,
    SESSION_META_KEY,
    VIRTUAL_TIME_META_KEY,
    ToolContext,
    Transport,
    _current,
)
from .errors import EnvError, find_env_error
from .extensions import ServedExtension

if TYPE_CHECKING:
    from .base import Env

logger = logging.getLogger(__name__)


@dataclass
class ServedTool:
    name: str
    description: str | None
    binding: Binding
    fn: Callable
    mark: ToolMark

    def wire(self) -> dict:
        entry: dict[str, Any] = {"name": self.name}
        if self.description is not None:
            entry["description"] = self.description
        entry["inputSchema"] = self.binding.schema
        if self.mark.annotations:
            entry["annotations"] = dict(self.mark.annotations)
        meta = dict(self.mark.meta or {})
        if self.mark.hidden_by_default:
            meta[HIDDEN_BY_DEFAULT_META_KEY] = True
        if meta:
            entry["_meta"] = meta
        return entry


def changes_extension() -> dict:
    """The card entry of an env that keeps a changelog (`keeps_changelog = True`): a declaration, no route."""
    return {"uri": CHANGES_EXTENSION_URI,
            "description": "Changes: each tool call reports the rows it changed in its result's _meta "
                           f"{CHANGES_META_KEY!r} as [{{table, op, key, before, after}}] (at most "
                           f"{MAX_CHANGES_PER_CALL} per call); a gateway in front of the env numbers them, "
                           "attributes each to its call and serves them at GET /changes.",
            "params": {"delivery": "tool_result_meta", "meta_key": CHANGES_META_KEY,
                       "truncated_meta_key": CHANGES_TRUNCATED_META_KEY, "max_rows_per_call": MAX_CHANGES_PER_CALL,
                       "ops": list(CHANGE_OPS)},
            "required": False}


def _rfc3339(value: Any) -> Any:
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=_dt.UTC)
        text = value.isoformat()
        return text[:-6] + "Z" if text.endswith("+00:00") else text
    return value


class Runtime:
    def __init__(self, env: Env, name: str | None = None) -> None:
        """`name`: the env's name, as ENVIRONMENT_NAME would give it (an env the hub loads names it so)."""
        self.env = env
        cls = type(env)
        spec = getattr(cls, _SPEC_ATTR)
        config = dict(getattr(cls, _CARD_ATTR, None) or {})
        self.name: str = (name or os.environ.get("ENVIRONMENT_NAME") or config.get("name") or cls.environment_name
                          or cls.__name__)
        self.description: str | None = config.get("description") or cls.environment_description
        self.in_thread = bool(cls.sync_handlers_in_thread)
        # set when the env is loaded into the hub (hosting/envs/hub_guard.InHubGuard): its handlers then run
        # off the hub's loop, each tool call with a deadline
        self.guard: Any = None
        self._config = config
        self.tools: dict[str, ServedTool] = {}
        for defn in spec.tools:
            name = defn.raw_name.replace(ENV_NAME_TOKEN, self.name)
            if name in self.tools:
                raise ValueError(f"{cls.__name__}: two tools are named {name!r} once {ENV_NAME_TOKEN} is resolved to "
                                 f"{self.name!r}; rename one with @tool(name=...)")
            binding = ensure_binding(defn, f"{defn.attr}Arguments")
            self.tools[name] = ServedTool(name=name, description=defn.description(), binding=binding,
                                          fn=getattr(env, defn.attr), mark=defn.mark)
        self.ops: dict[str, Callable] = {method: getattr(env, attr) for method, attr in spec.operations.items()}
        self.extensions: list[ServedExtension] = [
            ServedExtension(defn=defn, handler=getattr(env, defn.attr),
                            binding=ensure_binding(defn, f"{defn.attr}Params"))
            for defn in spec.extensions
        ]
        self.hook: Callable | None = env.on_tool_call if spec.has_hook else None
        self._tool_list: list[dict] | None = None
        self._cards: dict[str, EnvironmentCard] = {}
        self._server: Any = None
        self._users = 0

    # --- description ---------------------------------------------------------------------------------------

    def tool_list(self) -> list[dict]:
        if self._tool_list is None:
            self._tool_list = [t.wire() for t in self.tools.values()]
        return self._tool_list

    def input_schema(self, name: str) -> dict | None:
        served = self.tools.get(name)
        return None if served is None else served.binding.schema

    def card(self, mcp_path: str = MCP_PATH) -> EnvironmentCard:
        card = self._cards.get(mcp_path)
        if card is None:
            card = self._cards[mcp_path] = self._build_card(mcp_path)
        return card

    def _build_card(self, mcp_path: str) -> EnvironmentCard:
        from .extensions import advertise

        config = dict(self._config)
        caps = config.pop("capabilities", None)
        caps = (EnvironmentCapabilities.model_validate(caps) if isinstance(caps, dict)
                else caps.model_copy(deep=True) if caps is not None else EnvironmentCapabilities())
        tools = list(caps.tools or [])
        seen = {t.name for t in tools}
        tools += [EnvironmentTool(name=t.name, description=t.description, inputSchema=t.binding.schema)
                  for t in self.tools.values() if t.name not in seen]
        extensions = list(caps.extensions or [])
        seen = {e.uri for e in extensions}
        declared = [EnvironmentExtension.model_validate(e) if isinstance(e, dict) else e
                    for e in (self.env.declared_extensions() or [])]
        if getattr(type(self.env), "keeps_changelog", False) is True:
            declared.append(EnvironmentExtension.model_validate(changes_extension()))
        for entry in [EnvironmentExtension.model_validate(e) for e in advertise(self)] + declared:
            if entry.uri not in seen:
                extensions.append(entry)
                seen.add(entry.uri)
        capabilities = caps.model_copy(update={"tools": tools, "extensions": extensions or None,
                                               "operations": list(self.ops)})
        interfaces = [EnvironmentInterface.model_validate(i) if isinstance(i, dict) else i
                      for i in config.pop("additionalInterfaces", None) or []]
        if not any(i.transport == MCP_TRANSPORT for i in interfaces):
            interfaces.append(EnvironmentInterface(url=mcp_path, transport=MCP_TRANSPORT))
        config.update(name=self.name, description=self.description, capabilities=capabilities,
                      additionalInterfaces=interfaces)
        return EnvironmentCard.model_validate(config)

    def update_tool(self, name: str, *, description: str) -> None:
        served = self.tools.get(name)
        if served is None:
            raise ValueError(f"no served tool is named {name!r}")
        served.description = description
        self._tool_list = None
        self._cards.clear()

    # --- running handlers -----------------------------------------------------------------------------------

    async def invoke(self, fn: Callable, *args: Any, **kwargs: Any) -> Any:
        """Call a handler: through the hub's guard for an env loaded in the hub, else :meth:`invoke_here`."""
        if self.guard is not None:
            return await self.guard.invoke(getattr(fn, "__name__", "handler"), fn, args, kwargs)
        return await self.invoke_here(fn, *args, **kwargs)

    async def invoke_here(self, fn: Callable, *args: Any, **kwargs: Any) -> Any:
        """Call a handler: async ones awaited, sync ones inline (or on a worker thread, if the env asks)."""
        if inspect.iscoroutinefunction(fn):
            return await fn(*args, **kwargs)
        if self.in_thread:
            import anyio.to_thread

            context = contextvars.copy_context()
            result = await anyio.to_thread.run_sync(lambda: context.run(fn, *args, **kwargs))
        else:
            result = fn(*args, **kwargs)
        if inspect.isawaitable(result):
            result = await result
        return result

    async def call_tool(self, name: str, arguments: Any, *, meta: Any = None, headers: Any = None,
                        transport: Transport = "mcp") -> dict:
        """One `tools/call`, answered in wire form (never raises for a tool's own failure)."""
        served = self.tools.get(name)
        if served is None:
            return text_result(f"Unknown tool: {name}", is_error=True)
        if arguments is None:
            arguments = {}
        ctx = ToolContext.from_request(name, arguments if isinstance(arguments, dict) else {}, meta=meta,
                                       headers=headers, transport=transport)
        dispatch = self._dispatch(served, name, arguments, ctx)
        result = await (dispatch if self.guard is None else self.guard.call(name, dispatch))
        changes = ctx.changes
        if changes:  # the rows the call recorded ride in the result's _meta (none: no key at all)
            result["_meta"] = {**(result.get("_meta") or {}), **changes.meta()}
        return result

    async def _dispatch(self, served: ServedTool, name: str, arguments: Any, ctx: ToolContext) -> dict:
        token = _current.set(ctx)
        try:
            if self.hook is not None:
                answer = self.hook(ctx)
                if inspect.isawaitable(answer):
                    answer = await answer
                if answer is not None:
                    return self._hook_answer(answer)
            try:
                kwargs = served.binding.bind(arguments, ctx)
            except ArgumentsError as e:
                return error_result(EnvError("invalid_arguments", f"{name}: {e}"))
            result = await self.invoke(served.fn, **kwargs)
            return to_call_result(result, structured_output=served.mark.structured_output)
        except Exception as e:
            error = find_env_error(e)
            if error is not None:
                return error_result(error)
            logger.exception("tool %r failed in env %r", name, self.name)
            return failure_result(name, e)
        finally:
            _current.reset(token)

    def _hook_answer(self, answer: Any) -> dict:
        if isinstance(answer, EnvError):
            return error_result(answer)
        if isinstance(answer, str):
            return text_result(answer, is_error=True)
        if is_call_tool_result(answer):
            return call_result_wire(answer)
        raise TypeError(f"on_tool_call must return None, an EnvError, a string or a CallToolResult, "
                        f"got {type(answer).__name__}")

    async def call_tool_as(self, name: str, arguments: dict | None = None, *, role: str | None = None,
                           session: str | None = None, virtual_time: Any = None, meta: dict | None = None,
                           headers: Any = None) -> dict:
        stamped = dict(meta or {})
        if role is not None:
            stamped[ROLE_META_KEY] = role
        if session is not None:
            stamped[SESSION_META_KEY] = session
        if virtual_time is not None:
            stamped[VIRTUAL_TIME_META_KEY] = _rfc3339(virtual_time)
        return await self.call_tool(name, arguments or {}, meta=stamped, headers=headers, transport="inproc")

    async def data_rpc(self, request: dict | bytes | str) -> dict:
        from .dataplane import dispatch

        return await dispatch(self, request)

    # --- lifecycle ------------------------------------------------------------------------------------------

    async def startup(self) -> None:
        self._users += 1
        if self._users == 1:
            try:
                await self.invoke_here(self.env.on_startup)
            except BaseException:
                self._users -= 1
                raise

    async def shutdown(self) -> None:
        self._users = max(0, self._users - 1)
        if self._users == 0:
            await self.invoke_here(self.env.on_shutdown)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        await self.startup()
        try:
            yield
        finally:
            await self.shutdown()

    def mcp_server(self) -> Any:
        if self._server is None:
            from .mcp_server import build_server

            self._server = build_server(self)
        return self._server
