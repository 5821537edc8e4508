"""Long-lived agent instances in the hub (`agentenv agent deploy`): started in the hub or as subprocesses,
recorded in the store's `agent_instances` records, stopped by `agentenv agent teardown` or with the hub.

Runs deploy their own agents with `deploy_agent` (those stop with the run); these are for people and
editors that want an agent to stay up, e.g. behind `agentenv up`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from typing import Any

from agentenv_local.agents import registry
from agentenv_local.errors import AgentenvError, NotFoundError
from agentenv_local.hosting.leftovers import AGENT_INSTANCES
from agentenv_local.procs import cmdline, pid_alive, stop_group

from .hosted import HostedAgent, resolve_spec, serve_in_hub, spawn

COLLECTION = AGENT_INSTANCES

# In the command line of every agent subprocess (`python -m agentenv_local.agents SPEC`, hosted.spawn).
AGENT_SERVER_MARK = b"agentenv_local.agents"


class AgentInstances:
    def __init__(self, store: Any, paths: Any):
        self.store = store
        self.paths = paths
        self._hosted: dict[str, HostedAgent] = {}
        self._sweep()

    def _sweep(self) -> None:
        """Instances a dead hub left: their in-hub servers died with it; subprocesses are stopped (with their
        process group), but only a pid that still is an agent server: the number may be another process's now."""
        for rec in self.store.records.query({"collection": COLLECTION, "filters": [["status", "eq", "running"]]}):
            body = dict(rec["body"])
            pid = int(body.get("pid") or 0)
            if pid and pid_alive(pid) and AGENT_SERVER_MARK in cmdline(pid):
                stop_group(pid)
            body.update(status="terminated", terminated_reason="the hub that ran it stopped")
            self.store.records.save(COLLECTION, rec["id"], body)

    def instances(self, status: str | None = None) -> list[dict]:
        from agentenv_local.query import Query

        query = Query(COLLECTION)
        if status is not None:  # in SQL: the hub's sweep asks every 5 s, and stopped instances pile up
            query.where("status", "eq", status)
        rows = [r["body"] for r in self.store.records.query(query)]
        return sorted(rows, key=lambda r: r.get("created_at", 0), reverse=True)

    async def deploy(self, agent_id: str, version: int | None = None, *, runtime: str = "in_hub",
                     config: dict | None = None, ttl_seconds: int | None = None) -> dict:
        """Start (or reach) the agent and record the instance; `ttl_seconds` records `expires_at_utc`, when the
        hub's sweep tears it down (hosting/expiry.py)."""
        from agentenv_local.agents.client import A2AClient
        from agentenv_local.hosting.expiry import expiry_fields

        lifetime = expiry_fields(ttl_seconds)  # a bad TTL is refused before anything starts

        spec = registry.resolve(self.store, agent_id, version)
        instance_id = f"agent-{uuid.uuid4().hex[:12]}"
        if spec["url"]:
            url, hosted = spec["url"], None
        elif runtime == "subprocess":
            hosted = await spawn(resolve_spec(spec["spec"]), {}, env_vars=spec["env_vars"],
                                 log_path=self.paths.logs_dir / f"{instance_id}.log")
            url = hosted.url
        else:
            hosted = await serve_in_hub(resolve_spec(spec["spec"]), {})
            url = hosted.url
        try:
            async with A2AClient(url, timeout=30) as client:
                card = await client.card()
                merged = {**spec["config"], **(config or {})}
                if merged:
                    await client.agent_config_set(**merged)
        except AgentenvError:
            if hosted is not None:
                await hosted.stop()
            raise
        if hosted is not None:
            self._hosted[instance_id] = hosted
        record = {"instance_id": instance_id, "agent_id": agent_id, "agent_version": spec["version"], "a2a_url": url,
                  "runtime": hosted.runtime if hosted else "url", "pid": hosted.pid if hosted else None,
                  "card_name": card.get("name"), "status": "running", "created_at": time.time(), **lifetime}
        self.store.records.save(COLLECTION, instance_id, record)
        return record

    async def teardown(self, instance_id: str, reason: str = "torn down") -> dict:
        found = self.store.records.find(COLLECTION, instance_id)
        if found is None:
            raise NotFoundError(f"no agent instance {instance_id!r}", hint="see `agentenv agent instances`")
        hosted = self._hosted.pop(instance_id, None)
        if hosted is not None:
            await hosted.stop()
        body = {**found["body"], "status": "terminated", "terminated_reason": reason, "terminated_at": time.time()}
        self.store.records.save(COLLECTION, instance_id, body)
        return body

    async def aclose(self) -> None:
        for instance_id in list(self._hosted):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.teardown(instance_id, "the hub stopped"), 15)
