"""A fixed data source for the snapshot tests only (the Pilot tests use a real hub).

The office run is a real run of examples/office recorded once (times shifted to T0); the other
runs are written here to show every state the screens draw.
"""

from __future__ import annotations

import copy
import json
import queue
from pathlib import Path

from agentenv_local.hub.launch import Job

T0 = 1_800_000_000.0
DATA = json.loads((Path(__file__).parent / "data" / "office_run.json").read_text())
OFFICE_ID = DATA["run"]["run_id"]

DEMO_ID = "demo-20270115-0a1b2c3d"
HUMAN_ID = "support-20270115-9f8e7d6c"

_DEMO_STEPS = {
    "box": {"id": "box", "type": "deploy_sandbox", "sandbox_name": "box"},
    "load": {"id": "load", "type": "load_artifact", "artifact_id": "greeting", "sandbox_name": "box"},
    "lint": {"id": "lint", "type": "run_code", "depends_on": ["box"], "fail_task_on_error": False},
    "flaky": {"id": "flaky", "type": "verify_sandbox", "depends_on": ["box"]},
    "check": {"id": "check", "type": "verify_sandbox", "depends_on": ["load", "lint", "flaky"]},
    "report": {"id": "report", "type": "collect_artifacts", "depends_on": ["check", "box"]},
}


def _demo_run() -> dict:
    return {
        "run_id": DEMO_ID, "task_id": "@local/demo/demo", "task_name": "demo", "task_version": 3, "status": "running",
        "created_at": T0 - 30, "started_at": T0 - 29, "finished_at": None, "score": None, "error": None,
        "steps": {
            "box": {"status": "passed", "type": "deploy_sandbox", "duration_s": 0.8, "started_at": T0 - 29},
            "load": {"status": "running", "type": "load_artifact", "started_at": T0 - 12.5},
            "lint": {"status": "failed (tolerated)", "type": "run_code", "duration_s": 2.1,
                     "error": "lint.py exited 1: 3 warnings"},
            "flaky": {"status": "retrying", "type": "verify_sandbox", "started_at": T0 - 3},
            "check": {"status": "waiting", "type": "verify_sandbox"},
            "report": {"status": "waiting", "type": "collect_artifacts"},
        },
        "levels": [["box"], ["load", "lint", "flaky"], ["check"], ["report"]],
        "edges": {"box": [], "load": ["box"], "lint": ["box"], "flaky": ["box"], "check": ["load", "lint", "flaky"],
                  "report": ["check", "box"]},
        "context": {"deployed_envs": [], "deployed_agents": [], "prompt_responses": [], "metadata": {}},
        "verifications": {},
    }


def _demo_events() -> list[dict]:
    return [
        {"event_id": 1, "run_id": DEMO_ID, "kind": "step.started", "step_id": "box", "at": T0 - 29,
         "body": {"type": "deploy_sandbox", "index": 1}},
        {"event_id": 2, "run_id": DEMO_ID, "kind": "step.log", "step_id": "box", "at": T0 - 28.5,
         "body": {"message": "sandbox box (process) is up"}},
        {"event_id": 3, "run_id": DEMO_ID, "kind": "step.finished", "step_id": "box", "at": T0 - 28.2,
         "body": {"status": "passed", "duration_s": 0.8, "error": None, "type": "deploy_sandbox"}},
        {"event_id": 4, "run_id": DEMO_ID, "kind": "step.started", "step_id": "lint", "at": T0 - 28,
         "body": {"type": "run_code", "index": 3}},
        {"event_id": 5, "run_id": DEMO_ID, "kind": "step.log", "step_id": "lint", "at": T0 - 26,
         "body": {"message": "lint.py: 3 warnings", "level": "warning"}},
        {"event_id": 6, "run_id": DEMO_ID, "kind": "step.finished", "step_id": "lint", "at": T0 - 25.9,
         "body": {"status": "failed (tolerated)", "duration_s": 2.1, "error": "lint.py exited 1: 3 warnings",
                  "traceback": "Traceback (most recent call last):\n  File \"lint.py\", line 9\nSystemExit: 1",
                  "type": "run_code"}},
    ]


def _human_run() -> dict:
    agent = {"agent_name": "person", "a2a_agent_id": "human", "a2a_url": "http://127.0.0.1:1/", "step_id": "person",
             "human": True}
    return {
        "run_id": HUMAN_ID, "task_id": "@local/support/support", "task_name": "support", "task_version": 1,
        "status": "running", "created_at": T0 - 300, "started_at": T0 - 299, "finished_at": None, "score": None,
        "error": None,
        "steps": {"person": {"status": "passed", "type": "deploy_agent", "duration_s": 0.3},
                  "ask": {"status": "running", "type": "prompt_agent", "started_at": T0 - 200},
                  "gate": {"status": "running", "type": "review", "started_at": T0 - 100}},
        "levels": [["person"], ["ask", "gate"]],
        "edges": {"person": [], "ask": ["person"], "gate": ["person"]},
        "context": {"deployed_envs": [], "deployed_agents": [agent], "prompt_responses": [], "metadata": {}},
        "verifications": {},
    }


