"""Submit runs to the hub, show their progress, answer review gates, and summarize.

Used by `agentenv run`, `task run`, `eval run` and `runs resume`. At most `concurrency` runs
are in flight; each finished run makes room for the next. Ctrl-C cancels what is in flight
(their sandboxes are torn down) and exits 130.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any

import click

from agentenv_local.hub.launch import Job, Launcher, SessionSubmitter
from agentenv_local.hub.methods import HubMethods

from ._common import duration, score_text


@dataclass
class Progress:
    """A one-line display on a terminal, plain lines otherwise."""

    total_runs: int
    to_stderr: bool = False  # with --json, stdout carries only the JSON
    live: bool = field(default_factory=lambda: sys.stderr.isatty())
    started: float = field(default_factory=time.monotonic)
    steps_done: int = 0
    steps_total: int = 0
    runs_done: int = 0
    current: str = ""
    _last: float = 0.0

    def line(self, text: str) -> None:
        self.clear()
        click.echo(text, err=self.to_stderr)

    def clear(self) -> None:
        if self.live:
            click.echo("\r\033[K", nl=False, err=True)

    def render(self, force: bool = False) -> None:
        if not self.live:
            return
        now = time.monotonic()
        if not force and now - self._last < 0.08:
            return
        self._last = now
        runs = f"runs {self.runs_done}/{self.total_runs}  " if self.total_runs > 1 else ""
        text = (f"{runs}steps {self.steps_done}/{self.steps_total}  {self.current[:50]}  "
                f"{duration(now - self.started)}")
        click.echo("\r\033[K" + text, nl=False, err=True)


def drive(session: Any, jobs: list[Job], concurrency: int = 4, verbose_steps: bool = True,
          resume_run_ids: list[str] | None = None, to_stderr: bool = False) -> list[dict]:
    """Run every job (or resume runs) and return their final run records, in job order.

    `to_stderr`: print the progress lines on stderr (for --json, whose stdout is only JSON).
    """
    hub = HubMethods(session)
    stream = session.subscribe()
    launcher = Launcher(SessionSubmitter(session, attach=True), concurrency)
    order: dict[str, int] = {}
    labels: dict[str, str] = {}
    finished: dict[str, dict] = {}
    progress = Progress(total_runs=len(jobs) + len(resume_run_ids or []), to_stderr=to_stderr)
    single = progress.total_runs == 1

    def start_waiting() -> None:
        started = launcher.fill()
        first = len(launcher.started) - len(started)
        for index, run_id in enumerate(started, start=first):
            order[run_id] = index
            labels[run_id] = launcher.jobs[run_id].label or launcher.jobs[run_id].task_id
            progress.steps_total += launcher.runs[run_id]["total_steps"]

    try:
        for i, run_id in enumerate(resume_run_ids or []):
            run = hub.resume_run(run_id, attach=True)
            order[run["run_id"]] = len(jobs) + i
            labels[run["run_id"]] = run.get("task_name") or run["task_id"]
            launcher.adopt(run["run_id"])
            progress.steps_total += run["total_steps"] - sum(
                1 for s in (run.get("steps") or {}).values() if s.get("status") == "passed")
        launcher.pending += jobs
        start_waiting()
        while launcher.in_flight:
            event = stream.get(timeout=0.5)
            if event is None:
                progress.render()
                _catch_missed(session, launcher.in_flight, finished)
            elif event.get("kind") == "hub.gone":
                raise click.ClickException("the hub stopped while runs were going; "
                                           "see `agentenv runs list` and resume with `agentenv runs resume RUN`")
            elif event.get("run_id") in launcher.in_flight:
                _on_event(session, event, labels, progress, single and verbose_steps)
                if event["kind"] == "run.finished":
                    run_id = event["run_id"]
                    finished[run_id] = session.store.runs.get(run_id)
            done = [r for r in launcher.in_flight if r in finished]
            launcher.finished(done)
            for run_id in done:
                progress.runs_done += 1
                progress.line(_summary_line(labels[run_id], finished[run_id]))
            start_waiting()
            progress.render()
    except KeyboardInterrupt:
        progress.clear()
        click.echo("Cancelling...", err=True)
        for run_id in list(launcher.in_flight):
            try:
                hub.cancel_run(run_id)
            except Exception:
                pass
        deadline = time.monotonic() + 10
        while launcher.in_flight and time.monotonic() < deadline:
            _catch_missed(session, launcher.in_flight, finished)
            launcher.finished(list(finished))
            time.sleep(0.05)
        raise
    finally:
        progress.clear()
        stream.close()
    return [finished[r] for r in sorted(finished, key=lambda r: order[r])]


def _catch_missed(session: Any, in_flight: set[str], finished: dict) -> None:
    """Events are live-only; if one was missed, the run record still tells the truth."""
    for run_id in list(in_flight):
        if run_id in finished:
            continue
        run = session.store.runs.get(run_id)
        if run["status"] in ("passed", "failed", "error", "cancelled", "interrupted"):
            finished[run_id] = run


def _on_event(session: Any, event: dict, labels: dict, progress: Progress, show_steps: bool) -> None:
    kind, body, step_id = event["kind"], event.get("body") or {}, event.get("step_id")
    label = labels[event["run_id"]]
    if kind == "step.started":
        progress.current = f"{step_id} ({body.get('type')})"
        if show_steps:
            progress.line(f"[{label}] step {body.get('index')} {step_id} ({body.get('type')})")
    elif kind == "step.finished":
        progress.steps_done += 1
        if show_steps or body.get("status") != "passed":
            line = f"[{label}] step {step_id} {body.get('status')} in {duration(body.get('duration_s'))}"
            if body.get("error"):
                line += f": {body['error']}"
            progress.line(line)
    elif kind == "verification" and show_steps:
        progress.line(f"[{label}] {body.get('verifier_id')}: {body.get('passed')}/{body.get('total')} criteria, "
                      f"score {score_text(body.get('score'))}")
    elif kind == "review.pending":
        _ask_review(session, event, label, progress)
    elif kind == "step.log" and body.get("level") == "warning":  # what a person should know, even without -v
        progress.line(f"[{label}] note: {body.get('message')}")


def _ask_review(session: Any, event: dict, label: str, progress: Progress) -> None:
    body = event.get("body") or {}
    progress.clear()
    if not sys.stdin.isatty():
        click.echo(f"[{label}] review {body.get('label')!r} is waiting for a decision: answer with "
                   f"`agentenv runs review {event['run_id']} --continue` (or --abort)", err=True)
        return
    answer = click.prompt(f"[{label}] review: {body.get('label') or event.get('step_id')}  continue or abort?",
                          type=click.Choice(["continue", "abort"]), default="continue", err=True)
    HubMethods(session).review(body["review_id"], answer)


def _summary_line(label: str, run: dict) -> str:
    verifications = run.get("verifications") or {}
    scores = ", ".join(f"{k}: {score_text(v.get('score'))}" for k, v in verifications.items())
    text = f"{label} v{run.get('task_version')}: {run['status']}"
    if scores:
        text += f" ({scores})"
    text += f", {duration(run.get('duration_s'))}, run {run['run_id']}"
    if run.get("error") and run["status"] != "passed":
        text += f"\n  {run['error']}"
    return text


def exit_code(runs: list[dict]) -> int:
    return 0 if runs and all(r["status"] == "passed" for r in runs) else 1
