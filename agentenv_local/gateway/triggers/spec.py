"""Trigger specs: fail-loud validation with the reference gateway's 400 messages, and typed models.

:func:`normalize_trigger` checks one raw spec and returns its canonical form (a JSON-clean dict: a
single-step check becomes ``{"steps": [...]}``, absent optionals are dropped, ``as`` is stripped).
That form is what the engine compares for idempotent re-registration and what it stores; the
pydantic models in :mod:`.models` give the engine typed access to it (:func:`~.models.parse_spec`).

Every message names where the problem is (``trigger 'mirror': actions[0]: ...``) so a person can fix
the body without reading code; the wording follows the reference's so clients written against it
see the same text.
"""

from __future__ import annotations

import copy
import math
from typing import Any, NoReturn

from ..errors import GatewayError
from .predicates import path_error, predicate_error
from .templating import placeholder_error, reaches_for_call
from .timeutil import DAYS, HHMM, UTC_OFFSET, duration_seconds, mark_spec, zone_named

WHEN_TYPES = ("action", "state", "time", "website")
ACTION_TYPES = ("nl", "tool", "permission")
BARRIER_AT = ("provoking_call",)
BARRIER_KEYS = ("at", "timeout_seconds")
DEFAULT_ROLE = "default"
# What a trigger's provoking call carries, for templates and `where`; other types have none.
CALL_ROOTS: dict[str, tuple[str, ...]] = {"action": ("args", "result"), "website": ("args",)}
# The schedule keys GET /triggers/state echoes as a trigger's `when` (not the unbounded check/where).
WHEN_SUMMARY_KEYS = ("type", "tool", "app", "method", "path", "status", "roles", "repeat", "at", "after",
                     "offset", "every", "count", "until", "seed")
WEBSITE_UNSUPPORTED = "website triggers need website envs, which this version does not deploy"


class TriggerError(GatewayError):
    """A trigger request the engine refuses; ``status`` is the HTTP status the gateway answers with."""


