"""The TUI's data layer without a terminal: the event pump's batching, the runs and run models, the
DAG layout, and the env state the panels show."""

from __future__ import annotations

import queue
import threading

from agentenv_local.hub.launch import Job, Launcher
from tui.dag_layout import layout, reduce_edges, to_text
from tui.data import EventPump
from tui.envstate import clock_from_saved, env_view, when_summary
from tui.model import RunsModel, RunState


class _Stream:
    def __init__(self):
        self.queue = queue.Queue()

    def get(self, timeout=None):
        try:
            return self.queue.get(timeout=timeout)
        except queue.Empty:
            return None

    def close(self):
        pass


def test_the_pump_batches_a_burst_into_few_deliveries():
    stream, got, done = _Stream(), [], threading.Event()
    for i in range(5000):
        stream.queue.put({"kind": "step.log", "run_id": "r", "event_id": i})
    stream.queue.put({"kind": "hub.gone"})
    pump = EventPump(stream, lambda batch: (got.append(batch), batch[-1]["kind"] == "hub.gone" and done.set()),
                     interval=0.05).start()
    assert done.wait(10)
    pump.stop()
    assert sum(len(b) for b in got) == 5001
    assert len(got) <= 5  # one delivery per interval, not one per event
    assert [e["event_id"] for b in got for e in b if "event_id" in e] == list(range(5000))


def test_the_pump_delivers_a_lone_event_within_its_interval():
    stream, got = _Stream(), queue.Queue()
    pump = EventPump(stream, got.put, interval=0.05).start()
    stream.queue.put({"kind": "run.started", "run_id": "r"})
    batch = got.get(timeout=5)  # no second event comes: the interval alone ends the batch
    assert batch == [{"kind": "run.started", "run_id": "r"}]
    assert (pump.received, pump.batches) == (1, 1)
    pump.stop()


def test_runs_model_follows_run_events_and_filters():
    m = RunsModel()
    m.load([{"run_id": "hello-1", "task_name": "hello", "task_id": "@l/hello", "status": "passed", "created_at": 1}])
    changed = m.apply([
        {"kind": "run.queued", "run_id": "week-2", "at": 5, "body": {"task_id": "@l/office/week", "task_version": 1}},
        {"kind": "run.started", "run_id": "week-2", "at": 6, "body": {}},
        {"kind": "step.log", "run_id": "week-2", "body": {}},
    ])
    assert changed == {"week-2"}
    assert m.rows["week-2"]["status"] == "running" and m.rows["week-2"]["task_name"] == "week"
    assert [r["run_id"] for r in m.visible()] == ["week-2", "hello-1"]
    m.filter = "status:passed"
    assert [r["run_id"] for r in m.visible()] == ["hello-1"]
    m.filter = "week"
    assert [r["run_id"] for r in m.visible()] == ["week-2"]
    m.apply([{"kind": "run.finished", "run_id": "week-2", "at": 9, "body": {"status": "failed", "score": 0.5}}])
    assert (m.rows["week-2"]["status"], m.rows["week-2"]["score"]) == ("failed", 0.5)


def test_run_state_tracks_steps_logs_tool_calls_and_denials():
    s = RunState("r", record={"status": "running", "steps": {"a": {"status": "waiting"}}})
    s.apply([
        {"kind": "step.started", "run_id": "r", "step_id": "a", "at": 10, "body": {"type": "run_code"}},
        {"kind": "step.log", "run_id": "r", "step_id": "a", "at": 11, "body": {"message": "hi"}},
        {"kind": "env.tool_call", "run_id": "r", "at": 12, "body": {
            "event_id": "event_1", "instance_id": "i", "role": "agent", "virtual_time": "2025-01-01T09:00:00Z",
            "tool_call": {"function_name": "purge", "arguments": {}}}},
        {"kind": "env.tool_call_result", "run_id": "r", "at": 12.5, "body": {
            "tool_call_event_id": "event_1", "instance_id": "i", "tool_call_result": {
                "isError": True, "content": [{"type": "text", "text": "Tool 'purge' is disabled for role 'agent'"}]}}},
        {"kind": "review.pending", "run_id": "r", "step_id": "a", "body": {"review_id": "r:a", "label": "ok?"}},
        {"kind": "step.log", "run_id": "other", "step_id": "a", "body": {"message": "not ours"}},
    ])
    assert s.steps["a"]["status"] == "running"
    assert [e["body"].get("message") for e in s.logs["a"] if e["kind"] == "step.log"] == ["hi"]
    (call,) = s.tool_calls
    assert (call.tool, call.role, call.denied, call.outcome, call.duration_s) == ("purge", "agent", True, "denied", 0.5)
    assert [r["review_id"] for r in s.pending_reviews()] == ["r:a"]
    s.apply([{"kind": "step.finished", "run_id": "r", "step_id": "a", "at": 13,
              "body": {"status": "passed", "duration_s": 3.0}}])
    assert s.steps["a"]["status"] == "passed" and s.needs_refresh


