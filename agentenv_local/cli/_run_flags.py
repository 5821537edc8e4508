"""Flags several run commands share: the per-run models (`run`, `task run`, `eval run`) and where the
runs' contexts are written (`--output-dir`, as the reference's task/eval run write them)."""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])
MAX_NAME = 96  # of a context file's name, before its _<8 hex>.json


def model_options(agent_model_alias: bool) -> Callable[[F], F]:
    """--model (also --agent-model, the reference's spelling on task/eval run), --user-model, --judge-model."""
    solver = ("--model", "--agent-model") if agent_model_alias else ("--model",)

    def add(command: F) -> F:
        for option in reversed((
            click.option(*solver, "agent_model", metavar="NAME",
                         help="The model the solver runs on for this run, whatever the tasks name (over "
                              "[model.roles] agent / [model] default). A model name only: keys stay in [model]."),
            click.option("--user-model", metavar="NAME",
                         help="The model the user simulator runs on for this run, whatever the tasks name."),
            click.option("--judge-model", metavar="NAME",
                         help="The model rubrics_verifier judges grade with for this run, whatever the tasks name."),
        )):
            command = option(command)
        return command

    return add


def executor_options(command: F) -> F:
    """--executor and --ray-address: where the runs execute (docs/scale-out.md)."""
    command = click.option("--ray-address", metavar="HOST:PORT",
                           help="The Ray cluster's head for --executor ray (over [executor] ray_address; auto: "
                                "RAY_ADDRESS or this machine's cluster).")(command)
    return click.option("--executor", type=click.Choice(["local", "workers", "ray"]),
                        help="Where the runs execute: local (the hub, the default), workers (the hub's worker "
                             "processes, one per core) or ray (a Ray cluster's workers; the results land in this "
                             "project's store). Over [executor] kind.")(command)


def output_dir_option(what: str) -> Callable[[F], F]:
    return click.option("--output-dir", type=click.Path(file_okay=False, path_type=Path),
                        help=f"Write {what} context (the run's final state) as JSON into this folder, one "
                             "<task>_<8 hex>.json file per run, as the reference does.")


def write_contexts(runs: list[dict[str, Any]], output_dir: Path, to_stderr: bool) -> bool:
    """Each run's context as `<task id, filename-safe>_<8 hex>.json` in `output_dir`; one line per file.
    Returns False when one could not be written (said on stderr; the others are still written)."""
    ok = True
    try:
        output_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        click.echo(f"Error: cannot create --output-dir {output_dir}: {exc.strerror or exc}", err=True)
        return False
    for run in runs:
        context = run.get("context")
        if not isinstance(context, dict):
            continue
        # The id made filename-safe; a long one (an @local id holds the bundle's path) keeps its end, the task.
        name = re.sub(r"[^A-Za-z0-9._-]+", "-", str(run.get("task_id") or "task"))[-MAX_NAME:].strip("-.") or "task"
        path = output_dir / f"{name}_{secrets.token_hex(4)}.json"
        try:
            with open(path, "x", encoding="utf-8") as handle:  # "x": never over a file that is there
                json.dump(context, handle, indent=2, default=str)
        except OSError as exc:
            ok = False
            click.echo(f"Couldn't write run {run.get('run_id')}'s context to {path}: {exc.strerror or exc}", err=True)
            continue
        click.echo(f"Task context written to: {path}", err=to_stderr)
    return ok
