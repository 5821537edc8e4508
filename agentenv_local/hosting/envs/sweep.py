"""What a dead hub left: instances recorded `running` whose hub is gone. Their subprocesses are stopped, their
containers removed, their folders deleted, and they are recorded terminated."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path
from typing import Any

from agentenv_local.procs import pid_alive, stop_group

from .instance import INSTANCES, utc_now


def sweep_dead_hub(store: Any, root: Path) -> list[str]:
    """Terminate every instance recorded running (the hub that ran it is gone); the ids swept."""
    from agentenv_local.query import Query

    swept = []
    for rec in store.records.query(Query(INSTANCES)):
        body = rec["body"]
        if body.get("status") != "running":
            continue
        kill_children(body)
        body.update(status="terminated", status_reason="hub stopped", terminated_at_utc=utc_now())
        store.records.save(INSTANCES, rec["id"], body)
        shutil.rmtree(root / rec["id"], ignore_errors=True)
        swept.append(rec["id"])
    return swept


def kill_children(body: dict) -> None:
    """What a recorded instance left: kill its subprocesses, remove its containers."""
    for child in body.get("children") or []:
        pid = child.get("pid")
        if pid and pid_alive(int(pid)):
            stop_group(int(pid))
        if child.get("sandbox_id") and child.get("sandbox_type") == "podman":
            remove_container(str(child["sandbox_id"]))


def remove_container(sandbox_id: str) -> None:
    """Remove a container a dead hub left (podman rm); no podman here means nothing of ours can be running."""
    with contextlib.suppress(Exception):
        from agentenv_local.plugins import registry

        provider = registry().get("sandbox_providers", "podman")
        if provider is not None:
            provider.remove_leftover(sandbox_id)
