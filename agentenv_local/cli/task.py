"""`agentenv task`: create, get, validate and run stored tasks."""

from __future__ import annotations

from pathlib import Path

import click

from ._common import echo_json, malformed, session, stored_list, valid_id
from ._run_flags import executor_options, model_options, output_dir_option, write_contexts


@click.group()
def task():
    """Create, get, validate and run stored tasks."""


@task.command("create")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--id", "task_id", required=True, callback=valid_id, help="The task's id in the store.")
def create(file, task_id):
    """Validate a task JSON file and store it as the next version of --id."""
    from agentenv_local.bundles.materialize import _json_digest
    from agentenv_local.config import load_config
    from agentenv_local.inputs import read_json_file
    from agentenv_local.tasks.model import parse_task

    steps = read_json_file(file)  # read once: what is stored is what was validated
    config = load_config()  # its [task_steps] impls are step types too
    parsed = parse_task(steps, task_id, source=str(file), config=config)
    description = ""
    if isinstance(steps, dict):
        description, steps = str(steps.get("description", "")), steps["steps"]
    with session(config) as s:
        _check_artifacts(s, parsed, str(file))
        doc = s.store.documents.put("tasks", task_id, {"steps": steps, "description": description,
                                                      "source": str(file.resolve())},
                                    digest=_json_digest({"steps": steps, "description": description}))
        for step in parsed.steps:  # each step versioned on its own too, as the reference does
            s.store.documents.put("task_steps", f"{task_id}/{step.id}", step.to_json())
    click.echo(f"Created task {task_id} v{doc['version']} ({len(parsed.steps)} steps).")


def _check_artifacts(s, parsed, where: str) -> None:
    from agentenv_local.errors import ValidationError

    problems = []
    from agentenv_local.tasks.step import artifact_refs

    for step in parsed.steps:
        # On the step's JSON: parsed `artifacts` entries are models, and a check on them would skip every one.
        for field_name, ref in artifact_refs(step.to_json(), type(step)):
            if "<" not in ref and s.store.documents.find("artifacts", ref) is None:
                problems.append(f"step {step.id!r}: field {field_name!r}: artifact {ref!r} is not in the store")
    if problems:
        raise ValidationError(f"{where}: {len(problems)} problem(s); nothing was written", problems=problems,
                              hint="put the artifact first with `agentenv artifact put PATH --id ID`")


@task.command("get")
@click.option("--id", "task_id", required=True)
@click.option("--version", type=int, help="A version (default: the latest).")
def get(task_id, version):
    """Print a stored task's steps as JSON."""
    with session() as s:
        doc = s.store.documents.get("tasks", task_id, version)
    steps = stored_list(doc, "steps")
    if steps is None:
        raise malformed(doc, "task", "steps")
    echo_json(steps)


@task.command("list")
@click.option("--json", "as_json", is_flag=True)
def list_tasks(as_json):
    """Every stored task (latest versions)."""
    from agentenv_local.query import Query

    from ._common import ago, table

    with session() as s:
        docs = s.store.documents.query(Query("tasks").sort("created_at", desc=True))
    # A body of the wrong shape (written by an older version, or by hand) shows as invalid: steps None.
    rows = [{"id": d["id"], "version": d["version"], "created_at": d["created_at"],
             "steps": len(steps) if (steps := stored_list(d, "steps")) is not None else None} for d in docs]
    if as_json:
        echo_json(rows)
        return
    table([[r["id"], f"v{r['version']}", "invalid" if r["steps"] is None else str(r["steps"]), ago(r["created_at"])]
           for r in rows], ["TASK", "VERSION", "STEPS", "CREATED"])


