"""`agentenv replay RUN | --eval ID`: re-execute recorded runs with replay agents and report what differs."""

from __future__ import annotations

from typing import Any

import click

from ._common import echo_json, session


@click.command()
@click.argument("run_id", required=False)
@click.option("--eval", "eval_id", help="Replay every finished run of this eval (runs labelled with its id).")
@click.option("--env-version", "env_version", multiple=True, metavar="[ENV=]V",
              help="Replay against this version of the env (ENV: its id or last path segment, when the run "
                   "deployed several). Default: the version the run used. Repeatable.")
@click.option("--task-version", type=click.IntRange(min=1), help="Replay this version of the run's task.")
@click.option("--times", type=click.IntRange(1, 100), default=1, show_default=True,
              help="Replays per run (a second one is made anyway when the first differs, to tell randomness "
                   "in a tool from a change).")
@click.option("--json", "as_json", is_flag=True, help="Print the reports as JSON.")
def replay(run_id, eval_id, env_version, task_version, times, as_json):
    """Replay recorded runs: the same task, seed and env version (or --env-version), every agent replaced by
    one that makes the recorded tool calls and gives the recorded replies and verdicts; then compare tool
    results, env calls, trigger firings, each env's changelog and /state at the episode's end, criteria and
    scores. Exit 0 on no difference, 1 on any."""
    from agentenv_local.errors import NotFoundError
    from agentenv_local.query import Query

    if bool(run_id) == bool(eval_id):
        raise click.UsageError("name a RUN, or --eval ID (not both)")
    with session() as s:
        if eval_id:
            rows = s.store.runs.list(Query("runs").where("labels.eval_id", "eq", eval_id).limit(100_000))
            run_ids = [r["run_id"] for r in rows if r["status"] in ("passed", "failed", "error")]
            if not run_ids:
                raise NotFoundError(f"eval {eval_id} has no finished runs to replay",
                                    hint="run it first: agentenv eval run --id ID")
        else:
            run_ids = [s.store.runs.resolve(run_id)]
        reports = [_replay_one(s, s.store.runs.get(rid), list(env_version), task_version, times)
                   for rid in sorted(run_ids)]  # --env-version and --task-version apply to each run alike
    if as_json:
        echo_json([r.to_json() for r in reports] if eval_id else reports[0].to_json())
    elif eval_id:
        for r in reports:
            mark = "same" if not r.differences else f"{len(r.differences)} difference(s)"
            click.echo(f"{r.run_id}: {mark}" + (f", {len(r.notes)} note(s)" if r.notes else ""))
            _echo_body(r, indent="  ")
        click.echo(f"\n{sum(1 for r in reports if not r.differences)} of {len(reports)} runs replay the same.")
    else:
        _echo_body(reports[0], indent="")
        click.echo("No differences." if not reports[0].differences
                   else f"{len(reports[0].differences)} difference(s).")
    click.get_current_context().exit(1 if any(r.differences for r in reports) else 0)


def _replay_one(s: Any, run: dict, env_version: list[str], task_version: int | None, times: int):
    from agentenv_local.hub.launch import Job
    from agentenv_local.replay.replay import ReplayReport, compare_replays, prepare, view_of

    from ._drive import drive

    task_id, version, notes = prepare(s.store, run, env_version, task_version)

    def replays(n: int) -> list[dict]:
        jobs = [Job(task_id, version, run.get("seed") or None, label=f"replay of {run['run_id']}",
                    labels={"replay_of": run["run_id"]}) for _ in range(n)]
        return drive(s, jobs, concurrency=min(n, 4), verbose_steps=False, to_stderr=True)

    done = replays(times)
    recorded = view_of(s.store, run)
    found, randomness = compare_replays(recorded, [view_of(s.store, r) for r in done])
    if found and times == 1:  # once more: a tool whose answers vary by themselves is not a change
        done += replays(1)
        found, randomness = compare_replays(recorded, [view_of(s.store, r) for r in done])
    return ReplayReport(run["run_id"], [r["run_id"] for r in done], found, notes + randomness)


def _echo_body(report: Any, indent: str) -> None:
    for d in report.differences:
        click.echo(indent + d.text("recorded", "replayed"))
    for note in report.notes:
        click.echo(f"{indent}note: {note}")

