"""The AgentEnv extension endpoints of the A2A server (``/ext/...``): agent-config/v1, mcp-config/v1,
skill-config/v1, peer-agents/v1 and trajectory/v1 (triggers/v1 is ``triggers.py``). Their errors are HTTP
400/404/409 with ``{"detail": "..."}`` (``ExtensionError``)."""

from __future__ import annotations

import re
import uuid
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from .base import Agent
from .peers import PEER_TOOLS_PATH, PEER_TOOLS_SERVER

if TYPE_CHECKING:
    from .task_records import TaskRecord

MAX_TRAJECTORY_READ = 1000

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


class ExtensionError(Exception):
    def __init__(self, status: int, detail: str):
        super().__init__(detail)
        self.status = status
        self.detail = detail


def _pydantic_detail(exc: ValidationError) -> str:
    problems = []
    for err in exc.errors(include_url=False, include_input=False):
        where = ".".join(str(x) for x in err["loc"]) or "body"
        problems.append(f"{where}: {err['msg']}")
    return "; ".join(problems)


def _only(body: dict, allowed: set[str]) -> None:
    unknown = set(body) - allowed
    if unknown:
        raise ExtensionError(400, f"unknown field(s): {', '.join(sorted(unknown))} (accepted: "
                                  f"{', '.join(sorted(allowed))})")


