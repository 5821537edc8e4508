"""The envs as an episode left them: before teardown the runner reads, for each env the run deployed, its
changelog (`GET /changes`, one page) and its gateway's `/state`, and keeps them with the run (`env_end`) so a
replay or `runs diff` can compare them with the original episode (docs/tasks/replay.md).

One call each, in-process for an env in this hub (inproc.py); bounded (a changelog past MAX_CHANGES rows, or a
`/state` past MAX_STATE_BYTES, is cut and says so). A failure to read is recorded, never fails the run.
AGENTENV_CAPTURE_ENV_STATE=0 turns it off (enabled()). What is
kept is what the gateway answers an admin (the env masks what it masks) with the hub's known secrets masked.
"""

from __future__ import annotations

import json
import os
from typing import Any

MAX_CHANGES = 2000  # rows of one env's changelog kept (`changes_cut` counts what more there was)
MAX_STATE_BYTES = 256 * 1024  # a larger `/state` is kept as `{"cut": size}`
TIMEOUT_S = 10.0


def enabled() -> bool:
    """On unless the hub runs with AGENTENV_CAPTURE_ENV_STATE=0 (to measure what it costs: bench_episodes.py)."""
    return os.environ.get("AGENTENV_CAPTURE_ENV_STATE", "1") != "0"


async def capture_envs(services: Any, state: dict) -> dict[str, dict]:
    """deploy step id -> {env_id, env_version, changes (rows, or None: the env keeps no changelog),
    changes_cut?, state, error?} for each env still deployed."""
    out: dict[str, dict] = {}
    for record in state.get("deployed_envs") or []:
        if not isinstance(record, dict) or record.get("torn_down") or not record.get("gateway_url"):
            continue
        key = str(record.get("step_id") or record.get("instance_id") or record.get("env_id"))
        try:
            out[key] = await _capture_one(services, record)
        except Exception as exc:  # an env that does not answer: recorded, not a failure of the run
            out[key] = {"env_id": record.get("env_id"), "env_version": record.get("env_version"),
                        "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    return out


async def _capture_one(services: Any, record: dict) -> dict:
    import httpx2

    from agentenv_local.http_clients import async_client

    manager = getattr(services, "envs", None)
    token = manager.admin_token(record["instance_id"]) if manager is not None and record.get("instance_id") else None
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    entry: dict[str, Any] = {"env_id": record.get("env_id"), "env_version": record.get("env_version")}
    async with async_client(base_url=str(record["gateway_url"]).rstrip("/"), headers=headers,
                            timeout=httpx2.Timeout(TIMEOUT_S, connect=5)) as http:
        r = await http.get("/changes", params={"after_id": 0, "limit": MAX_CHANGES})
        if r.status_code == 404:
            entry["changes"] = None
        elif r.status_code >= 300:
            entry["changes"] = None
            entry["error"] = f"GET /changes -> {r.status_code}: {r.text[:300]}"
        else:
            page = r.json()
            entry["changes"] = list(page.get("changes") or [])
            if page.get("has_more"):
                entry["changes_cut"] = True
        r = await http.get("/state")
        if r.status_code >= 300:
            entry["error"] = f"GET /state -> {r.status_code}: {r.text[:300]}"
        elif len(r.content) > MAX_STATE_BYTES:
            entry["state"] = {"cut": len(r.content)}
        else:
            entry["state"] = r.json()
    return json.loads(json.dumps(entry, default=str))  # plain JSON, as the store keeps it
