"""`agentenv export runs`: finished runs as episodes for trainers (JSONL, or Parquet written by DuckDB)."""

from __future__ import annotations

from pathlib import Path

import click

from ._common import session


@click.group("export")
def export_group():
    """Export episodes out of the store, for training and analysis."""


@export_group.command("runs")
@click.option("--task", "task", help="Only runs of this task id (or its name, the id's last segment).")
@click.option("--eval", "eval_id", help="Only runs that `agentenv eval run --id EVAL` started.")
@click.option("--since", help="Only runs created at or after this ISO date or date-time (UTC unless zoned).")
@click.option("--status", type=click.Choice(["passed", "failed", "error", "cancelled", "interrupted"]),
              help="Only runs that ended so.")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "parquet"]),
              help="The file's format (default: from -o's suffix, .parquet or else jsonl).")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="The file to write (replaced whole; written beside it first, so never half written).")
def export_runs(task, eval_id, since, status, fmt, output):
    """One row per finished run: ids, task version, seed, status, score, criteria, OpenAI-style messages,
    trajectory, model usage and timings (fields: docs/training.md)."""
    from agentenv_local.episodes.export import episodes, parse_since, select_run_ids, write_episodes

    fmt = fmt or ("parquet" if output.suffix.lower() == ".parquet" else "jsonl")
    since_ts = parse_since(since) if since else None
    with session() as s:
        run_ids = select_run_ids(s.store, task=task, eval_id=eval_id, since=since_ts, status=status)
        count = write_episodes(episodes(s.store, run_ids), output, fmt)
    click.echo(f"Exported {count} episode{'s' if count != 1 else ''} to {output} ({fmt}).")
    if not count:
        click.echo("No finished run matched: see them with `agentenv runs list`.", err=True)
