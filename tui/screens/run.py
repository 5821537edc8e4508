"""One run: its DAG live, the env's clock and triggers, tool calls, scores, human agent and review."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Footer, Static, TabbedContent, TabPane

from agentenv_local.executors.where import where_text

from ..data import is_human
from ..envstate import env_view
from ..format import duration, score
from ..model import LIVE, RunState, took
from ..styles import state_color, state_icon
from ..widgets.dag import DagView
from ..widgets.env_panel import EnvPanel
from ..widgets.human_panel import HumanPanel
from ..widgets.scores_panel import ScoresPanel
from ..widgets.tools_panel import ToolsPanel

if TYPE_CHECKING:
    from ..app import AgentenvTui

TABS = ("dag", "env", "tools", "scores", "human")


class RunScreen(Screen):
    if TYPE_CHECKING:
        app: AgentenvTui  # this screen only runs inside AgentenvTui

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Runs"),
        Binding("1", "tab('dag')", "DAG"),
        Binding("2", "tab('env')", "Env"),
        Binding("3", "tab('tools')", "Tools"),
        Binding("4", "tab('scores')", "Scores"),
        Binding("5", "tab('human')", "Human"),
        Binding("c", "cancel", "Cancel"),
        Binding("r", "resume", "Resume"),
        Binding("plus", "advance", "Advance clock"),
        Binding("y", "decide('continue')", "Continue review", show=False),
        Binding("x", "decide('abort')", "Abort review", show=False),
    ]

    def __init__(self, run_id: str) -> None:
        super().__init__()
        self.state = RunState(run_id)
        self._loaded = False
        self._early: list[dict] = []  # this run's live events that came while the run was loading
        self._env_refreshed = 0.0
        self._env_loading = False
        self._human_loading = False
        self._refreshing = False
        self.envs: list = []
        self.conversations: dict = {}
        self.pending: list[dict] = []

    @property
    def run_id(self) -> str:
        return self.state.run_id

    def compose(self) -> ComposeResult:
        yield Static(f"run {self.run_id} · loading…", id="run-head")
        with TabbedContent(initial="dag", id="tabs"):
            with TabPane("1 DAG", id="dag"):
                yield DagView(now=self.app.now, id="dagview")
            with TabPane("2 Env", id="env"):
                yield EnvPanel(id="envpanel")
            with TabPane("3 Tools", id="tools"):
                yield ToolsPanel(id="toolspanel")
            with TabPane("4 Scores", id="scores"):
                yield ScoresPanel(id="scorespanel")
            with TabPane("5 Human", id="human"):
                yield HumanPanel(id="humanpanel")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#dagview", DagView).focus()
        self.run_worker(self._load, thread=True, group="run-load")
        self.set_interval(0.1, self._spin)
        self.set_interval(1.0, self._slow_tick)

    # -- loading --
    def _load(self) -> None:
        source = self.app.source
        try:
            # The history before the record: the hub writes a step's outputs to the record before it publishes
            # the step's event, so this record holds what every event read has changed (read the other way round,
            # a step that ended in between had its event applied and its outputs missing: a human agent deployed
            # while the screen loaded never showed its question). What comes later arrives live.
            events = source.run_events(self.run_id)
            record = source.run_detail(self.run_id)
            steps = source.task_steps(record["task_id"], record.get("task_version"))
            reviews = source.pending_reviews(self.run_id)
        except Exception as exc:
            self.app.fail(f"could not load run {self.run_id}", exc)
            return
        self.app.later(self._loaded_run, record, steps, events, reviews)

    def _loaded_run(self, record: dict, steps: dict, events: list[dict], reviews: list[dict]) -> None:
        self.state.task_steps = steps
        for r in reviews:
            self.state.reviews[r["review_id"]] = {"review_id": r["review_id"], "label": r.get("label"),
                                                 "step_id": r.get("step_id"), "decision": r.get("decision")}
        self.state.load(record, events)
        # live events that came in while it loaded and after what it read (a step that started meanwhile)
        early, self._early = self._early, []
        self.state.apply([e for e in early if (e.get("event_id") or 0) > self.state.last_event_id])
        self._loaded = True
        self.refresh_all()
        self._refresh_env(force=True)
        self._refresh_human()
        self._reload_record_if_stale()  # a step ended live while it loaded: its outputs may be newer than the record

    def _reload_record_if_stale(self) -> None:
        """Read the record again if the events applied since the last read changed what only it holds (a step's
        outputs in the context, verifications)."""
        if self.state.needs_refresh:
            self.state.needs_refresh = False
            self._reload_record()

    def _reload_record(self) -> None:
        if self._refreshing:  # one at a time; the one in flight may have read the record too early: once more
            self.state.needs_refresh = True
            return
        self._refreshing = True
        asked_after = self.state.last_event_id

        def work() -> None:
            try:
                record = self.app.source.run_detail(self.run_id)
                events = self.app.source.run_events(self.run_id, after_id=asked_after)
            except Exception:  # the next event tries again
                record, events = None, []
            self.app.later(self._reloaded, record, events, asked_after)
        self.run_worker(work, thread=True, group="run-reload")

    def _reloaded(self, record: dict | None, events: list[dict], asked_after: int) -> None:
        self._refreshing = False
        if record is None:
            return
        envs_before = len(self.state.deployed_envs())
        agents_before = len(self.human_agents())
        self.state.load(record, events, asked_after=asked_after)
        self.refresh_all()
        if len(self.state.deployed_envs()) != envs_before or self.state.status not in LIVE:
            self._refresh_env(force=True)
        if len(self.human_agents()) != agents_before:
            self._refresh_human()
        self._reload_record_if_stale()  # more came while this one was loading

    # -- live --
    def on_hub_events(self, events: list[dict], changed: set[str]) -> None:
        mine = [e for e in events if e.get("run_id") == self.run_id]
        if not mine:
            return
        if not self._loaded:  # kept for _loaded_run: the load may have read the history before these
            self._early.extend(mine)
            return
        self.state.apply(mine)
        self._reload_record_if_stale()
        if any(e.get("kind") == "review.pending" for e in mine):
            self.app.notify(f"run {self.run_id} waits for a review decision: press 5, then y or x",
                            severity="warning", timeout=10)
        if self.state.env_touched:
            self.state.env_touched = False
            self._refresh_env()
        kinds = {e.get("kind") or "" for e in mine}
        if kinds & {"step.finished", "agent.deployed", "agent.prompted"}:
            self._refresh_human()
        if any(not k.startswith("env.") for k in kinds):
            self.refresh_all()
        else:  # a burst of tool calls: only the tools table changes
            self.query_one("#toolspanel", ToolsPanel).show(self.state.tool_calls, self.state.calls_added)

    def _spin(self) -> None:
        if self.is_current:
            dag = self.query_one("#dagview", DagView)
            dag.tick()
            if self.state.status in LIVE:
                self._head()

    def _slow_tick(self) -> None:
        if not self.is_current or self.state.status not in LIVE:
            return
        tab = self.query_one("#tabs", TabbedContent).active
        if tab == "env":
            self._refresh_env()
        elif tab == "human":
            self._refresh_human()

    # -- env and human agent state (hub record + gateway and agent HTTP), in workers --
    def _refresh_env(self, force: bool = False) -> None:
        if self._env_loading or (not force and time.monotonic() - self._env_refreshed < 0.3):
            return
        records = self.state.deployed_envs()
        if not records:
            self.envs = []
            self._show_env()
            return
        self._env_loading = True
        live = self.state.status in LIVE
        source, now = self.app.source, self.app.now()

        def work() -> None:
            views = []
            for rec in records:
                try:
                    saved = source.env_state(rec["instance_id"]) if rec.get("instance_id") else None
                    is_live = live and not rec.get("torn_down")
                    rest = source.clock_state(rec["gateway_url"]) if is_live and rec.get("gateway_url") else None
                    views.append(env_view(rec, saved, now, rest_clock=rest, live=is_live and rest is not None))
                except Exception:  # show what we have
                    views.append(env_view(rec, None, now))
            self.app.later(self._env_loaded, views)
        self.run_worker(work, thread=True, group="env-load")

    def _env_loaded(self, views: list) -> None:
        self._env_loading = False
        self._env_refreshed = time.monotonic()
        self.envs = views
        self._show_env()

    def _show_env(self) -> None:
        self.query_one("#envpanel", EnvPanel).show(self.envs, list(self.state.trigger_events))
        self.query_one("#toolspanel", ToolsPanel).show_roles(self.envs)

    def human_agents(self) -> list[dict]:
        return [a for a in self.state.context().get("deployed_agents") or [] if is_human(a)]

    def _refresh_human(self) -> None:
        agents = [a for a in self.human_agents() if not a.get("torn_down")]
        if self._human_loading or not agents or self.state.status not in LIVE:
            self._show_human()
            return
        self._human_loading = True
        source = self.app.source

        def work() -> None:
            conversations, pending = {}, []
            for agent in agents:
                try:
                    conversations[agent["agent_name"]] = source.human_conversation(agent)
                    pending += [{**q, "agent_name": agent["agent_name"]} for q in source.human_pending(agent)]
                except Exception:  # it may be going away
                    pass
            self.app.later(self._human_loaded, conversations, pending)
        self.run_worker(work, thread=True, group="human-load")

    def _human_loaded(self, conversations: dict, pending: list[dict]) -> None:
        self._human_loading = False
        had = {q.get("task_id") for q in self.pending}
        self.conversations, self.pending = conversations, pending
        if any(q.get("task_id") not in had for q in pending):
            self.app.notify(f"{pending[0].get('agent_name')} waits for your answer: press 5", timeout=10)
        self._show_human()

    def _show_human(self) -> None:
        recorded = []
        if self.state.status not in LIVE:
            names = {a.get("agent_name") for a in self.human_agents()}
            recorded = [r for r in self.state.context().get("prompt_responses") or []
                        if r.get("agent_name") in names or any("user_reply" in t for t in r.get("turns") or [])]
        self.query_one("#humanpanel", HumanPanel).show(list(self.state.reviews.values()), self.conversations,
                                                       self.pending, self.state.status in LIVE, recorded)

    # -- drawing --
    def refresh_all(self) -> None:
        self._head()
        rec = self.state.record
        self.query_one("#dagview", DagView).set_graph(rec.get("levels") or [[s] for s in self.state.steps],
                                                      rec.get("edges") or {}, self.state.steps)
        self.query_one("#toolspanel", ToolsPanel).show(self.state.tool_calls, self.state.calls_added)
        self.query_one("#scorespanel", ScoresPanel).show(rec.get("score"), self.state.verifications(),
                                                         self.state.status)
        self._show_human()
        if not self.envs:
            self._show_env()

    def _head(self) -> None:
        rec = self.state.record
        if not rec:
            return
        status = self.state.status
        steps = self.state.steps
        done = sum(1 for s in steps.values() if (s.get("status") or "").startswith(("passed", "failed", "skipped")))
        text = Text()
        text.append(f"{state_icon(status)} {status}", style=f"bold {state_color(status)}")
        text.append(f"  {rec.get('task_name') or rec.get('task_id')} v{rec.get('task_version')}", style="bold")
        text.append(f"  {self.run_id}  {done}/{len(steps)} steps  {duration(took(rec, self.app.now()))}"
                    f"  score {score(rec.get('score'))}")
        if where := where_text(rec):
            text.append(f"\non {where}")
        if rec.get("error") and status not in LIVE:
            text.append(f"\n{rec['error']}", style=state_color("failed"))
        if self.state.pending_reviews():
            text.append("\nreview waiting: press 5, then y (continue) or x (abort)",
                        style="bold " + state_color("running"))
        self.query_one("#run-head", Static).update(text)

    # -- actions --
    def on_dag_view_opened(self, message: DagView.Opened) -> None:
        from .step import StepScreen

        self.app.push_screen(StepScreen(self.state, message.step_id))

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_tab(self, tab: str) -> None:
        self.query_one("#tabs", TabbedContent).active = tab
        if tab == "env":
            self._refresh_env(force=True)
        elif tab == "human":
            self._refresh_human()
        elif tab == "dag":
            self.query_one("#dagview", DagView).focus()

    def action_cancel(self) -> None:
        from .runs import do_cancel

        do_cancel(self.app, self.run_id)

    def action_resume(self) -> None:
        from .runs import do_resume

        if self.state.status in LIVE:
            self.notify(f"run {self.run_id} is {self.state.status}: nothing to resume", severity="warning")
            return
        do_resume(self.app, self.run_id)

    def action_advance(self) -> None:
        live = [v for v in self.envs if v.live and v.clock.armed]
        if not live:
            self.notify("no live env with an armed virtual clock in this run", severity="warning")
            return
        view = live[0]
        if view.clock.mode == "wall":
            self.notify("this clock follows the wall clock; only a stepped or frozen clock is advanced by hand",
                        severity="warning")
            return
        seconds = float(view.clock.step_seconds or 60)
        app = self.app

        def work() -> None:
            try:
                answer = app.source.advance_clock(view.instance_id, seconds)
            except Exception as exc:
                app.fail("could not advance the clock", exc)
                return
            app.later(app.notify, f"clock advanced by {seconds:g}s to {answer.get('virtual_time')}")
            app.later(self._refresh_env, True)
        self.run_worker(work, thread=True, group="actions")

    def action_decide(self, decision: str) -> None:
        waiting = self.state.pending_reviews()
        if not waiting:
            self.notify("no review gate is waiting in this run", severity="warning")
            return
        review = waiting[0]
        app = self.app

        def work() -> None:
            try:
                app.source.review(review["review_id"], decision)
            except Exception as exc:
                app.fail("could not record the decision", exc)
                return
            app.later(app.notify, f"review {review.get('label') or review['review_id']}: {decision}")
        review["decision"] = decision  # shown at once; the review.decided event confirms it
        self.refresh_all()
        self.run_worker(work, thread=True, group="actions")

    def on_human_panel_decide(self, message: HumanPanel.Decide) -> None:
        self.action_decide(message.decision)

    def on_human_panel_reply(self, message: HumanPanel.Reply) -> None:
        if not self.pending:
            self.notify("no question is waiting for an answer", severity="warning")
            return
        question = self.pending[0]
        agent = next((a for a in self.human_agents() if a["agent_name"] == question.get("agent_name")), None)
        if agent is None:
            return
        app = self.app

        def work() -> None:
            try:
                app.source.human_reply(agent, question["task_id"], message.text, end=message.end)
            except Exception as exc:
                app.fail("could not send the reply", exc)
                return
            app.later(app.notify, f"answered {agent['agent_name']}")
            app.later(self._refresh_human)
        self.pending = self.pending[1:]
        self._show_human()
        self.run_worker(work, thread=True, group="actions")