class ExtensionEndpoints:
    """The extension handlers, mixed into ``AgentRuntime`` (which owns the state they read and change)."""

    agent: Agent
    config: dict[str, Any]
    mcp_servers: dict[str, dict[str, Any]]
    skills: list[dict[str, Any]]
    peers: list[dict[str, Any]]
    tasks: OrderedDict[str, TaskRecord]
    contexts: dict[str, list[str]]

    def task_config(self) -> Any:
        return self.agent.config_model.model_validate(self.config)

    def agent_config_set(self, body: dict) -> dict:
        model = self.agent.config_model
        try:
            validated = model.model_validate({**self.config, **body})
        except ValidationError as e:
            raise ExtensionError(400, _pydantic_detail(e)) from None
        for field in ("name", "description"):
            if field in body and (not isinstance(getattr(validated, field), str)
                                  or not getattr(validated, field).strip()):
                raise ExtensionError(400, f"{field}: must be a non-empty string")
        dumped = validated.model_dump(mode="json")
        self.config.update({k: dumped[k] for k in body})
        return {"status": "updated"}

    def agent_config_get(self) -> dict:
        return {"config": self.task_config().model_dump(mode="json")}

    def mcp_add(self, body: dict) -> dict:
        _only(body, {"url", "headers", "name"})
        url = body.get("url")
        if not isinstance(url, str) or not url.strip():
            raise ExtensionError(400, "url: must be a non-empty string")
        url = url.strip()
        headers = body.get("headers")
        if headers is not None and (not isinstance(headers, dict)
                                    or not all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items())):
            raise ExtensionError(400, "headers: must be an object of string values")
        name = body.get("name")
        if name is not None and (not isinstance(name, str) or not _NAME.match(name)):
            raise ExtensionError(400, f"name: must match {_NAME.pattern}")
        if name == PEER_TOOLS_SERVER:
            raise ExtensionError(400, f"name: {PEER_TOOLS_SERVER!r} is reserved for the peer-agents/v1 tools "
                                      f"this agent serves at {PEER_TOOLS_PATH}")
        for existing, reg in self.mcp_servers.items():
            if reg["url"] == url:
                raise ExtensionError(409, f"MCP URL {url!r} is already registered as {existing!r}")
        name = name or f"mcp_{uuid.uuid4().hex[:8]}"
        if name in self.mcp_servers:
            raise ExtensionError(409, f"MCP name {name!r} is already registered")
        self.mcp_servers[name] = {"url": url, "headers": dict(headers) if headers else None}
        return {"status": "added", "name": name, "url": url}

    def mcp_list(self) -> dict:
        return {"mcp_servers": {n: {"url": r["url"], "has_headers": bool(r.get("headers"))}
                                for n, r in self.mcp_servers.items()}}

    def skill_add(self, body: dict) -> dict:
        if "skill_bundle" in body:
            raise ExtensionError(400, "skill_bundle: bundle skills (object grants) are not supported by this agent; "
                                      "send an inline skill {name, description, skill_md}")
        _only(body, {"name", "description", "skill_md"})
        name = body.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            raise ExtensionError(400, f"name: must match {_NAME.pattern}")
        for field in ("description", "skill_md"):
            if not isinstance(body.get(field), str):
                raise ExtensionError(400, f"{field}: must be a string")
        taken = {s.get("name") for s in self.agent.skills} | {s["name"] for s in self.skills}
        if name in taken:
            raise ExtensionError(409, f"skill {name!r} is already registered")
        self.skills.append({"name": name, "description": body["description"], "skill_md": body["skill_md"]})
        return {"name": name}

    def skill_list(self) -> dict:
        skills = {str(s.get("name")): {"description": str(s.get("description", ""))} for s in self.agent.skills}
        skills.update({s["name"]: {"description": s["description"]} for s in self.skills})
        return {"skills": skills}

    def peers_set(self, body: dict) -> dict:
        _only(body, {"peers"})
        peers = body.get("peers")
        if not isinstance(peers, list):
            raise ExtensionError(400, "peers: must be a list")
        clean = []
        for i, peer in enumerate(peers):
            if not isinstance(peer, dict):
                raise ExtensionError(400, f"peers[{i}]: must be an object")
            unknown = set(peer) - {"name", "url", "card", "description"}
            if unknown:
                raise ExtensionError(400, f"peers[{i}]: unknown field(s) {', '.join(sorted(unknown))}")
            for field in ("name", "url"):
                if not isinstance(peer.get(field), str) or not peer[field]:
                    raise ExtensionError(400, f"peers[{i}].{field}: must be a non-empty string")
            clean.append({"name": peer["name"], "url": peer["url"], "card": peer.get("card") or {},
                          "description": peer.get("description")})
        names = [p["name"] for p in clean]
        if len(set(names)) != len(names):
            raise ExtensionError(400, "peers: names must be unique")
        self.peers = clean
        return {"status": "updated", "peers": len(clean)}

    def peers_list(self) -> dict:
        return {"peers": [{"name": p["name"], "url": p["url"], "description": p["description"]} for p in self.peers]}

    def trajectory_get(self, body: dict) -> dict:
        if "objects" in body:
            raise ExtensionError(400, "objects: trajectory uploads through object grants are not supported by this "
                                      "agent; read the events inline")
        _only(body, {"task_id", "context_id", "after", "limit"})
        task_id, context_id = body.get("task_id"), body.get("context_id")
        if (task_id is None) == (context_id is None):
            raise ExtensionError(400, "give exactly one of task_id or context_id")
        for field, value in (("task_id", task_id), ("context_id", context_id)):
            if value is not None and (not isinstance(value, str) or not value):
                raise ExtensionError(400, f"{field}: must be a non-empty string")
        after, limit = body.get("after"), body.get("limit")
        cursor = "after" in body
        if cursor and (isinstance(after, bool) or not isinstance(after, int) or after < 0):
            raise ExtensionError(400, "after: must be a non-negative integer")
        if limit is not None:
            if not cursor:
                raise ExtensionError(400, "limit: only with after (a cursor read)")
            if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_TRAJECTORY_READ:
                raise ExtensionError(400, f"limit: must be an integer from 1 to {MAX_TRAJECTORY_READ}")
        if task_id is not None:
            record = self.tasks.get(task_id)
            if record is None:
                raise ExtensionError(404, f"unknown task {task_id!r}")
            logs = [record.log]
        else:
            assert context_id is not None  # exactly one of them, checked above
            ids = self.contexts.get(context_id)
            if not ids:
                raise ExtensionError(404, f"unknown context {context_id!r}")
            logs = [self.tasks[t].log for t in ids]
        if not cursor:
            if task_id is not None and not logs[0].sealed:
                raise ExtensionError(404, f"no completed trajectory for task {task_id!r} yet (it is "
                                          f"{logs[0].state.value}); read events with a cursor: "
                                          '{"task_id", "after": 0}')
            return {"trajectory": [e for log in logs for e in log.events()]}
        assert isinstance(after, int)  # a cursor read: checked above
        total = sum(len(log) for log in logs)
        if after > total:
            raise ExtensionError(400, f"after={after} is past the trajectory's {total} events")
        want = limit or MAX_TRAJECTORY_READ
        events: list[dict] = []
        skip = after
        for log in logs:
            n = len(log)
            if skip >= n:
                skip -= n
                continue
            events.extend(log.events(skip, want - len(events)))
            skip = 0
            if len(events) >= want:
                break
        last = logs[-1]
        nxt = after + len(events)
        fmt = next((log.format for log in logs if log.format), None)
        return {"context_id": last.context_id, "task_id": last.task_id, "state": last.state.value, "format": fmt,
                "events": events, "next": nxt, "has_more": nxt < total}