RUNS = [
    {"run_id": HUMAN_ID, "task_id": "@local/support/support", "task_name": "support", "task_version": 1,
     "status": "running", "created_at": T0 - 300, "started_at": T0 - 299, "finished_at": None, "score": None},
    {"run_id": DEMO_ID, "task_id": "@local/demo/demo", "task_name": "demo", "task_version": 3, "status": "running",
     "created_at": T0 - 30, "started_at": T0 - 29, "finished_at": None, "score": None},
    {"run_id": OFFICE_ID, "task_id": DATA["run"]["task_id"], "task_name": "week", "task_version": 1,
     "status": "passed", "created_at": DATA["run"]["created_at"], "started_at": DATA["run"]["started_at"],
     "finished_at": DATA["run"]["finished_at"], "score": 1.0},
    {"run_id": "hello-20270114-11aa22bb", "task_id": "@local/agentenv-local/hello/hello", "task_name": "hello",
     "task_version": 1, "status": "failed", "created_at": T0 - 7200, "started_at": T0 - 7199,
     "finished_at": T0 - 7190.5, "score": 0.5},
    {"run_id": "hello-20270113-33cc44dd", "task_id": "@local/agentenv-local/hello/hello", "task_name": "hello",
     "task_version": 1, "status": "interrupted", "created_at": T0 - 90000, "started_at": T0 - 89999,
     "finished_at": None, "score": None},
]


class _Stream:
    def __init__(self) -> None:
        self.queue: queue.Queue = queue.Queue()

    def get(self, timeout=None):
        try:
            return self.queue.get(timeout=timeout)
        except queue.Empty:
            return None

    def close(self) -> None:
        pass


class FakeSource:
    def __init__(self) -> None:
        self.stream = _Stream()
        self.calls: list[tuple] = []

    def describe(self) -> str:
        return "hub (this process) · /project/.agentenv"

    def list_runs(self, limit: int = 200) -> list[dict]:
        return copy.deepcopy(RUNS)

    def run_detail(self, run_id: str) -> dict:
        if run_id == DEMO_ID:
            return _demo_run()
        if run_id == HUMAN_ID:
            return _human_run()
        return copy.deepcopy(DATA["run"])

    def run_events(self, run_id: str, after_id: int = 0) -> list[dict]:
        if run_id == DEMO_ID:
            events = _demo_events()
        elif run_id == OFFICE_ID:
            events = copy.deepcopy(DATA["events"])
        else:
            events = [{"event_id": 9, "run_id": HUMAN_ID, "kind": "review.pending", "step_id": "gate", "at": T0 - 99,
                       "body": {"review_id": f"{HUMAN_ID}:gate", "label": "refund over $500"}}]
        return [e for e in events if e["event_id"] > after_id]

    def task_steps(self, task_id, version):
        return copy.deepcopy(_DEMO_STEPS if "demo" in task_id else DATA["steps"])

    def pending_reviews(self, run_id: str) -> list[dict]:
        return []

    def subscribe(self):
        return self.stream

    def cancel(self, run_id):
        self.calls.append(("cancel", run_id))
        return {"run_id": run_id, "status": "cancelling"}

    def resume(self, run_id):
        self.calls.append(("resume", run_id))
        return {"run_id": run_id}

    def review(self, review_id, decision):
        self.calls.append(("review", review_id, decision))
        return {"review_id": review_id, "decision": decision}

    def jobs_for(self, kind, target, k):
        return [Job(target) for _ in range(k)]

    def submit(self, job):
        self.calls.append(("submit", job.task_id))
        return {"run_id": f"new-{len(self.calls)}", "status": "queued"}

    def env_state(self, instance_id):
        return copy.deepcopy(DATA["env_state"])

    def clock_state(self, gateway_url):
        return None

    def advance_clock(self, instance_id, seconds):
        self.calls.append(("advance", instance_id, seconds))
        return {"virtual_time": "2025-03-14T12:15:00Z"}

    def human_pending(self, agent):
        return [{"task_id": "t-1", "text": "The customer wants a $620 refund. Approve it?",
                 "asked_at": "2027-01-15T08:00:00Z"}]

    def human_conversation(self, agent):
        return {"ctx-1": [
            {"role": "agent", "text": "Hi! I'm handling ticket #4411 for Acme.", "status": "answered"},
            {"role": "human", "text": "Go ahead, keep it short."},
            {"role": "agent", "text": "The customer wants a $620 refund. Approve it?", "status": "pending"},
        ]}

    def human_reply(self, agent, task_id, text, end=False):
        self.calls.append(("reply", task_id, text, end))
        return {"ok": True}

    def close(self) -> None:
        pass