def _fail(message: str) -> NoReturn:
    raise TriggerError(message)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _non_empty_str(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


# -- small pieces ---------------------------------------------------------------------------------


def check_predicate(pred: Any, where: str) -> None:
    problem = predicate_error(pred)
    if problem:
        _fail(f"{where}: {problem}")


def check_path(path: str, where: str) -> None:
    problem = path_error(path)
    if problem:
        _fail(f"{where}: {problem}")


def _duration(value: Any, where: str) -> float:
    try:
        return duration_seconds(value)
    except ValueError as exc:
        raise TriggerError(f"{where}: {exc}") from None


def _mark(value: Any, where: str) -> None:
    try:
        mark_spec(value)
    except ValueError as exc:
        raise TriggerError(f"{where}: {exc}") from None


def _check_placeholders(value: Any, where: str, roots: tuple[str, ...]) -> None:
    problem = placeholder_error(value, roots)
    if problem:
        _fail(f"{where}: {problem}")


def normalize_check(check: Any, where: str) -> dict:
    """A `check` (state trigger, `verify`): ``{steps: [{tool, args?, extract?, bind?, predicate?}]}``
    or the single-step form ``{tool, args, extract, predicate}``; the last step needs a predicate."""
    if not isinstance(check, dict):
        _fail(f"{where}: check must be an object")
    steps = check.get("steps", [check] if "tool" in check else None)
    if not isinstance(steps, list) or not steps:
        _fail(f"{where}: check needs 'steps' or a single-step tool/predicate form")
    out = []
    for i, step in enumerate(steps):
        w = f"{where}.steps[{i}]"
        if not isinstance(step, dict):
            _fail(f"{w}: a step must be an object")
        if not _non_empty_str(step.get("tool")):
            _fail(f"{w}: tool must be a non-empty string")
        if not isinstance(step.get("args", {}), dict):
            _fail(f"{w}: args must be an object")
        extract = step.get("extract")
        if extract is not None and not isinstance(extract, str):
            if not isinstance(extract, dict) or "path" not in extract:
                _fail(f"{w}: extract must be a dot-path string or {{path, match, take}}")
            match = extract.get("match", {})
            if not isinstance(match, dict):
                _fail(f"{w}: extract.match must be an object of field predicates")
            for field, pred in match.items():
                check_predicate(pred, f"{w}.extract.match.{field}")
        bind = step.get("bind")
        if bind is not None and (not isinstance(bind, str) or not bind.isidentifier()):
            _fail(f"{w}: bind must be a name (letters, digits, underscores)")
        if "predicate" in step:
            check_predicate(step["predicate"], f"{w}.predicate")
        clean = {k: v for k, v in step.items() if not (k in ("extract", "bind") and v is None)}
        out.append(clean)
    if "predicate" not in out[-1]:
        _fail(f"{where}: the last check step must carry a predicate")
    return {"steps": out}


def _check_where(where_map: Any, tid: str, roots: tuple[str, ...], label: str = "where") -> None:
    if not isinstance(where_map, dict):
        _fail(f"trigger '{tid}': when.{label} must be an object")
    for field, pred in where_map.items():
        check_predicate(pred, f"trigger '{tid}': {label}.{field}")
        head, _, path = field.partition(".")
        if path and head in ("args", "result"):
            if head not in roots:
                _fail(f"trigger '{tid}': {label}.{field} reads a result; a website request carries args, "
                      "not a result")
            check_path(path, f"trigger '{tid}': {label}.{field}")


def _check_roles(roles: Any) -> bool:
    return isinstance(roles, list) and bool(roles) and all(_non_empty_str(r) for r in roles)


# -- executors ------------------------------------------------------------------------------------


def normalize_watch_roles(raw: Any) -> set[str]:
    if not isinstance(raw, list) or not all(_non_empty_str(r) for r in raw):
        _fail("watch_roles must be a list of non-empty strings")
    return set(raw)


def normalize_hours(raw: Any, where: str) -> dict:
    """An executor's working hours with `days` and (unless a `time_zone` is named) `utc_offset` filled in."""
    if not isinstance(raw, dict):
        _fail(f"{where}.hours must be an object {{start, end, utc_offset? or time_zone?, days?}}")
    for key in ("start", "end"):
        if not isinstance(raw.get(key), str) or not HHMM.fullmatch(raw[key]):
            _fail(f"{where}.hours.{key} must be a 24-hour 'HH:MM'")
    if raw["start"] == raw["end"]:
        _fail(f"{where}.hours: start equals end, so the executor would never be available")
    if "time_zone" in raw:
        if "utc_offset" in raw:
            _fail(f"{where}.hours take utc_offset or time_zone, not both")
        if zone_named(raw["time_zone"]) is None:
            _fail(f"{where}.hours.time_zone must be an IANA time zone name such as 'America/New_York', "
                  f"got {raw['time_zone']!r}")
        zone: dict = {"time_zone": raw["time_zone"]}
    else:
        offset = raw.get("utc_offset", "+00:00")
        if not isinstance(offset, str) or not UTC_OFFSET.fullmatch(offset):
            _fail(f"{where}.hours.utc_offset must look like '-07:00' or '+05:30'")
        zone = {"utc_offset": offset}
    days = raw.get("days", list(DAYS))
    if not isinstance(days, list) or not days or not all(day in DAYS for day in days):
        _fail(f"{where}.hours.days must be a non-empty list of {list(DAYS)}")
    return {"start": raw["start"], "end": raw["end"], **zone, "days": [d for d in DAYS if d in days]}


def normalize_executor(raw: Any, where: str, watch_roles: set[str]) -> dict:
    """``{a2a_url, role, timeout_seconds, hours?}``; the role must stay out of watch_roles."""
    if not isinstance(raw, dict) or not _non_empty_str(raw.get("a2a_url")):
        _fail(f"{where}.a2a_url must be a non-empty string")
    role = raw.get("role")
    if not _non_empty_str(role):
        _fail(f"{where}.role must be a non-empty string (the deployed executor's AgentEnv-Role, kept out of "
              "watch_roles so its own tool calls never fire triggers)")
    if role in watch_roles:
        _fail(f"{where}.role {role!r} must not be in watch_roles {sorted(watch_roles)} — the executor's own tool "
              "calls would fire triggers (cascade)")
    timeout = raw.get("timeout_seconds", 120)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not math.isfinite(timeout) \
            or timeout <= 0:
        _fail(f"{where}.timeout_seconds must be a positive number of seconds")
    executor = {"a2a_url": raw["a2a_url"].rstrip("/"), "timeout_seconds": float(timeout), "role": role}
    if raw.get("hours") is not None:
        executor["hours"] = normalize_hours(raw["hours"], where)
    return executor


# -- one trigger ----------------------------------------------------------------------------------


def _normalize_roles(when: dict, tid: str) -> None:
    if when.get("roles") is None:
        when.pop("roles", None)
        return
    if when["type"] == "time":
        _fail(f"trigger '{tid}': when.roles is only valid on action and state triggers, and website triggers")
    if not _check_roles(when["roles"]):
        _fail(f"trigger '{tid}': when.roles must be a non-empty list of non-empty AgentEnv-Roles")


def _normalize_provoked(when: dict, tid: str) -> None:
    """What action and website triggers share: `where` over their provoking call, and `repeat`."""
    if when.get("where") is None:
        when.pop("where", None)
    else:
        _check_where(when["where"], tid, CALL_ROOTS[when["type"]])
    if "repeat" in when and not isinstance(when["repeat"], bool):
        _fail(f"trigger '{tid}': when.repeat must be a boolean")


def _normalize_website(when: dict, tid: str) -> None:
    w = f"trigger '{tid}'"
    if not _non_empty_str(when.get("app")):
        _fail(f"{w}: when.app must be a non-empty string naming one of the env's websites")
    if when.get("method") is None:
        when.pop("method", None)
    elif not isinstance(when["method"], str) or not when["method"].strip():
        _fail(f"{w}: when.method must be a non-empty HTTP method, e.g. 'POST'")
    else:
        when["method"] = when["method"].strip().upper()
    for key in ("path", "status"):
        if when.get(key) is None:
            when.pop(key, None)
        else:
            check_predicate(when[key], f"{w}: when.{key}")
    _normalize_provoked(when, tid)


def _normalize_unless(unless: Any, w: str) -> None:
    if not isinstance(unless, dict) or not _non_empty_str(unless.get("tool")):
        _fail(f"{w}: when.unless must be an object with a non-empty 'tool'")
    where_map = unless.get("where", {})
    if not isinstance(where_map, dict):
        _fail(f"{w}: when.unless.where must be an object")
    for field, pred in where_map.items():
        check_predicate(pred, f"{w}: unless.where.{field}")
        head, _, path = field.partition(".")
        if path and head in ("args", "result"):
            check_path(path, f"{w}: unless.where.{field}")
    roles = unless.get("roles")
    if roles is not None and not _check_roles(roles):
        _fail(f"{w}: when.unless.roles must be a non-empty list of non-empty AgentEnv-Roles")
    if roles is None:
        unless.pop("roles", None)


def _normalize_time(when: dict, tid: str) -> None:
    w = f"trigger '{tid}'"
    has_at, has_after, has_every = "at" in when, "after" in when, "every" in when
    if not (has_at or has_after or has_every):
        _fail(f"{w}: when.type=='time' needs at least one of 'at', 'after', or 'every'")
    if has_at and has_after:
        _fail(f"{w}: when may have at most one of 'at' / 'after'")
    if "unless" in when:
        if has_every:
            _fail(f"{w}: when.unless is only valid on a one-shot time trigger ('at' or 'after')")
        _normalize_unless(when["unless"], w)
    if has_after:
        if not _non_empty_str(when["after"]):
            _fail(f"{w}: when.after must be a non-empty trigger id")
        if not _non_empty_str(when.get("offset")):
            _fail(f"{w}: when.after requires a non-empty 'offset' duration")
        _duration(when["offset"], f"{w}: offset")
    elif "offset" in when:
        _fail(f"{w}: 'offset' is only valid with 'after'")
    if has_at:
        _mark(when["at"], f"{w}: at")
    stochastic = has_every and isinstance(when["every"], dict)
    if has_every:
        every = when["every"]
        if isinstance(every, str):
            if _duration(every, f"{w}: every") <= 0:
                _fail(f"{w}: every must be a positive duration")
        elif isinstance(every, dict):
            if every.get("dist") != "exp":
                _fail(f"{w}: every.dist must be 'exp'")
            if not isinstance(every.get("mean"), str) or _duration(every["mean"], f"{w}: every.mean") <= 0:
                _fail(f"{w}: every.mean must be a positive ISO-8601 duration")
            if not _is_int(when.get("seed")):
                _fail(f"{w}: a stochastic 'every' requires an integer 'seed'")
        else:
            _fail(f"{w}: every must be a duration string or {{dist, mean}}")
    if "seed" in when and not stochastic:
        _fail(f"{w}: 'seed' is only valid with a stochastic 'every'")
    for term in ("until", "count"):
        if term in when and not has_every:
            _fail(f"{w}: '{term}' requires a recurring 'every'")
    if "count" in when and (not _is_int(when["count"]) or when["count"] <= 0):
        _fail(f"{w}: count must be a positive integer")
    if "until" in when:
        _mark(when["until"], f"{w}: until")


def _normalize_barrier(spec: dict, tid: str, has_call: bool) -> None:
    barrier = spec.get("barrier")
    if barrier is None:
        spec.pop("barrier", None)
        return
    w = f"trigger '{tid}': barrier"
    if not isinstance(barrier, dict):
        _fail(f"{w} must be an object, e.g. {{\"at\": \"provoking_call\"}}")
    unknown = sorted(set(barrier) - set(BARRIER_KEYS))
    if unknown:
        _fail(f"{w} has unknown key(s) {unknown}; expected {list(BARRIER_KEYS)}")
    at = barrier.get("at")
    if at not in BARRIER_AT:
        _fail(f"{w}.at must be one of {list(BARRIER_AT)} (got {at!r})")
    if not has_call:
        _fail(f"{w}.at 'provoking_call' is only valid on action triggers and website triggers — they alone have "
              "a provoking call to hold")
    timeout = barrier.get("timeout_seconds")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or not math.isfinite(timeout) or timeout <= 0):
        _fail(f"{w}.timeout_seconds must be a positive, finite number (got {timeout!r})")