@task.command("validate")
@click.argument("file", required=False, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--id", "task_id", help="Validate a stored task instead of a file.")
@click.option("--version", type=int)
def validate(file, task_id, version):
    """Check a task file (or a stored task) without running it: every problem at once."""
    from agentenv_local.config import load_config
    from agentenv_local.tasks.model import load_task_file, parse_task

    if bool(file) == bool(task_id):
        raise click.UsageError("give a FILE or --id (one of them)")
    config = load_config()  # its [task_steps] impls are step types too
    if file:
        parsed = load_task_file(file, config=config)
        with session(config) as s:
            _check_artifacts(s, parsed, str(file))
        click.echo(f"{file}: {len(parsed.steps)} steps, no problems found.")
        return
    with session(config) as s:
        doc = s.store.documents.get("tasks", task_id, version)
        if (steps := stored_list(doc, "steps")) is None:
            raise malformed(doc, "task", "steps")
        parsed = parse_task(steps, task_id, source=f"task {task_id} v{doc['version']}", config=config)
        _check_artifacts(s, parsed, f"task {task_id} v{doc['version']}")
    click.echo(f"{task_id} v{doc['version']}: {len(parsed.steps)} steps, no problems found.")


@task.command("run")
@click.option("--id", "task_id", required=True)
@click.option("--version", type=int)
@click.option("--k", type=click.IntRange(1, 10_000), default=1, show_default=True, help="Number of runs.")
@click.option("--concurrency", type=click.IntRange(1, 1000), help="Runs at once (default: [runner] concurrency).")
@click.option("--seeds", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="CSV: one run per row (times --k).")
@click.option("--sandbox", help="Sandbox provider for every step (overrides the steps' sandbox_type and "
              "[sandbox] default).")
@click.option("--keep", is_flag=True, help="Keep sandboxes (no teardown).")
@click.option("--agent", help="The agent the solver runs as for this run, the task left as written: each "
              "deploy_agent step whose agent a prompt_agent prompts (and any that names none) deploys it. A built-in "
              "(claude-code, tool-loop, ...) or a stored agent's id (see `agentenv agent list`).")
@model_options(agent_model_alias=True)
@executor_options
@click.option("--start-step", type=click.IntRange(min=0), default=0, show_default=True,
              help="0-based index of the step to start from: the steps before it count as done (their outputs "
                   "come from --context-json).")
@click.option("--context-json", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A run's context to start from (a file --output-dir wrote): what the skipped steps deployed "
                   "and answered.")
@output_dir_option("each run's")
@click.option("--json", "as_json", is_flag=True, help="Print the finished runs as JSON.")
def run_task(task_id, version, k, concurrency, seeds, sandbox, keep, agent, agent_model, user_model, judge_model,
             executor, ray_address, start_step, context_json, output_dir, as_json):
    """Run a stored task --k times; exit 0 only if every run passed.

    With --start-step N the first N steps are not run; the run starts from --context-json (the context a
    run wrote with --output-dir), as the reference's task run does.
    """
    from agentenv_local.errors import ValidationError
    from agentenv_local.hub.launch import Job
    from agentenv_local.tasks.options import RunOptions
    from agentenv_local.tasks.seeds import read_seeds_csv, unused_columns_note

    from ._drive import drive, exit_code
    from .run import _print_summary

    rows = read_seeds_csv(seeds) if seeds else [None]
    context = _starting_context(context_json) if context_json else None
    if start_step and context is None:
        click.echo(f"note: --start-step {start_step} without --context-json: the skipped steps' outputs start empty",
                   err=True)
    options = RunOptions(sandbox=sandbox or None, agent=agent or None, keep=keep, agent_model=agent_model or None,
                         user_model=user_model or None, judge_model=judge_model or None, start_step=start_step,
                         context=context, executor=executor, ray_address=ray_address)
    if output_dir is not None and output_dir.exists() and not output_dir.is_dir():
        raise ValidationError(f"--output-dir {output_dir} is not a folder; nothing was run")
    with session() as s:
        doc = s.store.documents.get("tasks", task_id, version)
        if stored_list(doc, "steps") is None:
            raise malformed(doc, "task", "steps")
        if seeds and (note := unused_columns_note(rows, [doc["body"]["steps"]])):
            click.echo(note, err=True)
        jobs = [Job(task_id, doc["version"], seed, label=task_id, options=options) for seed in rows for _ in range(k)]
        results = drive(s, jobs, concurrency=concurrency or int(s.config.get("runner.concurrency") or 4),
                        verbose_steps=len(jobs) == 1, to_stderr=as_json)
    written = write_contexts(results, output_dir, to_stderr=as_json) if output_dir is not None else True
    if as_json:
        echo_json(results)
    else:
        _print_summary(results)
    code = exit_code(results)
    return code if code or written else 1


def _starting_context(path: Path) -> dict:
    """--context-json: a JSON object (a context --output-dir wrote, ours or the reference's)."""
    from agentenv_local.errors import ValidationError
    from agentenv_local.inputs import read_json_file

    hint = "give a context file written by `agentenv task run --output-dir DIR`"
    context = read_json_file(path, hint=hint)
    if not isinstance(context, dict):
        raise ValidationError(f"{path}: a context is a JSON object, not {type(context).__name__}", hint=hint)
    return context
