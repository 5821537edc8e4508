"""``urn:agentenv:triggers/v1`` on an agent: deterministic decisions for scripted user simulators.

Register ``{"triggers": [{"id"?, "once": true, "when": WHEN, "actions": [ACTION, ...]}]}``; then each turn the
task runner asks ``decide {"turn": n>=1, "solver_message", "context_id", "env_triggers": {env: {trigger: status}}}``
and gets ``{"parts": [{"kind": "text", "text"}], "done": bool, "fired": [ids]}``.

WHEN: ``{"type": "step", "turn": n, "cmp": "eq"|"gte"}``, ``{"type": "env_trigger", "env_id", "trigger_id",
"status": "fired"}``, ``{"type": "conversational", "where": {"message": PREDICATE}}``,
``{"type": "all"|"any", "of": [WHEN, ...]}``. PREDICATE: exactly one of ``regex``, ``equals``, ``exists``.
ACTION: ``{"type": "say", "text"}`` or ``{"type": "end"}``.

``once`` holds per context; a turn at or before the context's last decided turn starts the context over.
"""

from __future__ import annotations

import json
import re
import uuid
from collections import OrderedDict, deque
from datetime import UTC, datetime
from typing import Any

MAX_TRIGGERS = 256
MAX_SPEC_BYTES = 16 * 1024
MAX_CONTEXTS = 1024
MAX_REGEX_CHARS = 1000
MAX_MESSAGE_CHARS = 100_000
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")


class TriggerError(ValueError):
    """A registration or decision the engine refuses (HTTP 400); the message says why."""


def _check_predicate(predicate: Any, where: str) -> None:
    if not isinstance(predicate, dict):
        raise TriggerError(f"{where}: a predicate must be an object")
    keys = [k for k in ("regex", "equals", "exists") if k in predicate]
    if len(keys) != 1 or len(predicate) != 1:
        raise TriggerError(f"{where}: a predicate needs exactly one of 'regex', 'equals', 'exists'")
    if "regex" in predicate:
        pattern = predicate["regex"]
        if not isinstance(pattern, str):
            raise TriggerError(f"{where}.regex must be a string")
        if len(pattern) > MAX_REGEX_CHARS:
            raise TriggerError(f"{where}.regex must be at most {MAX_REGEX_CHARS} characters")
        try:
            re.compile(pattern)
        except re.error as e:
            raise TriggerError(f"{where}.regex is not a valid regular expression: {e}") from None
    if "exists" in predicate and not isinstance(predicate["exists"], bool):
        raise TriggerError(f"{where}.exists must be true or false")


def predicate_holds(predicate: dict, value: Any) -> bool:
    if "regex" in predicate:
        text = value if isinstance(value, str) else "" if value is None else str(value)
        return re.search(predicate["regex"], text[:MAX_MESSAGE_CHARS]) is not None
    if "equals" in predicate:
        return value == predicate["equals"]
    present = value not in (None, "", [], {})
    return present == predicate["exists"]