def _normalize_delay(delay: Any, w: str) -> None:
    if isinstance(delay, str):
        if _duration(delay, f"{w}: delay") <= 0:
            _fail(f"{w}: delay must be a positive duration")
        return
    if not isinstance(delay, dict) or delay.get("dist") != "exp":
        _fail(f"{w}: delay must be an ISO-8601 duration or {{dist: 'exp', mean, seed}}")
    if not isinstance(delay.get("mean"), str) or _duration(delay["mean"], f"{w}: delay.mean") <= 0:
        _fail(f"{w}: delay.mean must be a positive ISO-8601 duration")
    if not _is_int(delay.get("seed")):
        _fail(f"{w}: a stochastic delay requires an integer 'seed'")


def _normalize_action(action: Any, w: str, roots: tuple[str, ...], executors: dict) -> None:
    kind = action.get("type") if isinstance(action, dict) else None
    if kind not in ACTION_TYPES:
        _fail(f"{w}: type must be one of {ACTION_TYPES}")
    if "as" in action and kind != "tool":
        _fail(f"{w}: 'as' is only valid on tool actions")
    if "executor" in action and kind != "nl":
        _fail(f"{w}: 'executor' is only valid on nl actions")
    if action.get("delay") is None:
        action.pop("delay", None)
    else:
        _normalize_delay(action["delay"], w)
    if kind == "nl":
        if not _non_empty_str(action.get("instruction")):
            _fail(f"{w}: instruction must be a non-empty string")
        token = reaches_for_call(action["instruction"])
        if token is not None:
            _fail(f"{w}: instruction contains {token!r}, but nl instructions are not templated; read the "
                  "provoking call from a tool action's args")
        named = action.get("executor")
        if named is None:
            action.pop("executor", None)
            if None not in executors:
                _fail(f"{w}: nl actions require an executor")
        elif not isinstance(named, str) or named not in executors:
            _fail(f"{w}: executor {named!r} is not a registered executor name "
                  f"(registered: {sorted(n for n in executors if n is not None)})")
    elif kind == "tool":
        if not _non_empty_str(action.get("tool")):
            _fail(f"{w}: tool must be a non-empty string")
        if not isinstance(action.get("args", {}), dict):
            _fail(f"{w}: args must be an object")
        _check_placeholders(action.get("args", {}), f"{w}.args", roots)
        if action.get("as") is None:
            action.pop("as", None)
        else:
            acting = action["as"].strip() if isinstance(action["as"], str) else ""
            if not acting or acting == DEFAULT_ROLE:
                _fail(f"{w}: 'as' must be a non-empty AgentEnv-Role other than {DEFAULT_ROLE!r}")
            if "${" in acting:
                _fail(f"{w}: 'as' is not templated; name the role literally")
            action["as"] = acting
    else:
        if action.get("action") not in ("enable", "disable"):
            _fail(f"{w}: action must be 'enable' or 'disable'")
        if not _non_empty_str(action.get("role")):
            _fail(f"{w}: role must be a non-empty string")
        tools = action.get("tools")
        if tools != "*" and (not isinstance(tools, list) or not all(isinstance(t, str) for t in tools)):
            _fail(f"{w}: tools must be a list of strings or '*'")
    if action.get("verify") is None:
        action.pop("verify", None)
    else:
        action["verify"] = normalize_check(action["verify"], f"{w}.verify")
        for j, step in enumerate(action["verify"]["steps"]):
            _check_placeholders(step.get("args", {}), f"{w}.verify.steps[{j}].args", roots)


