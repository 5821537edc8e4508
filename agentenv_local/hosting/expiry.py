"""Instance lifetimes (`--ttl-seconds` on `env deploy` / `agent deploy`, as the reference's): a deployed env or
agent instance past its `expires_at_utc` is torn down by the hub's sweep, which runs on the hub's loop every
`SWEEP_INTERVAL_SECONDS` while the hub is up. An instance deployed without a TTL runs until it is torn down.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta, timezone
from typing import Any

log = logging.getLogger(__name__)

MIN_TTL_SECONDS = 60  # the reference's bounds
MAX_TTL_SECONDS = 1_209_600  # two weeks
SWEEP_INTERVAL_SECONDS = 5.0
EXPIRED_REASON = "its TTL ran out"


def expiry_fields(ttl_seconds: int | None, now: datetime | None = None) -> dict[str, Any]:
    """The record fields a TTL adds (`ttl_seconds`, `expires_at_utc`), or none without one."""
    if ttl_seconds is None:
        return {}
    if not MIN_TTL_SECONDS <= ttl_seconds <= MAX_TTL_SECONDS:
        from agentenv_local.errors import ValidationError

        raise ValidationError(f"ttl_seconds must be between {MIN_TTL_SECONDS} and {MAX_TTL_SECONDS}, "
                              f"got {ttl_seconds}")
    start = now or datetime.now(timezone.utc)
    return {"ttl_seconds": ttl_seconds,
            "expires_at_utc": (start + timedelta(seconds=ttl_seconds)).isoformat().replace("+00:00", "Z")}


def is_expired(record: dict, now: datetime) -> bool:
    """Whether a running instance's `expires_at_utc` has passed (a record without one never expires)."""
    stamp = record.get("expires_at_utc")
    if record.get("status") != "running" or not isinstance(stamp, str):
        return False
    try:
        expires = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return False
    return expires <= now


async def sweep_expired(envs: Any, agents: Any, now: datetime | None = None) -> list[str]:
    """Tear down every running env and agent instance past its TTL; the ids torn down. One that fails to stop
    is logged and tried again on the next sweep."""
    now = now or datetime.now(timezone.utc)
    done: list[str] = []
    for manager in (envs, agents):
        for record in manager.instances("running"):
            if not is_expired(record, now):
                continue
            try:
                await manager.teardown(record["instance_id"], EXPIRED_REASON)
                done.append(record["instance_id"])
            except Exception:
                log.exception("instance %s: teardown after its TTL failed", record["instance_id"])
    return done


async def sweep_forever(envs: Any, agents: Any, interval: float = SWEEP_INTERVAL_SECONDS) -> None:
    """The hub's sweep: every `interval` seconds until the task is cancelled (the hub stopping)."""
    while True:
        await asyncio.sleep(interval)
        try:
            await sweep_expired(envs, agents)
        except Exception:  # the store closing under it: the hub is stopping anyway
            log.exception("the TTL sweep failed")
