"""Env pools: an instance's in-hub env servers, reset from a clean snapshot, kept for the next deploy of the same
env version with the same deploy options (the pool key), instead of being stopped and started again.

    pool = EnvPool(PoolSettings(size=4, idle_seconds=300))
    slot = pool.take(key)                        # an idle slot, or None: deploy cold, then capture_clean(...)
    reason = await reset_slot(slot)              # when the episode's instance is torn down; None: as clean
    pool.put_back(slot) if reason is None and pool.has_room(slot.key) else ...stop it

What a slot keeps is the loaded Env objects (and their folder), never a gateway: every deploy builds a fresh
gateway around them, so its changelog, trajectory, clock, triggers, RBAC rules and sessions start empty by
construction. The Envs are reset through their own data plane and checked against what they were right after
the cold deploy (the clean snapshot): `data/get`, the tools they serve, and their plain attributes. A slot that
does not come back identical is stopped, never pooled. Which instances get a slot at all is manager.py's
decision (`poolable`). See docs/envs.md "Env pools".
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentenv_local.hosting.leftovers import ENV_POOL_SLOTS as SLOTS  # (`agentenv env instances` lists the pooled)
from agentenv_local.hosting.leftovers import LEASED, POOLED  # a slot's status: waiting in the pool, or in use

from .instance import Instance, utc_now

SLOT_PREFIX = "envp-"  # slot ids


@dataclass(frozen=True)
class PoolSettings:
    size: int = 4  # idle slots kept per key; 0: no pools
    idle_seconds: float = 300.0  # an idle slot older than this is stopped


def pool_settings(state_dir: str | Path) -> PoolSettings:
    """The project's `[envs.pool]` settings (the defaults when the config cannot be read)."""
    try:
        from agentenv_local.config import load_config

        settings = load_config(Path(state_dir).parent).settings().envs.pool
    except Exception:  # unreadable config: the defaults; the hub reports a bad config elsewhere
        return PoolSettings()
    return PoolSettings(size=settings.size, idle_seconds=settings.idle_seconds)


def pool_key(doc: dict, *, gateway_mode: str | None, control_plane_auth: bool, options: dict) -> tuple:
    """What makes two deploys interchangeable: the env version and every deploy option that changes the
    instance. (RBAC rules, the clock and triggers are set after the deploy, on the fresh gateway.)"""
    return (doc["id"], doc["version"], gateway_mode, control_plane_auth, options.get("sandbox_type"),
            options.get("cpu"), options.get("memory_mb"))


@dataclass
class CleanChild:
    """One in-hub server of a slot and what it looked like right after its cold deploy."""

    name: str
    env: Any  # the loaded Env object
    info: dict  # its entry in the instance record's children
    data: list  # its data/get parts
    tools: list  # its tools/list entries
    attrs: str  # its plain (JSON) attributes, as JSON


@dataclass
class Slot:
    slot_id: str
    key: tuple
    env_id: str
    env_version: int
    folder: Path
    children: list[CleanChild]
    origin: Instance  # the cold deploy's instance: the providers that started the servers stop them with it
    providers: list[Any]  # those providers (EnvProvider)
    created_at_utc: str = field(default_factory=utc_now)
    uses: int = 1
    idle_since: float = 0.0  # time.monotonic() when it was put back
    leased_to: str | None = None
    misbehaved: str | None = None  # what the env did (its in-hub guard said so): never pooled again

    def record(self, status: str, **extra: Any) -> dict:
        """Its record in SLOTS (so `agentenv env instances` and the sweep see it)."""
        return {"instance_id": self.slot_id, "env_id": self.env_id, "env_version": self.env_version,
                "status": status, "pool_slot": True, "leased_to": self.leased_to, "uses": self.uses,
                "children": [c.info for c in self.children], "created_at_utc": self.created_at_utc,
                "folder": self.folder.name,
                "mcp_url": None, "gateway_url": None, "run_id": None, **extra}


class EnvPool:
    """The idle slots per key and the leased ones per instance id. Used on the hub's loop only, so taking a
    slot is atomic: two deploys never get the same one."""

    def __init__(self, settings: PoolSettings):
        self.settings = settings
        self._idle: dict[tuple, list[Slot]] = {}
        self._leased: dict[str, Slot] = {}

    def take(self, key: tuple) -> Slot | None:
        slots = self._idle.get(key)
        if not slots:
            return None
        slot = slots.pop()  # the most recently used: the least likely to expire
        if not slots:
            del self._idle[key]
        return slot

    def lease(self, slot: Slot, instance_id: str) -> None:
        slot.leased_to = instance_id
        self._leased[instance_id] = slot

    def release(self, instance_id: str) -> Slot | None:
        slot = self._leased.pop(instance_id, None)
        if slot is not None:
            slot.leased_to = None
        return slot

    def has_room(self, key: tuple) -> bool:
        return len(self._idle.get(key, ())) < self.settings.size

    def put_back(self, slot: Slot) -> None:
        slot.idle_since = time.monotonic()
        self._idle.setdefault(slot.key, []).append(slot)

    def expired(self) -> list[Slot]:
        """Remove and return the idle slots idle for idle_seconds or more."""
        limit = time.monotonic() - self.settings.idle_seconds
        gone = []
        for key in list(self._idle):
            keep = [s for s in self._idle[key] if s.idle_since > limit]
            gone += [s for s in self._idle[key] if s.idle_since <= limit]
            if keep:
                self._idle[key] = keep
            else:
                del self._idle[key]
        return gone

    def drain(self) -> list[Slot]:
        """Remove and return every idle slot."""
        gone = [s for slots in self._idle.values() for s in slots]
        self._idle.clear()
        return gone

    def idle(self) -> list[Slot]:
        return [s for slots in self._idle.values() for s in slots]

    def remove(self, slot_id: str) -> Slot | None:
        """Take the idle slot `slot_id` out of the pool (None: no such idle slot)."""
        for key, slots in list(self._idle.items()):
            for slot in slots:
                if slot.slot_id == slot_id:
                    slots.remove(slot)
                    if not slots:
                        del self._idle[key]
                    return slot
        return None


