"""The built-in ``scripted`` agent: follows a plan, no model needed (the offline default for examples and tests).

The plan comes from config field ``plan``: a dict, a list of actions, or a path to a JSON file.

    {"steps": [ACTION, ...]}                    the same actions every turn
    {"turns": [[ACTION, ...], [ACTION, ...]]}   turn i of a context (0-based) runs turns[i]; past the end,
                                                "after_last": "repeat" (the last turn again) | "end" (reply
                                                nothing and end the conversation) | "fail" (default)
    [ACTION, ...]                               same as {"steps": [...]}

Actions:
    {"tool": NAME, "args": {...}, "server": NAME?, "save_as": "x"?, "allow_error": false}
        call an MCP tool through the registered MCP server(s) (sending their headers, e.g. AgentEnv-Role);
        without "server" the one server that lists the tool. A tool error fails the turn unless allow_error.
        Saved: the structured result ({"result": v} unwrapped to v), else the text; with allow_error, an error
        saves {"error": text}.
    {"reply": "text {x} {x.field} {input} {turn}"}     add a text part ({{ and }} are literal braces)
    {"data": {...}}                                    add a data part (templated)
    {"structured": {...}}                              the structured output (validated against output_format)
    {"set": "x", "value": ...}                         save a value (templated)
    {"if": COND, "then": [...], "else": [...]}
    {"check": COND, "name": "criterion"}               record a judge criterion (passed or not)
    {"verdict": {}}                                    structured output {"score", "passed", "criteria"} from the checks
    {"progress": "text"}                               a progress update (the task stays working)
    {"sleep": seconds}
    {"fail": "message", "code": "..."?}                end the turn as failed (agent_error)
    {"end": true}                                      end the conversation (a data part {"end_conversation": true})

COND: a subject, ``{"saved": "x.path"}`` or ``{"input": "text" | "data.path"}``, with one test: ``contains``,
``not_contains``, ``equals``, ``regex``, ``exists``; or ``{"all": [COND...]}``, ``{"any": [...]}``, ``{"not": COND}``.
Templates: a string that is exactly ``"{x}"`` keeps the saved value's type; elsewhere values are formatted
(dicts and lists as JSON).

Every tool call goes into the task's trajectory (format ``agentenv-scripted/1``): tool, server, args, result,
is_error, duration_ms.

``{history}``: this conversation's earlier completed turns, ``[{"input", "reply"}]`` (``{history.0.input}``).
The agent offers snapshot/v1 (agents/snapshot.py): a conversation's turn count and history are saved, and load
into another scripted agent as a conversation that goes on from there.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import pathlib
import re
import time
import uuid
from typing import Any

from agentenv_local.errors import describe

from .base import Agent
from .types import (
    END_CONVERSATION_KEY,
    AgentConfig,
    DataPart,
    TaskProgress,
    TaskRequest,
    TaskResult,
    TextPart,
    Usage,
)

TRAJECTORY_FORMAT = "agentenv-scripted/1"
SNAPSHOT_FORMAT = "agentenv-scripted-snapshot/1"
MAX_HISTORY = 100  # turns of one conversation kept for `history` and snapshots
_FIELD = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_-]+)*)\}")
_WHOLE = re.compile(r"^\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_-]+)*)\}$")


class PlanError(ValueError):
    """The plan is malformed or refers to something that does not exist."""


class _Fail(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


class ScriptedConfig(AgentConfig):
    #: the plan: a dict, a list of actions, or a path to a JSON file
    plan: dict[str, Any] | list[Any] | str | None = None


def load_plan(plan: Any) -> dict[str, Any]:
    if plan is None:
        raise PlanError("no plan: set the config field 'plan' (agent-config/v1) to a plan or a JSON file path")
    if isinstance(plan, str):
        path = pathlib.Path(plan)
        if not path.is_file():
            raise PlanError(f"plan file {plan!r} does not exist")
        try:
            plan = json.loads(path.read_text())
        except ValueError as e:
            raise PlanError(f"plan file {plan!r} is not valid JSON: {e}") from None
    if isinstance(plan, list):
        plan = {"steps": plan}
    if not isinstance(plan, dict):
        raise PlanError("a plan must be an object, a list of actions or a JSON file path")
    if ("steps" in plan) == ("turns" in plan):
        raise PlanError("a plan needs exactly one of 'steps' or 'turns'")
    if "turns" in plan and (not isinstance(plan["turns"], list) or not all(isinstance(t, list)
                                                                            for t in plan["turns"])):
        raise PlanError("'turns' must be a list of action lists")
    if "steps" in plan and not isinstance(plan["steps"], list):
        raise PlanError("'steps' must be a list of actions")
    if plan.get("after_last", "fail") not in ("fail", "repeat", "end"):
        raise PlanError("'after_last' must be 'fail', 'repeat' or 'end'")
    return plan


def lookup(scope: dict[str, Any], path: str) -> Any:
    """``x.field.0`` in the saved values; KeyError naming the missing piece."""
    head, *rest = path.split(".")
    if head not in scope:
        raise KeyError(f"nothing saved as {head!r} (saved: {', '.join(sorted(scope)) or 'none'})")
    value = scope[head]
    for i, key in enumerate(rest):
        if isinstance(value, dict) and key in value:
            value = value[key]
        elif isinstance(value, list) and key.lstrip("-").isdigit() and -len(value) <= int(key) < len(value):
            value = value[int(key)]
        elif isinstance(value, str) and i == 0 and key in ("text",):
            return value
        else:
            raise KeyError(f"{'.'.join([head, *rest[:i + 1]])} does not exist")
    return value


def _fmt(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, default=str)


def render(template: Any, scope: dict[str, Any]) -> Any:
    if isinstance(template, str):
        whole = _WHOLE.match(template)
        if whole:
            return lookup(scope, whole.group(1))

        def sub(m: re.Match) -> str:
            if m.group(0) == "{{":
                return "{"
            if m.group(0) == "}}":
                return "}"
            return _fmt(lookup(scope, m.group(1)))
        return _FIELD.sub(sub, template)
    if isinstance(template, dict):
        return {k: render(v, scope) for k, v in template.items()}
    if isinstance(template, list):
        return [render(v, scope) for v in template]
    return template


def condition_holds(cond: Any, scope: dict[str, Any]) -> bool:
    if not isinstance(cond, dict):
        raise PlanError(f"a condition must be an object, got {cond!r}")
    if "all" in cond:
        return all(condition_holds(c, scope) for c in cond["all"])
    if "any" in cond:
        return any(condition_holds(c, scope) for c in cond["any"])
    if "not" in cond:
        return not condition_holds(cond["not"], scope)
    if "saved" in cond:
        path = cond["saved"]
    elif "input" in cond:
        path = "input" if cond["input"] in ("text", "", None) else f"input_{cond['input']}"
    else:
        raise PlanError(f"a condition needs a subject ('saved' or 'input') or all/any/not: {cond!r}")
    try:
        value = lookup(scope, path)
    except KeyError:
        value = None
    tests = [k for k in ("contains", "not_contains", "equals", "regex", "exists") if k in cond]
    if len(tests) != 1:
        raise PlanError(f"a condition needs exactly one of contains, not_contains, equals, regex, exists: {cond!r}")
    test = tests[0]
    expected = render(cond[test], scope)
    if test == "exists":
        return (value not in (None, "", [], {})) == bool(expected)
    if test == "equals":
        return value == expected
    text = _fmt(value) if value is not None else ""
    if test == "contains":
        return str(expected) in text
    if test == "not_contains":
        return str(expected) not in text
    return re.search(str(expected), text) is not None


class _Tools:
    """MCP clients for the registered servers, opened on first use and closed at the end of the turn."""

    def __init__(self, servers: dict[str, dict[str, Any]], stack: contextlib.AsyncExitStack):
        self.servers = servers
        self.stack = stack
        self.clients: dict[str, Any] = {}
        self.tool_names: dict[str, set[str]] = {}

    async def client(self, name: str) -> Any:
        if name not in self.clients:
            import httpx2
            from mcp import Client
            from mcp.client.streamable_http import streamable_http_client

            from agentenv_local.http_clients import async_client

            reg = self.servers[name]
            # a gateway in this hub is called in-process (inproc.py), any other over the network
            http = async_client(headers=reg.get("headers") or {}, timeout=httpx2.Timeout(60.0))
            self.stack.push_async_callback(http.aclose)
            self.clients[name] = await self.stack.enter_async_context(
                Client(streamable_http_client(reg["url"], http_client=http), mode="auto"))
        return self.clients[name]

    async def server_for(self, tool: str) -> str:
        if not self.servers:
            raise _Fail("scripted.no_mcp_server", f"the plan calls tool {tool!r} but no MCP server is registered "
                                                  "(mcp-config/v1 add)")
        if len(self.servers) == 1:
            return next(iter(self.servers))
        having = []
        for name in self.servers:
            if name not in self.tool_names:
                listed = await (await self.client(name)).list_tools()
                self.tool_names[name] = {t.name for t in listed.tools}
            if tool in self.tool_names[name]:
                having.append(name)
        if len(having) != 1:
            raise _Fail("scripted.ambiguous_tool" if having else "scripted.unknown_tool",
                        f"tool {tool!r} is served by {', '.join(having) or 'none'} of the registered MCP servers; "
                        "name one with \"server\"")
        return having[0]


def _result_value(result: Any) -> tuple[Any, str, bool]:
    texts = [c.text for c in result.content if getattr(c, "type", None) == "text"]
    text = "\n".join(texts)
    structured = result.structured_content
    if isinstance(structured, dict) and set(structured) == {"result"}:
        structured = structured["result"]
    value = structured if structured is not None else text
    return value, text, bool(result.is_error)


def _validate_output(value: Any, schema: dict[str, Any] | None) -> None:
    if not schema:
        return
    try:
        import jsonschema
    except ImportError:  # pragma: no cover - jsonschema comes with mcp
        return
    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError as e:
        where = ".".join(str(p) for p in e.absolute_path) or "(root)"
        raise _Fail("scripted.output_format", f"the structured output does not match output_format at {where}: "
                                              f"{e.message}") from None


class ScriptedAgent(Agent):
    name = "scripted"
    description = "Follows a scripted plan: calls MCP tools, replies from templates, judges by rules. No model."
    config_model = ScriptedConfig

    def __init__(self, **config: Any) -> None:
        super().__init__(**config)
        self._turns: dict[str, int] = {}
        # per context, the turns that completed: {"input", "reply"} (template `history`; what snapshot/v1 saves)
        self._history: dict[str, list[dict[str, str]]] = {}

    # --- snapshot/v1: a conversation's turn count and history, saved and loaded (agents/snapshot.py) ---------

    def card_extensions(self) -> list[dict[str, Any]]:
        from .snapshot import snapshot_extension

        return [snapshot_extension()]

    def extra_routes(self) -> list[Any]:
        from .snapshot import snapshot_routes

        return snapshot_routes(self._snapshot_save, self._snapshot_load)

    def _snapshot_save(self, context_id: str) -> dict[str, bytes]:
        if context_id not in self._turns:
            raise KeyError(f"no conversation {context_id!r} on this agent")
        state = {"format": SNAPSHOT_FORMAT, "turns": self._turns[context_id],
                 "history": self._history.get(context_id, [])}
        return {"trajectory": json.dumps(state).encode()}

    def _snapshot_load(self, objects: dict[str, bytes], target_context_id: str | None) -> str:
        from .snapshot import SnapshotError

        try:
            state = json.loads(objects["trajectory"])
        except ValueError:
            raise SnapshotError("the trajectory object is not JSON: not a scripted agent's snapshot") from None
        history = state.get("history") if isinstance(state, dict) else None
        if (not isinstance(state, dict) or state.get("format") != SNAPSHOT_FORMAT
                or not isinstance(state.get("turns"), int) or not isinstance(history, list)):
            raise SnapshotError(f"the trajectory object is not a {SNAPSHOT_FORMAT} snapshot")
        context_id = target_context_id or uuid.uuid4().hex
        self._turns[context_id] = state["turns"]
        self._history[context_id] = [dict(h) for h in history if isinstance(h, dict)]
        return context_id

    async def run(self, request: TaskRequest):
        log = request.trajectory
        log.set_format(TRAJECTORY_FORMAT)
        turn = self._turns.get(request.context_id, 0)
        self._turns[request.context_id] = turn + 1
        if len(self._turns) > 4096:
            oldest = next(iter(self._turns))
            self._turns.pop(oldest)
            self._history.pop(oldest, None)
        log.append({"type": "turn", "turn": turn, "input": request.text, "data": request.data})
        try:
            plan = load_plan(getattr(request.config, "plan", None))
        except PlanError as e:
            yield TaskResult.failure("scripted.plan_error", str(e))
            return
        actions = self._actions_for(plan, turn)
        if actions is None:
            after = plan.get("after_last", "fail")
            if after == "end":
                log.append({"type": "end"})
                yield TaskResult.success([DataPart(data={END_CONVERSATION_KEY: True})])
                return
            yield TaskResult.failure("scripted.no_more_turns",
                                     f"the plan has {len(plan['turns'])} turn(s); this is turn {turn + 1}")
            return
        scope: dict[str, Any] = {"input": request.text, "input_data": request.data, "turn": turn,
                                 "context_id": request.context_id, "task_id": request.task_id,
                                 "history": list(self._history.get(request.context_id, []))}
        state: dict[str, Any] = {"parts": [], "structured": None, "has_structured": False, "end": False, "checks": [],
                 "tool_calls": 0}
        failure: TaskResult | None = None
        # the MCP clients close before the result is yielded: the server closes this generator after it
        async with contextlib.AsyncExitStack() as stack:
            tools = _Tools(request.mcp_servers, stack)
            try:
                async for progress in self._run_actions(actions, scope, state, tools, request):
                    yield progress
            except _Fail as f:
                failure = self._failed(log, f.code, f.message)
            except PlanError as e:
                failure = self._failed(log, "scripted.plan_error", str(e))
            except KeyError as e:
                failure = self._failed(log, "scripted.template_error", f"template: {e.args[0] if e.args else e}")
        if failure is not None:
            yield failure
            return
        history = self._history.setdefault(request.context_id, [])
        history.append({"input": request.text, "reply": "".join(p.text for p in state["parts"]
                                                                 if isinstance(p, TextPart))})
        del history[:-MAX_HISTORY]
        builder = TaskResult.builder().succeeded().parts(state["parts"])
        if state["has_structured"]:
            builder.add_structured_output(state["structured"])
        if state["end"]:
            builder.add_data({END_CONVERSATION_KEY: True})
        if not state["parts"] and not state["has_structured"] and not state["end"]:
            builder.add_text("")
        builder.usage(Usage(tool_call_count=state["tool_calls"]))
        yield builder.build()

    @staticmethod
    def _failed(log: Any, code: str, message: str) -> TaskResult:
        log.append({"type": "fail", "code": code, "message": message})
        return TaskResult.failure(code, message)

    @staticmethod
    def _actions_for(plan: dict[str, Any], turn: int) -> list | None:
        if "steps" in plan:
            return plan["steps"]
        turns = plan["turns"]
        if turn < len(turns):
            return turns[turn]
        if plan.get("after_last") == "repeat" and turns:
            return turns[-1]
        return None

    async def _run_actions(self, actions: list, scope: dict, state: dict, tools: _Tools, request: TaskRequest):
        log = request.trajectory
        output_format = request.config.output_format
        for i, action in enumerate(actions):
            if not isinstance(action, dict):
                raise PlanError(f"action {i} must be an object, got {action!r}")
            if "tool" in action:
                await self._call_tool(action, scope, state, tools, log)
            elif "reply" in action:
                text = render(action["reply"], scope)
                text = _fmt(text)
                state["parts"].append(TextPart(text=text))
                log.append({"type": "reply", "text": text})
            elif "data" in action:
                data = render(action["data"], scope)
                if not isinstance(data, dict):
                    raise PlanError("a data action needs an object")
                state["parts"].append(DataPart(data=data))
            elif "structured" in action:
                value = render(action["structured"], scope)
                _validate_output(value, output_format)
                state["structured"], state["has_structured"] = value, True
                log.append({"type": "structured_output", "value": value})
            elif "set" in action:
                scope[action["set"]] = render(action.get("value"), scope)
            elif "if" in action:
                branch = action.get("then", []) if condition_holds(action["if"], scope) else action.get("else", [])
                async for progress in self._run_actions(branch, scope, state, tools, request):
                    yield progress
                if state["end"]:
                    return
            elif "check" in action:
                passed = condition_holds(action["check"], scope)
                name = action.get("name") or f"check {len(state['checks']) + 1}"
                state["checks"].append({"name": name, "passed": passed})
                log.append({"type": "check", "name": name, "passed": passed})
            elif "verdict" in action:
                checks = state["checks"]
                n_passed = sum(c["passed"] for c in checks)
                score = n_passed / len(checks) if checks else 0.0
                value = {"score": score, "passed": bool(checks) and n_passed == len(checks), "criteria": checks}
                extra = render(action.get("verdict") or {}, scope)
                if isinstance(extra, dict):
                    value.update(extra)
                _validate_output(value, output_format)
                state["structured"], state["has_structured"] = value, True
                log.append({"type": "verdict", "value": value})
            elif "progress" in action:
                yield TaskProgress.text(_fmt(render(action["progress"], scope)))
            elif "sleep" in action:
                await asyncio.sleep(float(action["sleep"]))
            elif "fail" in action:
                raise _Fail(action.get("code", "scripted.fail"), _fmt(render(action["fail"], scope)))
            elif "end" in action:
                if action["end"]:
                    state["end"] = True
                    log.append({"type": "end"})
                    return
            else:
                raise PlanError(f"action {i} has no known verb: {action!r}")

    async def _call_tool(self, action: dict, scope: dict, state: dict, tools: _Tools, log: Any) -> None:
        tool = action["tool"]
        if not isinstance(tool, str) or not tool:
            raise PlanError("'tool' must be a tool name")
        args = render(action.get("args") or {}, scope)
        if not isinstance(args, dict):
            raise PlanError(f"the args of tool {tool!r} must be an object")
        server = action.get("server")
        if server is not None and server not in tools.servers:
            raise _Fail("scripted.unknown_server", f"no MCP server named {server!r} is registered (registered: "
                                                   f"{', '.join(tools.servers) or 'none'})")
        server = server or await tools.server_for(tool)
        started = time.perf_counter()
        try:
            result = await (await tools.client(server)).call_tool(tool, args)
            value, text, is_error = _result_value(result)
        except _Fail:
            raise
        except Exception as e:  # an MCP-level error is the tool call's outcome
            value, text, is_error = None, describe(e), True
        duration_ms = round((time.perf_counter() - started) * 1000, 3)
        state["tool_calls"] += 1
        log.append({"type": "tool_call", "server": server, "tool": tool, "args": args,
                    "result": value if not is_error else text, "is_error": is_error, "duration_ms": duration_ms})
        if is_error and not action.get("allow_error"):
            raise _Fail("scripted.tool_error", f"tool {tool!r} failed: {text}")
        if action.get("save_as"):
            scope[action["save_as"]] = {"error": text} if is_error else value