def test_dag_layout_levels_edges_and_cursor():
    edges = {"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c", "a"]}
    assert reduce_edges(edges)["d"] == ["b", "c"]
    lay = layout([["a"], ["b", "c"], ["d"]], edges)
    text = "\n".join(to_text(lay))
    assert text.count("▼") == 3 and "┴" in text and "┬" in text  # b and c meet above d
    assert lay.boxes["b"].y == lay.boxes["c"].y > lay.boxes["a"].y
    assert lay.neighbour("a", "down") in ("b", "c")
    assert lay.neighbour("b", "right") == "c" and lay.neighbour("c", "down") == "d"
    assert lay.box_at(lay.boxes["d"].x + 1, lay.boxes["d"].y + 1).step_id == "d"


def test_a_long_edge_goes_down_the_gutter():
    lay = layout([["a", "x"], ["b"], ["c"]], {"a": [], "x": [], "b": ["a"], "c": ["b", "x"]})
    lines = to_text(lay)
    top, bottom = lay.boxes["b"].y - 2, lay.boxes["c"].y - 2  # the band under a/x to the band above c
    assert lines[top][1] == "┌" and lines[bottom][1] == "└"
    assert all(line[1] == "│" for line in lines[top + 1:bottom])


def test_clock_and_triggers_from_saved_state():
    saved = {"clock": {"armed": True, "mode": "wall", "rate": 60.0, "anchor_real": 1000.0,
                       "anchor_virtual": "2025-03-14T09:00:00Z", "generation": 1},
             "triggers": {"triggers": [{"spec": {"id": "t", "when": {"type": "time", "at": "PT1H"}},
                                        "status": "armed", "fire_count": 0, "next_mark": "2025-03-14T10:00:00Z"}],
                          "events": [{"seq": 1, "kind": "added", "trigger_id": "t"}]},
             "rbac": {"rules": {"agent": {"purge": True, "read": False}}}}
    assert clock_from_saved(saved["clock"], now=1060.0).virtual_time == "2025-03-14T10:00:00Z"
    view = env_view({"instance_id": "i", "env_id": "office"}, saved, now=1000.0)
    assert view.clock.mode == "wall" and view.clock.rate == 60.0
    assert [(t.id, t.when, t.next_mark) for t in view.triggers] == [("t", "time at=PT1H", "2025-03-14T10:00:00Z")]
    assert view.roles == {"agent": {"disabled": ["purge"], "allowed": ["read"]}}
    assert when_summary({"when": {"type": "action", "tool": "send_email", "roles": ["agent"]}}) == \
        "action send_email roles=agent"


def test_launcher_keeps_at_most_concurrency_in_flight():
    class Source:
        n = 0

        def submit(self, job):
            Source.n += 1
            return {"run_id": f"r{Source.n}", "status": "queued"}

    launcher = Launcher(Source())
    assert launcher.launch([Job("t") for _ in range(5)], concurrency=2) == ["r1", "r2"]
    assert launcher.on_events([{"kind": "run.finished", "run_id": "r1", "body": {"status": "passed"}}])
    assert launcher.fill() == ["r3"]
    assert not launcher.on_events([{"kind": "step.log", "run_id": "r2"}])
    assert launcher.in_flight == {"r2", "r3"} and len(launcher.pending) == 2
