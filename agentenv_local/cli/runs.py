"""`agentenv runs`: list, show, resume, cancel, review and diff runs (live, through the hub)."""

from __future__ import annotations

import click

from agentenv_local.hub.methods import HubMethods

from ._common import ago, duration, echo_json, score_text, session, table


@click.group()
def runs():
    """List, show, resume, cancel and diff runs."""


@runs.command("list")
@click.option("--status", type=click.Choice(["queued", "running", "passed", "failed", "error", "cancelled",
                                             "interrupted"]), help="Only runs with this status.")
@click.option("--task", "task_id", help="Only runs of this task id (or its last path segment).")
@click.option("--limit", type=click.IntRange(1, 100_000), default=20, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_runs(status, task_id, limit, as_json):
    """The most recent runs, newest first."""
    from agentenv_local.query import Query

    q = Query("runs").limit(limit)
    if status:
        q.where("status", "eq", status)
    with session() as s:
        if task_id and "/" not in task_id:
            q.where("task_name", "eq", task_id)
        elif task_id:
            q.where("task_id", "eq", task_id)
        rows = s.store.runs.list(q)
    if as_json:
        echo_json(rows)
        return
    if not rows and (status or task_id):
        click.echo("No runs match. See them all with: agentenv runs list")
        return
    if not rows:
        click.echo("No runs yet. Start one with: agentenv run hello")
        return
    table([[r["run_id"], r.get("task_name") or r["task_id"], f"v{r['task_version']}", r["status"],
            ago(r["created_at"]), duration(_took(r)), score_text(r.get("score"))] for r in rows],
          ["RUN", "TASK", "VERSION", "STATUS", "STARTED", "DURATION", "SCORE"])


def _took(run: dict) -> float | None:
    import time

    if run.get("started_at") is None:
        return None
    return (run.get("finished_at") or time.time()) - run["started_at"]


@runs.command("show")
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True, help="Print the whole run record as JSON.")
def show(run_id, as_json):
    """One run: its steps with their states, verifications and errors. Accepts a unique prefix."""
    with session() as s:
        run = s.store.runs.get(s.store.runs.resolve(run_id))
        reviews = [] if run["status"] not in ("running", "queued") else [
            r for r in s.store.records.query({"collection": "reviews", "filters": [["run_id", "eq", run["run_id"]],
                                                                                  ["status", "eq", "pending"]]})]
    if as_json:
        echo_json(run)
        return
    click.echo(f"run       {run['run_id']}")
    click.echo(f"task      {run['task_id']} v{run['task_version']}")
    click.echo(f"status    {run['status']}" + (f" (generation {run['generation']})" if run.get("generation") else ""))
    click.echo(f"started   {ago(run.get('started_at'))}    duration {duration(_took(run))}")
    click.echo(f"score     {score_text(run.get('score'))}")
    if run.get("seed"):
        click.echo(f"seed      {run['seed']}")
    from agentenv_local.executors.where import where_text

    if where := where_text(run):
        click.echo(f"where     {where}")
    if run.get("error"):
        click.echo(f"error     {run['error']}")
    click.echo("\nsteps:")
    for step_id, info in (run.get("steps") or {}).items():
        line = f"  {info.get('status', '?'):<18} {step_id} ({info.get('type')})"
        if info.get("duration_s") is not None:
            line += f"  {duration(info['duration_s'])}"
        click.echo(line)
        if info.get("error"):
            click.echo(f"      {info['error']}")
    for vid, v in (run.get("verifications") or {}).items():
        click.echo(f"\nverification {vid}: score {score_text(v.get('score'))} ({v.get('score_aggregator')})")
        for index, row in enumerate(v.get("results") or []):
            _echo_criterion(index, row)
    for r in reviews:
        click.echo(f"\nreview waiting: {r['body'].get('label') or r['body']['step_id']} -> "
                   f"agentenv runs review {run['run_id']} --continue (or --abort)")
    if run["status"] in ("interrupted", "error"):
        click.echo(f"\nResume it with: agentenv runs resume {run['run_id']}")


def _echo_criterion(index: int, row: dict) -> None:
    """One result row as the verifier recorded it: rubric rows have an id and the criterion's
    text, check rows (verify_sandbox, response_verifier) a type; both have a justification."""
    mark = "skip" if row.get("skipped") else ("pass" if row.get("result") else "FAIL")
    name = row.get("id") or row.get("name") or row.get("type") or f"criterion {row.get('criterion_index', index) + 1}"
    why = str(row.get("justification") or row.get("reason") or "")
    weight = f" (weight {row['weight']})" if row.get("weight") not in (None, 1) else ""
    text = row.get("criterion")
    if isinstance(text, str) and text.strip() and text != name:
        click.echo(f"  [{mark}] {name}{weight}: {text.strip()}")
        if why:
            click.echo(f"         {why}")
    else:
        click.echo(f"  [{mark}] {name}{weight}" + (f": {why}" if why else ""))


@runs.command("resume")
@click.argument("run_id")
def resume(run_id):
    """Finish an interrupted (or failed) run from its journal: done steps are not run again."""
    from ._drive import drive, exit_code

    with session() as s:
        full_id = s.store.runs.resolve(run_id)
        results = drive(s, [], resume_run_ids=[full_id])
    return exit_code(results)


@runs.command("cancel")
@click.argument("run_id")
def cancel(run_id):
    """Cancel a queued or running run (its sandboxes are torn down), or close an interrupted one."""
    import time

    with session() as s:
        result = HubMethods(s).cancel_run(run_id)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            run = s.store.runs.get(result["run_id"])
            if run["status"] not in ("queued", "running", "interrupted"):
                break
            time.sleep(0.05)
    click.echo(f"{run['run_id']}: {run['status']}")


@runs.command("review")
@click.argument("run_id")
@click.option("--continue", "decision", flag_value="continue", help="Let the run go on.")
@click.option("--abort", "decision", flag_value="abort", help="Fail the review step (and the run).")
def review(run_id, decision):
    """Answer a run's pending `review` step."""
    if decision is None:
        raise click.UsageError("say --continue or --abort")
    with session() as s:
        full_id = s.store.runs.resolve(run_id)
        pending = s.store.records.query({"collection": "reviews", "filters": [["run_id", "eq", full_id],
                                                                             ["status", "eq", "pending"]]})
        if not pending:
            from agentenv_local.errors import NotFoundError

            raise NotFoundError(f"run {full_id} has no review waiting for a decision")
        for record in pending:
            HubMethods(s).review(record["id"], decision)
            click.echo(f"{record['id']}: {decision}")


@runs.command("diff")
@click.argument("run_a")
@click.argument("run_b")
@click.option("--json", "as_json", is_flag=True, help="Print the differences as JSON.")
def diff(run_a, run_b, as_json):
    """What differs between two finished runs: status, score, criteria, tool calls and results in order,
    trigger firings, the env's calls (its state where a verifier read it). Exit 0 on none, 1 on any."""
    from agentenv_local.replay.compare import differences
    from agentenv_local.replay.replay import view_of

    with session() as s:
        a, b = (s.store.runs.get(s.store.runs.resolve(r)) for r in (run_a, run_b))
        found = differences(view_of(s.store, a), view_of(s.store, b))
    if as_json:
        echo_json({"run_a": a["run_id"], "run_b": b["run_id"], "differences": [d.to_json() for d in found]})
    else:
        for d in found:
            click.echo(d.text(a["run_id"], b["run_id"]))
        click.echo("No differences." if not found else f"{len(found)} difference(s).")
    click.get_current_context().exit(1 if found else 0)

