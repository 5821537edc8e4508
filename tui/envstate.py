"""A deployed env's clock, triggers and role rules, as the panels show them (no terminal needed).

Built from the gateway state the hub keeps for each env instance (the `env_instance_state` record:
the clock's, the trigger engine's and the RBAC rules' `to_dict()`, saved on every change), read
through the hub; and, while the instance runs, the gateway's own `GET /clock/state`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta


@dataclass
class ClockView:
    armed: bool = False
    virtual_time: str | None = None
    mode: str | None = None
    rate: float | None = None
    step_seconds: float | None = None
    time_zone: str = "UTC"
    generation: int | None = None


@dataclass
class TriggerView:
    id: str
    type: str
    when: str
    status: str
    fire_count: int = 0
    failure_count: int = 0
    next_mark: str | None = None


@dataclass
class EnvView:
    instance_id: str
    env_id: str = ""
    gateway_url: str | None = None
    live: bool = False
    pool_slot: str | None = None  # the env pool slot it ran on (hosting/envs/pool.py), if any
    clock: ClockView = field(default_factory=ClockView)
    triggers: list[TriggerView] = field(default_factory=list)
    trigger_events: list[dict] = field(default_factory=list)
    roles: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    error: str | None = None


def _parse(ts: str | None) -> datetime | None:
    if not ts:
        return None
    try:
        return datetime.fromisoformat(ts)
    except ValueError:
        return None


def _fmt(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def clock_from_saved(saved: dict | None, now: float) -> ClockView:
    """The clock a saved `VirtualClock.to_dict()` reads at `now` (a wall clock kept running)."""
    if not saved or not saved.get("armed"):
        return ClockView(armed=False)
    mode = saved.get("mode") or "wall"
    rate = float(saved.get("rate") or 0.0)
    anchor = _parse(saved.get("anchor_virtual"))
    current = anchor
    if anchor is not None and mode == "wall" and saved.get("anchor_real") is not None:
        current = anchor + timedelta(seconds=max(0.0, now - float(saved["anchor_real"])) * rate)
    return ClockView(armed=True, virtual_time=_fmt(current) if current else None, mode=mode,
                     rate=rate if mode == "wall" else 0.0, step_seconds=saved.get("step_seconds"),
                     generation=saved.get("generation"))


def clock_from_rest(body: dict) -> ClockView:
    """`GET /clock/state`."""
    if not body.get("armed"):
        return ClockView(armed=False, generation=body.get("generation"))
    return ClockView(armed=True, virtual_time=body.get("virtual_time"), mode=body.get("mode") or "wall",
                     rate=body.get("virtual_seconds_per_real_second"), step_seconds=body.get("step_seconds"),
                     generation=body.get("generation"))


def when_summary(spec: dict) -> str:
    """`action send_email roles=agent where=args.to` / `time at=PT1H`: the condition, in one line."""
    when = spec.get("when") or {}
    parts = [str(when.get("type") or "?")]
    for key, value in when.items():
        if key == "type" or value in (None, "", [], {}):
            continue
        if key == "tool":
            parts.append(str(value))
        elif isinstance(value, list):
            parts.append(f"{key}={','.join(map(str, value))}")
        elif isinstance(value, dict):
            parts.append(f"{key}=" + ",".join(str(k) for k in value))
        else:
            parts.append(f"{key}={value}")
    return " ".join(parts)


def triggers_from_saved(saved: dict | None) -> tuple[list[TriggerView], list[dict]]:
    if not saved:
        return [], []
    out = []
    for t in saved.get("triggers") or []:
        spec = t.get("spec") or {}
        when = spec.get("when") or {}
        out.append(TriggerView(id=spec.get("id") or "?", type=str(when.get("type") or "?"), when=when_summary(spec),
                               status=t.get("status") or "?", fire_count=int(t.get("fire_count") or 0),
                               failure_count=int(t.get("failure_count") or 0), next_mark=t.get("next_mark")))
    return out, list(saved.get("events") or [])


def roles_from_saved(saved: dict | None) -> dict[str, dict[str, list[str]]]:
    rules = (saved or {}).get("rules") or {}
    return {role: {"disabled": sorted(k for k, v in entries.items() if v),
                   "allowed": sorted(k for k, v in entries.items() if not v)}
            for role, entries in rules.items()}


def env_view(record: dict, saved: dict | None, now: float, rest_clock: dict | None = None,
             live: bool = False) -> EnvView:
    """One env instance of a run: `record` is its entry in the run's deployed_envs."""
    saved = saved or {}
    view = EnvView(instance_id=record.get("instance_id") or "?", env_id=record.get("env_id") or "",
                   gateway_url=record.get("gateway_url"), live=live)
    if isinstance(record.get("pool_slot"), str):
        view.pool_slot = record["pool_slot"]
    view.clock = clock_from_rest(rest_clock) if rest_clock else clock_from_saved(saved.get("clock"), now)
    view.triggers, view.trigger_events = triggers_from_saved(saved.get("triggers"))
    view.roles = roles_from_saved(saved.get("rbac"))
    return view


def describe_trigger_event(event: dict) -> str:
    """One line for the trigger event log."""
    bits = [str(event.get("kind") or "?")]
    if event.get("trigger_id"):
        bits.append(str(event["trigger_id"]))
    for key in ("detail", "provoking", "mark", "first_mark", "until", "virtual_seconds", "action_index"):
        value = event.get(key)
        if value not in (None, "", {}):
            if isinstance(value, dict):
                value = (value.get("tool") or value.get("source")
                         or ",".join(f"{k}={v}" for k, v in list(value.items())[:2]))
            bits.append(f"{key}={value}")
    return " ".join(bits)