def sweep_slots(store: Any, root: Path) -> list[str]:
    """What a dead hub's pools left: slot records still pooled or leased (their Envs died with the hub) are
    recorded terminated and their folders removed."""
    from agentenv_local.query import Query

    swept = []
    for status in (POOLED, LEASED):
        for rec in store.records.query(Query(SLOTS).where("status", "eq", status)):
            body = {**rec["body"], "status": "terminated", "status_reason": "its hub is gone",
                    "terminated_at_utc": utc_now()}
            store.records.save(SLOTS, rec["id"], body)
            folder = body.get("folder")
            if isinstance(folder, str) and folder and "/" not in folder and folder not in (".", ".."):
                shutil.rmtree(root / folder, ignore_errors=True)
            swept.append(rec["id"])
    return swept


def _rpc(method: str, params: dict | None = None) -> dict:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}


def plain_attrs(env: Any) -> str:
    """The env object's attributes that are plain JSON values, as one JSON text (the rest cannot be compared)."""
    plain = {}
    for name, value in vars(env).items():
        if name.startswith("_ae"):
            continue
        try:
            plain[name] = json.dumps(value, sort_keys=True)
        except (TypeError, ValueError):
            continue
    return json.dumps(plain, sort_keys=True)


async def _data(env: Any, method: str, params: dict | None = None) -> Any:
    """One data-plane call to an in-hub Env; its result, or RuntimeError with its error."""
    answer = await env.data_rpc(_rpc(method, params))
    if "error" in answer:
        error = answer["error"]
        raise RuntimeError(f"{method}: {error.get('message') if isinstance(error, dict) else error}")
    return answer.get("result")


async def capture_clean(name: str, env: Any, info: dict) -> CleanChild | str:
    """The clean state of a freshly deployed in-hub server, or why it cannot be pooled (no data plane)."""
    try:
        result = await _data(env, "data/get")
    except Exception as e:
        return f"{name} cannot export its data ({e})"
    parts = result.get("parts") if isinstance(result, dict) else None
    if not isinstance(parts, list):
        return f"{name}: data/get returned no parts list"
    return CleanChild(name, env, dict(info), parts, env.list_tools(), plain_attrs(env))


async def _reset_child(child: CleanChild) -> str | None:
    """Put one server back to its clean state: data/reset, and data/add of the clean parts when a reset alone
    does not give them back; None when data/get, its tools and its plain attributes then match the clean ones."""
    try:
        await _data(child.env, "data/reset")
        parts = ((await _data(child.env, "data/get")) or {}).get("parts")
        if parts != child.data and child.data:
            await _data(child.env, "data/add", {"parts": child.data})
            parts = ((await _data(child.env, "data/get")) or {}).get("parts")
    except Exception as e:
        return f"{child.name}: its reset failed ({e})"
    if parts != child.data:
        return f"{child.name}: its data after the reset differs from the clean snapshot"
    if child.env.list_tools() != child.tools:
        return f"{child.name}: the tools it serves changed (a description or the tool set)"
    if plain_attrs(child.env) != child.attrs:
        return f"{child.name}: an attribute outside its data plane changed"
    return None


async def reset_slot(slot: Slot) -> str | None:
    """Reset every server of the slot; None when all are as clean as after the cold deploy, else why not."""
    if slot.misbehaved:
        return f"it misbehaved in the hub ({slot.misbehaved})"
    for child in slot.children:
        reason = await _reset_child(child)
        if reason is not None:
            return reason
    return None


def watch_misbehaving(slot: Slot) -> None:
    """Note on the slot when an in-hub guard (hub_guard.py) reports its env misbehaving, so it is not pooled
    again. Called once, when the slot is made."""
    for child in slot.children:
        guard = getattr(child.env._ae_runtime(), "guard", None)
        report = getattr(guard, "on_misbehaving", None)
        if guard is None or report is None:
            continue

        def noted(what: str, _report: Any = report) -> None:
            slot.misbehaved = slot.misbehaved or what
            _report(what)

        guard.on_misbehaving = noted
