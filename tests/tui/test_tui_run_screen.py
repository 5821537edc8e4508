"""The run screen on a real hub: the DAG live, step detail, the env's clock (advanced by a key) and
triggers, tool calls with the role rules, scores, a review gate and a human agent answered from the TUI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from kits.hub import wait_until
from kits.tui import (
    SIZE,
    InProcessHub,
    app_on,
    bash_check,
    close_hub,
    deploy,
    gated_steps,
    run,
    until,
)

from tui.app import AgentenvTui
from tui.data import HubSource
from tui.screens.help import HelpScreen
from tui.screens.run import RunScreen
from tui.screens.step import StepScreen
from tui.widgets.dag import DagView

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def hub(tmp_path, monkeypatch):
    project = tmp_path / "proj"
    project.mkdir()
    monkeypatch.chdir(project)
    h = InProcessHub(project)
    yield h
    close_hub(h)


def _steps(app):
    return {k: v.get("status") for k, v in app.screen.state.steps.items()}


def test_the_dag_follows_the_steps_and_a_step_opens_with_its_details(hub, tmp_path):
    release = tmp_path / "release"
    run_id = hub.submit(hub.task(gated_steps(release) + [bash_check("after", "echo done", sandbox_name="box")]))

    async def scenario():
        app = app_on(hub, open_run=run_id)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: isinstance(app.screen, RunScreen) and _steps(app).get("wait") == "running")
            dag = app.screen.query_one(DagView)
            assert dag.levels == [["box"], ["wait"], ["after"]]
            assert dag.running()
            assert _steps(app)["after"] == "waiting"
            release.touch()
            await until(pilot, lambda: set(_steps(app).values()) == {"passed"}, what="every step to pass")
            await until(pilot, lambda: app.screen.state.status == "passed")
            # keyboard: down to `wait`, enter opens it
            await pilot.press("down", "enter")
            await until(pilot, lambda: isinstance(app.screen, StepScreen))
            assert app.screen.step_id == "wait"
            inputs = str(app.screen.query_one("#step-inputs").render())
            assert '"type": "verify_sandbox"' in inputs and "bash_cmd" in inputs
            outputs = str(app.screen.query_one("#step-outputs").render())
            assert "verification wait: 1/1 criteria" in outputs
            await pilot.press("escape")
            await until(pilot, lambda: isinstance(app.screen, RunScreen))
            # mouse: a click selects a box, a second click opens it
            box = dag._layout.boxes["after"]
            offset = (box.x + 3 - dag.scroll_offset.x, box.y + 1 - dag.scroll_offset.y)
            await pilot.click(DagView, offset=offset)
            assert dag.selected == "after"
            await pilot.click(DagView, offset=offset)
            await until(pilot, lambda: isinstance(app.screen, StepScreen) and app.screen.step_id == "after")
    run(scenario())


def test_failed_criteria_and_a_failed_step_show_why(hub):
    failed = hub.run([deploy(), bash_check("no", "echo nope; false", sandbox_name="box"),
                      bash_check("broken", "true", sandbox_name="nowhere", depends_on=["no"])])

    async def scenario():
        app = app_on(hub, open_run=failed["run_id"])
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.state.record)
            assert _steps(app) == {"box": "passed", "no": "passed", "broken": "failed"}
            app.screen.query_one(DagView).select("broken")
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, StepScreen))
            errors = str(app.screen.query_one("#step-errors").render())
            assert "nowhere" in errors
            await pilot.press("escape", "4")
            await until(pilot, lambda: "[FAIL]" in str(app.screen.query_one("#scores-body").render()))
    run(scenario())


def _office_bundle(project: Path, steps: list[dict]) -> Path:
    folder = project / "office"
    shutil.copytree(EXAMPLES / "office", folder)
    shutil.rmtree(folder / "evals")
    for old in (folder / "tasks").iterdir():
        old.unlink()
    (folder / "tasks" / "clock.json").write_text(json.dumps({"steps": steps}))
    return folder


CLOCK_STEPS = [
    {"id": "deploy", "type": "deploy_env", "env_id": "office"},
    {"id": "clock", "type": "sync_env_clock", "env_id": "office", "virtual_time": "2025-03-14T09:00:00Z",
     "mode": "stepped", "step_seconds": 900, "depends_on": ["deploy"]},
    {"id": "triggers", "type": "register_env_triggers", "env_id": "office", "depends_on": ["clock"],
     "triggers": [{"id": "reminder", "when": {"type": "time", "at": "PT30M"},
                   "actions": [{"type": "tool", "tool": "send_email", "as": "automation",
                                "args": {"to": ["alex.morgan@brightline.example"], "subject": "Reminder",
                                         "body": "review at 15:00"}}]}]},
    {"id": "lock_down", "type": "modify_env_tool_access", "env_id": "office", "action": "disable", "role": "agent",
     "tools": ["purge_mailbox"], "depends_on": ["triggers"]},
    {"id": "gate", "type": "review", "label": "look at the env", "poll_interval_seconds": 0.05,
     "depends_on": ["lock_down"]},
]


def test_clock_triggers_tools_and_a_review_gate(hub):
    folder = _office_bundle(hub.root, CLOCK_STEPS)

    async def scenario():
        app = app_on(hub)
        source = app.source
        jobs = source.jobs_for("bundle", str(folder), 1)
        run_id = source.submit(jobs[0])["run_id"]
        app.open_run = run_id
        async with app.run_test(size=SIZE) as pilot:
            screen = await until(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen)
            await until(pilot, lambda: screen.state.pending_reviews(), what="the review gate to wait")
            await pilot.press("2")
            await until(pilot, lambda: screen.envs and screen.envs[0].live and screen.envs[0].triggers,
                        what="the env panel to load")
            env = screen.envs[0]
            assert env.clock.mode == "stepped" and env.clock.virtual_time == "2025-03-14T09:00:00Z"
            assert [(t.id, t.status) for t in env.triggers] == [("reminder", "armed")]
            assert env.roles == {"agent": {"disabled": ["purge_mailbox"], "allowed": []}}
            clock_text = str(screen.query_one("#clock").render())
            assert "stepped" in clock_text and "2025-03-14T09:00:00Z" in clock_text
            # + advances the stepped clock by its step (15 min) twice: the 30 min time trigger fires
            await pilot.press("plus")
            await until(pilot, lambda: screen.envs[0].clock.virtual_time == "2025-03-14T09:15:00Z")
            await pilot.press("plus")
            await until(pilot, lambda: screen.envs[0].clock.virtual_time == "2025-03-14T09:30:00Z")
            await until(pilot, lambda: screen.envs[0].triggers[0].fire_count == 1, what="the trigger to fire")
            await until(pilot, lambda: any(c.tool == "send_email" and c.role == "trigger"
                                           for c in screen.state.tool_calls), what="the trigger's tool call")
            log = screen.query_one("#trigger-log")
            assert any("fired reminder" in line.text for line in log.lines)
            await pilot.press("3")
            roles = str(screen.query_one("#roles").render())
            assert "role agent" in roles and "purge_mailbox" in roles
            # the review gate: 5 shows it, y continues
            await pilot.press("5")
            assert "look at the env" in str(screen.query_one("#reviews").render())
            await pilot.press("y")
            await until(pilot, lambda: screen.state.status == "passed", what="the run to pass after continue")
    run(scenario())


def test_abort_a_review_from_its_button(hub):
    run_id = hub.submit(hub.task([{"id": "gate", "type": "review", "label": "ship it?",
                                   "poll_interval_seconds": 0.05}]))

    async def scenario():
        app = app_on(hub, open_run=run_id)
        async with app.run_test(size=SIZE) as pilot:
            screen = await until(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen)
            await until(pilot, lambda: screen.state.pending_reviews())
            await pilot.press("5")
            await until(pilot, lambda: screen.query_one("#review-row").display)
            await pilot.click("#review-abort")
            await until(pilot, lambda: screen.state.status in ("failed", "error"))
            assert "aborted by the operator" in (screen.state.steps["gate"].get("error") or "")
    run(scenario())


SOLVER_PLAN = {"turns": [[{"reply": "Q1: what colour do you want for {input}?"}], [{"reply": "done"}]]}
HUMAN_STEPS = [
    {"id": "solver", "type": "deploy_agent", "agent_name": "solver", "config": {"plan": SOLVER_PLAN}},
    {"id": "person", "type": "deploy_agent", "a2a_agent_id": "human", "agent_name": "person"},
    {"id": "talk", "type": "prompt_agent", "agent_name": "solver", "prompt": "a hat", "max_conversation_turns": 3,
     "user_agent_name": "person", "timeout_seconds": 60, "user_agent_timeout_seconds": 120,
     "depends_on": ["solver", "person"]},
]


class _FirstReadIsStale(HubSource):
    """A source whose first read of the run (its record or its history, whichever the screen asks for first) is as
    it was before the human agent deployed, as when that step ends while the screen loads; later reads are current."""

    def __init__(self, session):
        super().__init__(session)
        self.fresh = False

    def _stale(self) -> bool:
        stale, self.fresh = not self.fresh, True
        return stale

    def run_detail(self, run_id: str) -> dict:
        record = super().run_detail(run_id)
        if self._stale():
            record["context"] = self.session.store.runs.journal(run_id)[0]["body"]["state"]  # after `solver`
        return record

    def run_events(self, run_id: str, after_id: int = 0) -> list[dict]:
        events = super().run_events(run_id, after_id)
        if self._stale():
            solver_ended = next(e["event_id"] for e in events
                                if e["kind"] == "step.finished" and e["step_id"] == "solver")
            events = [e for e in events if e["event_id"] <= solver_ended]
        return events


def test_a_step_that_ends_while_the_screen_loads_is_seen(hub):
    """Seen in CI: the human agent deployed while the run screen loaded, and its question never showed. The screen
    read the record, then the history: the step's event came with the history, its outputs were not in the record,
    and nothing asked for the record again. It reads the history first now (the hub writes a step's outputs before
    it publishes the step's event)."""
    run_id = hub.submit(hub.task(HUMAN_STEPS))
    wait_until(lambda: (hub.store.runs.get(run_id)["steps"].get("talk") or {}).get("status") == "running", 60,
               what="the conversation to start")
    source = _FirstReadIsStale(hub.session)

    async def scenario():
        app = AgentenvTui(source, open_run=run_id)
        async with app.run_test(size=SIZE) as pilot:
            await _until_the_human_agent_asks(app, pilot, lambda screen: screen.human_agents())
    run(scenario())


async def _until_the_human_agent_asks(app, pilot, explain) -> RunScreen:
    """Open the run screen's Human tab and wait for the human agent's first question; `explain(screen)` says what
    the screen saw if it never comes."""
    screen = await until(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen)
    await pilot.press("5")
    await until(pilot, lambda: screen.pending and screen.pending[0]["text"].startswith("Q1"),
                what="the human agent's question", explain=lambda: explain(screen))
    return screen


def test_a_person_answers_the_human_agent_from_the_tui(hub):
    run_id = hub.submit(hub.task(HUMAN_STEPS))

    async def scenario():
        app = app_on(hub, open_run=run_id)
        async with app.run_test(size=SIZE) as pilot:
            screen = await _until_the_human_agent_asks(
                app, pilot, lambda screen: (screen.state.status, _steps(app), screen.human_agents(),
                                            screen._human_loading, hub.store.runs.get(run_id)))
            assert screen.query_one("#reply-row").display
            assert "Q1: what colour" in str(screen.query_one("#conversation-body").render())
            await pilot.click("#reply")
            await pilot.press(*"red", "enter")
            await until(pilot, lambda: screen.pending and screen.pending[0]["text"] == "done",
                        what="the solver's next message")
            await pilot.click("#reply")
            await pilot.press(*"thanks")
            await pilot.click("#reply-end")  # answers and ends the conversation
            await until(pilot, lambda: screen.state.status in ("passed", "failed", "error"), what="the run to end")
            assert screen.state.status == "passed"
            turns = screen.state.context()["prompt_responses"][0]["turns"]
            assert turns[0]["user_reply"] == "red"
    run(scenario())


def test_help_theme_and_back(hub):
    async def scenario():
        app = app_on(hub)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("question_mark")
            await until(pilot, lambda: isinstance(app.screen, HelpScreen))
            await pilot.press("escape")
            await until(pilot, lambda: not isinstance(app.screen, HelpScreen))
            before = app.theme
            await pilot.press("ctrl+t")
            assert app.theme != before
            await pilot.press("ctrl+t")
            assert app.theme == before
            await pilot.resize_terminal(80, 24)
            await pilot.pause(0.1)
            assert app.size == (80, 24)
    run(scenario())
