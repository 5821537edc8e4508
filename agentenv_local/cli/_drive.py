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

from agentenv_local.hub.launch import HubGone, Job, RunWatcher, drive_jobs
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
    progress = Progress(total_runs=len(jobs) + len(resume_run_ids or []), to_stderr=to_stderr)
    watcher = _Display(session, progress, show_steps=progress.total_runs == 1 and verbose_steps)
    try:
        return drive_jobs(session, jobs, concurrency, watcher, resume_run_ids or ())
    except HubGone:
        raise click.ClickException("the hub stopped while runs were going; "
                                   "see `agentenv runs list` and resume with `agentenv runs resume RUN`") from None
    finally:
        progress.clear()


class _Display(RunWatcher):
    """The progress line and the per-run lines of `agentenv run` and its kin."""

    event_kinds = ("step.started", "step.finished", "verification", "review.pending", "step.log")  # _on_event's

    def __init__(self, session: Any, progress: Progress, show_steps: bool):
        self.session, self.progress, self.show_steps = session, progress, show_steps
        self.labels: dict[str, str] = {}

    def started(self, run_id: str, run: dict, job: Job | None) -> None:
        if job is not None:
            self.labels[run_id] = job.label or job.task_id
            self.progress.steps_total += run["total_steps"]
        else:  # resumed: what is left of it
            self.labels[run_id] = run.get("task_name") or run["task_id"]
            self.progress.steps_total += run["total_steps"] - sum(
                1 for s in (run.get("steps") or {}).values() if s.get("status") == "passed")

    def event(self, event: dict) -> None:
        _on_event(self.session, event, self.labels, self.progress, self.show_steps)
        self.progress.render()

    def finished(self, run: dict) -> None:
        self.progress.runs_done += 1
        self.progress.line(_summary_line(self.labels[run["run_id"]], run))

    def idle(self) -> None:
        self.progress.render()

    def cancelling(self) -> None:
        self.progress.clear()
        click.echo("Cancelling...", err=True)


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
    order = {step_id: index for index, step_id in enumerate(run.get("steps") or {})}  # the task's order, not
    ordered = sorted(verifications.items(),  # the finishing order
                     key=lambda kv: order.get((kv[1] or {}).get("step_id") or kv[0], len(order)))
    scores = ", ".join(f"{k}: {score_text(v.get('score'))}" for k, v in ordered)
    text = f"{label} v{run.get('task_version')}: {run['status']}"
    if scores:
        text += f" ({scores})"
    text += f", {duration(run.get('duration_s'))}, run {run['run_id']}"
    if run.get("error") and run["status"] != "passed":
        text += f"\n  {run['error']}"
    return text


def exit_code(runs: list[dict]) -> int:
    return 0 if runs and all(r["status"] == "passed" for r in runs) else 1
