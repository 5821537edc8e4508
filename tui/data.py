"""The hub client side of the TUI: everything it reads or does goes through a `Source`.

`HubSource` wraps a hub session (`agentenv_local.hub.connect()`: this process becomes the hub when none
runs). Its methods block (socket or HTTP calls), so the app calls them from worker threads.
`EventPump` turns the hub's live event stream into batches (one message per `interval`), so a
run emitting thousands of events a second costs a few repaints, not thousands.
`jobs_for` turns a task, eval or bundle into the runs to start (agentenv_local.hub.launch.Launcher starts them).
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from agentenv_local.hub.launch import Job
from agentenv_local.hub.launch import submit as submit_job
from agentenv_local.hub.methods import HubMethods
from agentenv_local.tasks.journal import journal_state

from .model import LIVE

HTTP_TIMEOUT_S = 5.0


class Stream(Protocol):
    def get(self, timeout: float | None = None) -> dict | None: ...
    def close(self) -> None: ...


class Source(Protocol):
    """What the TUI needs from the hub (a fake implements it for snapshot tests)."""

    def list_runs(self, limit: int = 200) -> list[dict]: ...
    def run_detail(self, run_id: str) -> dict: ...
    def run_events(self, run_id: str, after_id: int = 0) -> list[dict]: ...
    def task_steps(self, task_id: str, version: int | None) -> dict[str, dict]: ...
    def pending_reviews(self, run_id: str) -> list[dict]: ...
    def subscribe(self) -> Stream: ...
    def cancel(self, run_id: str) -> dict: ...
    def resume(self, run_id: str) -> dict: ...
    def review(self, review_id: str, decision: str) -> dict: ...
    def jobs_for(self, kind: str, target: str, k: int) -> list[Job]: ...
    def submit(self, job: Job) -> dict: ...
    def env_state(self, instance_id: str) -> dict | None: ...
    def clock_state(self, gateway_url: str) -> dict | None: ...
    def advance_clock(self, instance_id: str, seconds: float) -> dict: ...
    def human_pending(self, agent: dict) -> list[dict]: ...
    def human_conversation(self, agent: dict) -> dict: ...
    def human_reply(self, agent: dict, task_id: str, text: str, end: bool = False) -> dict: ...
    def describe(self) -> str: ...
    def close(self) -> None: ...


class HubSource:
    def __init__(self, session: Any):
        self.session = session
        self.hub = HubMethods(session)

    @classmethod
    def connect(cls, start: Any = None) -> HubSource:
        from agentenv_local.hub import connect

        return cls(connect(start=start, defer_linger=True))

    def describe(self) -> str:
        where = getattr(self.session.paths, "state_dir", "")
        return f"{'hub (this process)' if self.session.is_hub else 'client of the hub'} · {where}"

    # -- runs --
    def list_runs(self, limit: int = 200) -> list[dict]:
        from agentenv_local.query import Query

        return self.session.store.runs.list(Query("runs").limit(limit))

    def run_detail(self, run_id: str) -> dict:
        """The run record; while it runs, its context and verifications as its journal last recorded."""
        run = self.session.store.runs.get(run_id)
        if run.get("status") in LIVE:
            journal = self.session.store.runs.journal(run_id)
            if journal:
                state = journal_state(journal)
                run["context"] = state
                run["verifications"] = (state.get("metadata") or {}).get("verifications") or {}
        return run

    def run_events(self, run_id: str, after_id: int = 0) -> list[dict]:
        return self.session.store.events.query(run_id=run_id, after_id=after_id, limit=20000)

    def task_steps(self, task_id: str, version: int | None) -> dict[str, dict]:
        doc = self.session.store.documents.find("tasks", task_id, version)
        body = (doc or {}).get("body") or {}
        steps = body.get("steps") if isinstance(body, dict) else body
        return {s["id"]: s for s in steps or [] if isinstance(s, dict) and isinstance(s.get("id"), str)}

    def pending_reviews(self, run_id: str) -> list[dict]:
        rows = self.session.store.records.query({"collection": "reviews", "filters": [["run_id", "eq", run_id]]})
        return [{"review_id": r["id"], **r["body"]} for r in rows]

    def subscribe(self) -> Stream:
        return self.session.subscribe()

    # -- actions --
    def cancel(self, run_id: str) -> dict:
        return self.hub.cancel_run(run_id)

    def resume(self, run_id: str) -> dict:
        return self.hub.resume_run(run_id)

    def review(self, review_id: str, decision: str) -> dict:
        return self.hub.review(review_id, decision)

    def submit(self, job: Job) -> dict:
        return submit_job(self.session, job)

    def jobs_for(self, kind: str, target: str, k: int) -> list[Job]:
        """The runs to start: a bundle (its evals' tasks, else all its tasks, stored first), a stored task
        id, or a stored eval id; each k times."""
        from agentenv_local.errors import ValidationError

        target = target.strip()
        if not target:
            raise ValidationError(f"name a {kind} to run")
        group = f"tui-{secrets.token_hex(4)}"
        if kind == "task":
            doc = self.session.store.documents.get("tasks", target)
            return [Job(target, doc["version"], label=target, group_id=group if k > 1 else None) for _ in range(k)]
        if kind == "eval":
            doc = self.session.store.documents.get("evals", target)
            return [Job(t["task_id"], t.get("task_version"), label=t["task_id"], group_id=group)
                    for t in doc["body"]["tasks"] for _ in range(k)]
        from agentenv_local.bundles import find_bundle, load_bundle, materialize

        folder, package = find_bundle(target)
        loaded = load_bundle(folder, package)
        names: list[str] = []
        for ev in loaded.evals.values():
            names += [t for t in ev.task_names if t not in names]
        names = names or list(loaded.tasks)
        if not names:
            raise ValidationError(f"bundle {folder} has no tasks to run")
        result = materialize(self.session.store, loaded)
        return [Job(*result.task_versions[name], label=f"tasks/{name}.json", group_id=group if k > 1 else None)
                for name in names for _ in range(k)]

    # -- envs --
    def env_state(self, instance_id: str) -> dict | None:
        record = self.session.store.records.find("env_instance_state", instance_id)
        return (record or {}).get("body")

    def clock_state(self, gateway_url: str) -> dict | None:
        return _http_json("GET", gateway_url.rstrip("/") + "/clock/state")

    def advance_clock(self, instance_id: str, seconds: float) -> dict:
        return self.hub.advance_env_clock(instance_id, seconds)

    # -- human agents --
    def human_pending(self, agent: dict) -> list[dict]:
        return list((_human_call(agent, "pending") or {}).get("pending") or [])

    def human_conversation(self, agent: dict) -> dict:
        return (_human_call(agent, "conversation") or {}).get("conversations") or {}

    def human_reply(self, agent: dict, task_id: str, text: str, end: bool = False) -> dict:
        body: dict[str, Any] = {"task_id": task_id, "text": text}
        if end:
            body["end_conversation"] = True
        return _human_call(agent, "reply", body) or {}

    def close(self) -> None:
        self.session.close()


def _http_json(method: str, url: str, body: Any = None) -> Any:
    import httpx2

    try:
        with httpx2.Client(timeout=HTTP_TIMEOUT_S) as http:
            answer = http.request(method, url, json=body)
    except httpx2.HTTPError:
        return None
    if answer.status_code >= 400:
        return None
    try:
        return answer.json()
    except ValueError:
        return None


def _human_call(agent: dict, op: str, body: dict | None = None) -> dict | None:
    from agentenv_local.agents.human import (
        CONVERSATION_PATH,
        HUMAN_V1,
        PENDING_PATH,
        REPLY_PATH,
    )
    from agentenv_local.errors import AgentenvError

    path = {"pending": PENDING_PATH, "reply": REPLY_PATH, "conversation": CONVERSATION_PATH}[op]
    for ext in ((agent.get("a2a_card") or {}).get("capabilities") or {}).get("extensions") or []:
        if isinstance(ext, dict) and ext.get("uri") == HUMAN_V1:
            path = (((ext.get("params") or {}).get("methods") or {}).get(op) or {}).get("endpoint") or path
    url = (agent.get("a2a_url") or "").rstrip("/") + path
    import httpx2

    try:
        with httpx2.Client(timeout=HTTP_TIMEOUT_S) as http:
            answer = http.post(url, json=body) if op == "reply" else http.get(url)
    except httpx2.HTTPError as exc:
        raise AgentenvError(f"human agent {agent.get('agent_name')!r} did not answer: {exc}") from None
    try:
        payload = answer.json()
    except ValueError:
        payload = None
    if answer.status_code >= 400:
        detail = payload.get("detail") if isinstance(payload, dict) else answer.text[:200]
        raise AgentenvError(f"human agent {agent.get('agent_name')!r}: {detail}")
    return payload if isinstance(payload, dict) else None


def is_human(agent: dict) -> bool:
    if agent.get("human") or agent.get("a2a_agent_id") == "human":
        return True
    from agentenv_local.agents.human import HUMAN_V1

    card = agent.get("a2a_card") or {}
    return any(isinstance(e, dict) and e.get("uri") == HUMAN_V1
               for e in (card.get("capabilities") or {}).get("extensions") or [])


# -- the event pipeline ---------------------------------------------------------------------------
class EventPump:
    """Reads a `Stream` on a thread and hands `deliver` lists of events, at most one list per `interval`.

    `deliver` is called on the pump's thread (the app passes `post_message`, which is thread-safe).
    A `hub.gone` event is delivered at once and ends the pump.
    """

    def __init__(self, stream: Stream, deliver: Callable[[list[dict]], Any], interval: float = 0.05,
                 max_batch: int = 20000):
        self.stream = stream
        self.deliver = deliver
        self.interval = interval
        self.max_batch = max_batch
        self.received = 0
        self.batches = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="tui-events", daemon=True)

    def start(self) -> EventPump:
        self._thread.start()
        return self

    def _loop(self) -> None:
        batch: list[dict] = []
        first_at = 0.0
        while not self._stop.is_set():
            if not batch:
                event = self.stream.get(timeout=0.25)
                if event is None:
                    continue
                batch.append(event)
                first_at = time.monotonic()
            else:
                remaining = self.interval - (time.monotonic() - first_at)
                event = self.stream.get(timeout=remaining) if remaining > 0 else None
                if event is not None:
                    batch.append(event)
            self.received += event is not None
            gone = event is not None and event.get("kind") == "hub.gone"
            if gone or event is None or len(batch) >= self.max_batch or time.monotonic() - first_at >= self.interval:
                out, batch = batch, []
                self.batches += 1
                try:
                    self.deliver(out)
                except Exception:  # the app is closing
                    return
                if gone:
                    return

    def stop(self) -> None:
        self._stop.set()
        try:
            self.stream.close()
        except Exception:  # already closed
            pass