class TriggerEngine:
    def __init__(self) -> None:
        self._triggers: dict[str, dict[str, Any]] = {}
        self._contexts: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._log: deque[dict[str, Any]] = deque(maxlen=1000)
        self._seq = 0

    @property
    def registered(self) -> bool:
        return bool(self._triggers)

    # --- register ---------------------------------------------------------------------------------------

    def register(self, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise TriggerError("the body must be an object {\"triggers\": [...]}")
        unknown = set(body) - {"triggers"}
        if unknown:
            raise TriggerError(f"unknown field(s): {', '.join(sorted(unknown))}")
        triggers = body.get("triggers")
        if not isinstance(triggers, list) or not triggers:
            raise TriggerError("'triggers' must be a non-empty list")
        batch: dict[str, dict[str, Any]] = {}
        for i, raw in enumerate(triggers):
            spec = self._normalize(raw, i)
            if spec["id"] in batch:
                raise TriggerError(f"triggers[{i}]: duplicate id {spec['id']!r} in this request")
            existing = self._triggers.get(spec["id"])
            if existing is not None and existing != spec:
                raise TriggerError(f"triggers[{i}]: {spec['id']!r} is already registered with a different "
                                   "spec; use a new id")
            batch[spec["id"]] = spec
        added = [tid for tid in batch if tid not in self._triggers]
        if len(self._triggers) + len(added) > MAX_TRIGGERS:
            raise TriggerError(f"registration would exceed the limit of {MAX_TRIGGERS} triggers")
        for tid in added:
            self._triggers[tid] = batch[tid]
        self._event("registered", added=added)
        return {"ok": True, "added": added, "all": list(self._triggers)}

    def _normalize(self, raw: Any, i: int) -> dict[str, Any]:
        where = f"triggers[{i}]"
        if not isinstance(raw, dict):
            raise TriggerError(f"{where} must be an object")
        unknown = set(raw) - {"id", "once", "when", "actions"}
        if unknown:
            raise TriggerError(f"{where}: unknown field(s): {', '.join(sorted(unknown))}")
        tid = raw.get("id")
        if tid is None:
            tid = "trg_" + uuid.uuid4().hex[:12]
        elif not isinstance(tid, str) or not _ID.match(tid):
            raise TriggerError(f"{where}.id must match {_ID.pattern}")
        once = raw.get("once", True)
        if not isinstance(once, bool):
            raise TriggerError(f"{where}.once must be true or false")
        actions = raw.get("actions")
        if not isinstance(actions, list) or not actions:
            raise TriggerError(f"{where}.actions must be a non-empty list")
        spec = {"id": tid, "once": once, "when": self._when(raw.get("when"), f"{where}.when"),
                "actions": [self._action(a, f"{where}.actions[{j}]") for j, a in enumerate(actions)]}
        if len(json.dumps(spec).encode()) > MAX_SPEC_BYTES:
            raise TriggerError(f"{where} is larger than {MAX_SPEC_BYTES} bytes")
        return spec

    def _when(self, when: Any, where: str) -> dict[str, Any]:
        if not isinstance(when, dict) or not isinstance(when.get("type"), str):
            raise TriggerError(f"{where} must be an object with a 'type'")
        kind = when["type"]
        if kind == "step":
            turn, cmp = when.get("turn", 1), when.get("cmp", "eq")
            if isinstance(turn, bool) or not isinstance(turn, int) or turn < 1:
                raise TriggerError(f"{where}.turn must be a positive integer")
            if cmp not in ("eq", "gte"):
                raise TriggerError(f"{where}.cmp must be 'eq' or 'gte'")
            return {"type": kind, "turn": turn, "cmp": cmp}
        if kind == "env_trigger":
            out = {"type": kind}
            for key in ("env_id", "trigger_id"):
                if not isinstance(when.get(key), str) or not when[key]:
                    raise TriggerError(f"{where}.{key} must be a non-empty string")
                out[key] = when[key]
            status = when.get("status", "fired")
            if not isinstance(status, str) or not status:
                raise TriggerError(f"{where}.status must be a non-empty string")
            out["status"] = status
            return out
        if kind == "conversational":
            cond = when.get("where")
            if not isinstance(cond, dict) or not cond:
                raise TriggerError(f"{where}.where must be a non-empty object")
            for field, predicate in cond.items():
                if field != "message":
                    raise TriggerError(f"{where}.where: only 'message' can be matched, not {field!r}")
                _check_predicate(predicate, f"{where}.where.{field}")
            return {"type": kind, "where": cond}
        if kind in ("all", "any"):
            of = when.get("of")
            if not isinstance(of, list) or not of:
                raise TriggerError(f"{where}.of must be a non-empty list")
            return {"type": kind, "of": [self._when(c, f"{where}.of[{j}]") for j, c in enumerate(of)]}
        raise TriggerError(f"{where}.type {kind!r} is unknown (step, env_trigger, conversational, all, any)")

    @staticmethod
    def _action(action: Any, where: str) -> dict[str, Any]:
        if not isinstance(action, dict) or "type" not in action:
            raise TriggerError(f"{where} must be an object with a 'type'")
        if action["type"] == "say":
            text = action.get("text")
            if not isinstance(text, str) or not text:
                raise TriggerError(f"{where}.text must be a non-empty string")
            return {"type": "say", "text": text}
        if action["type"] == "end":
            return {"type": "end"}
        raise TriggerError(f"{where}.type {action['type']!r} is unknown (say, end)")

    # --- decide -----------------------------------------------------------------------------------------

    def decide(self, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise TriggerError("the body must be an object")
        unknown = set(body) - {"turn", "solver_message", "context_id", "env_triggers"}
        if unknown:
            raise TriggerError(f"unknown field(s): {', '.join(sorted(unknown))}")
        turn = body.get("turn")
        if isinstance(turn, bool) or not isinstance(turn, int) or turn < 1:
            raise TriggerError("'turn' must be a positive integer")
        message = body.get("solver_message", "")
        if not isinstance(message, str):
            raise TriggerError("'solver_message' must be a string")
        context_id = body.get("context_id", "default")
        if not isinstance(context_id, str) or not context_id:
            raise TriggerError("'context_id' must be a non-empty string")
        env = body.get("env_triggers") or {}
        if not isinstance(env, dict):
            raise TriggerError("'env_triggers' must be an object {env_id: {trigger_id: status}}")

        context = self._contexts.get(context_id)
        reset = context is not None and context["last_turn"] is not None and turn <= context["last_turn"]
        already = set() if (context is None or reset) else context["fired"]
        texts: list[str] = []
        fired: list[str] = []
        done = False
        for tid, spec in self._triggers.items():
            if spec["once"] and tid in already:
                continue
            if self._matches(spec["when"], turn, message, env):
                fired.append(tid)
                for action in spec["actions"]:
                    if action["type"] == "say":
                        texts.append(action["text"])
                    else:
                        done = True
        if context is None:
            if len(self._contexts) >= MAX_CONTEXTS:
                self._contexts.popitem(last=False)
            context = self._contexts[context_id] = {"last_turn": None, "fired": set()}
        self._contexts.move_to_end(context_id)
        if reset:
            context["fired"] = set()
            self._event("reset", context_id=context_id, turn=turn)
        context["last_turn"] = turn
        for tid in fired:
            context["fired"].add(tid)
            self._event("fired", trigger_id=tid, context_id=context_id, turn=turn)
        parts = [{"kind": "text", "text": "\n".join(texts)}] if texts else []
        return {"parts": parts, "done": done, "fired": fired}

    def _matches(self, when: dict, turn: int, message: str, env: dict) -> bool:
        kind = when["type"]
        if kind == "step":
            return turn == when["turn"] if when["cmp"] == "eq" else turn >= when["turn"]
        if kind == "env_trigger":
            statuses = env.get(when["env_id"])
            return isinstance(statuses, dict) and statuses.get(when["trigger_id"]) == when["status"]
        if kind == "conversational":
            return all(predicate_holds(p, message) for p in when["where"].values())
        children = (self._matches(c, turn, message, env) for c in when["of"])
        return all(children) if kind == "all" else any(children)

    # --- state ------------------------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        return {"triggers": [{"id": tid, "when_type": s["when"]["type"], "once": s["once"],
                              "fired_in_contexts": sorted(c for c, st in self._contexts.items() if tid in st["fired"])}
                             for tid, s in self._triggers.items()],
                "firing_log": list(self._log)}

    def _event(self, kind: str, **fields: Any) -> None:
        self._seq += 1
        self._log.append({"seq": self._seq, "ts": datetime.now(UTC).isoformat(), "kind": kind, **fields})
