"""The engine's state as JSON for the store, and back: config, triggers with their statuses,
counters, marks, generator states and fires in progress, and the event log."""

from __future__ import annotations

import copy
import random
from collections import deque
from datetime import datetime

from .models import parse_spec
from .records import IN_FLIGHT, STATUSES, TriggerRecord, seed_rngs
from .runtime import EngineRuntime
from .timeutil import iso

STATE_VERSION = 1


def dump_state(rt: EngineRuntime) -> dict:
    """JSON-ready state (a delayed action keeps what is left of its delay)."""
    return {
        "version": STATE_VERSION,
        "seed": rt.seed,
        "ids_issued": rt.ids_issued,
        "elapsed": rt.elapsed,
        "config": {
            "config_set": rt.config_set,
            "watch_roles": sorted(rt.watch_roles),
            "executors": [[name, copy.deepcopy(ex)] for name, ex in rt.executors.items()],
        },
        "triggers": [_trigger_dict(trig) for trig in rt.triggers.values()],
        "events": copy.deepcopy(rt.events),
        "events_tail": copy.deepcopy(list(rt.events_tail)),
        "seq": rt.seq,
    }


def _trigger_dict(trig: TriggerRecord) -> dict:
    return {
        "spec": copy.deepcopy(trig.raw),
        "status": trig.status,
        "detected_at": trig.detected_at,
        "fired_at": trig.fired_at,
        "fire_count": trig.fire_count,
        "failure_count": trig.failure_count,
        "last_failure_at": trig.last_failure_at,
        "attempts": trig.attempts,
        "next_mark": iso(trig.next_mark) if trig.next_mark is not None else None,
        "resolved": trig.resolved,
        "anchor_key": trig.anchor_key,
        "retiring": trig.retiring,
        "rng": _rng_state(trig.rng),
        "delay_rngs": {str(i): _rng_state(r) for i, r in trig.delay_rngs.items()},
        "job": copy.deepcopy(trig.job),
        "pending": copy.deepcopy(list(trig.pending)),
    }


def check_version(data: dict) -> None:
    if data.get("version") != STATE_VERSION:
        raise ValueError(f"unknown version {data.get('version')!r}")


def load_state(rt: EngineRuntime, data: dict) -> None:
    """Fill a new engine's runtime from :func:`dump_state`'s answer. Raises KeyError, TypeError,
    ValueError or IndexError on a malformed state. A trigger marked in flight without a job to
    run is re-armed."""
    rt.ids_issued = int(data.get("ids_issued", 0))
    rt.elapsed = float(data.get("elapsed", 0.0))
    config = data["config"]
    rt.config_set = bool(config["config_set"])
    rt.watch_roles = set(config["watch_roles"])
    rt.executors = {name: dict(ex) for name, ex in config["executors"]}
    for item in data["triggers"]:
        spec = item["spec"]
        trig = TriggerRecord(id=spec["id"], raw=spec, spec=parse_spec(spec))
        seed_rngs(trig, rt.seed)
        trig.status = item["status"]
        if trig.status not in STATUSES:
            raise ValueError(f"unknown status {trig.status!r}")
        trig.detected_at = item.get("detected_at")
        trig.fired_at = item.get("fired_at")
        trig.fire_count = int(item.get("fire_count", 0))
        trig.failure_count = int(item.get("failure_count", 0))
        trig.last_failure_at = item.get("last_failure_at")
        trig.attempts = int(item.get("attempts", 0))
        mark = item.get("next_mark")
        trig.next_mark = datetime.fromisoformat(mark) if mark else None
        trig.resolved = bool(item.get("resolved"))
        trig.anchor_key = item.get("anchor_key")
        trig.retiring = bool(item.get("retiring"))
        if item.get("rng") is not None:
            trig.rng = _rng_from_state(item["rng"])
        for i, state in (item.get("delay_rngs") or {}).items():
            trig.delay_rngs[int(i)] = _rng_from_state(state)
        trig.job = item.get("job")
        trig.pending = deque(item.get("pending") or [])
        if trig.job is None and trig.status in IN_FLIGHT:
            trig.status = "armed"  # nothing left to run; detection starts over
        rt.triggers[trig.id] = trig
    rt.events = list(data.get("events") or [])
    rt.events_tail.extend(data.get("events_tail") or [])
    rt.seq = int(data.get("seq", len(rt.events) + len(rt.events_tail)))


def _rng_state(rng: random.Random | None) -> list | None:
    if rng is None:
        return None
    version, internal, gauss = rng.getstate()
    return [version, list(internal), gauss]


def _rng_from_state(state: list) -> random.Random:
    rng = random.Random()
    rng.setstate((state[0], tuple(state[1]), state[2]))
    return rng