def normalize_trigger(raw: dict, executors: dict) -> dict:
    """The canonical form of one trigger spec (which must carry its id), or :class:`TriggerError`.

    ``executors`` are those in force once the registration lands (the default under ``None``).
    """
    spec = copy.deepcopy(raw)
    tid = spec["id"]
    when = spec.get("when")
    if not isinstance(when, dict) or when.get("type") not in WHEN_TYPES:
        _fail(f"trigger '{tid}': when.type must be 'action', 'state', 'time', or 'website'")
    _normalize_roles(when, tid)
    if when.get("unless") is None:
        when.pop("unless", None)
    if "unless" in when and when["type"] != "time":
        _fail(f"trigger '{tid}': when.unless is only valid on time triggers")
    roots = CALL_ROOTS.get(when["type"], ())
    if when["type"] == "action":
        if not _non_empty_str(when.get("tool")):
            _fail(f"trigger '{tid}': when.tool must be a non-empty string")
        _normalize_provoked(when, tid)
    elif when["type"] == "website":
        _normalize_website(when, tid)
        _fail(f"trigger '{tid}': {WEBSITE_UNSUPPORTED}")
    elif when["type"] == "state":
        if "repeat" in when:
            _fail(f"trigger '{tid}': when.repeat is only valid on action triggers and website triggers")
        when["check"] = normalize_check(when.get("check"), f"trigger '{tid}': when.check")
        for j, step in enumerate(when["check"]["steps"]):
            _check_placeholders(step.get("args", {}), f"trigger '{tid}': when.check.steps[{j}].args", roots)
    else:
        if "repeat" in when:
            _fail(f"trigger '{tid}': when.repeat is only valid on action triggers and website triggers "
                  "(time triggers recur via 'every')")
        _normalize_time(when, tid)
    _normalize_barrier(spec, tid, bool(roots))
    actions = spec.get("actions")
    if not isinstance(actions, list):
        _fail(f"trigger '{tid}': actions must be a list")
    for i, action in enumerate(actions):
        _normalize_action(action, f"trigger '{tid}': actions[{i}]", roots, executors)
        target = executors.get(action.get("executor"))
        if action["type"] == "nl" and target is not None and target["role"] in when.get("roles", ()):
            _fail(f"trigger '{tid}': when.roles includes {target['role']!r}, the role of the executor actions[{i}] "
                  "goes to, so each of its replies would provoke it again")
    if spec.get("barrier") and any(
            "delay" in action or (action["type"] == "nl" and "hours" in (executors.get(action.get("executor")) or {}))
            for action in actions):
        _fail(f"trigger '{tid}': a delayed action, or an nl action whose executor keeps working hours, can't run "
              "under a barrier, which holds the provoking call until the actions finish")
    return spec


def tools_named(spec: dict) -> list[tuple[str, str]]:
    """Every tool a canonical spec names, with where it names it (for the known-tools check)."""
    when = spec["when"]
    named: list[tuple[str, str]] = []
    if when["type"] == "action":
        named.append((when["tool"], "when.tool"))
    elif when["type"] == "state":
        named.extend((step["tool"], "when.check") for step in when["check"]["steps"])
    elif "unless" in when:
        named.append((when["unless"]["tool"], "when.unless.tool"))
    for i, action in enumerate(spec["actions"]):
        if action["type"] == "tool":
            named.append((action["tool"], f"actions[{i}].tool"))
        if "verify" in action:
            named.extend((step["tool"], f"actions[{i}].verify") for step in action["verify"]["steps"])
    return named


def when_summary(spec: dict) -> dict:
    when = spec["when"]
    return {k: when[k] for k in WHEN_SUMMARY_KEYS if k in when}
