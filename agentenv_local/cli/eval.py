"""`agentenv eval`: an eval is a versioned list of tasks; running it runs each task."""

from __future__ import annotations

from pathlib import Path

import click

from agentenv_local.inputs import shorten

from ._common import echo_json, malformed, session, stored_list, valid_id
from ._run_flags import executor_options, model_options, output_dir_option, write_contexts


@click.group("eval")
def eval_group():
    """Create, list and run evals (sets of tasks)."""


MAX_EVAL_ENTRIES = 10_000  # the same limit as a bundle's evals/*.toml


def _read_eval_file(path: Path) -> list[dict]:
    from agentenv_local.errors import ValidationError
    from agentenv_local.inputs import read_json_file, refused
    from agentenv_local.untrusted import UntrustedInputError, parse_toml, read_file

    hint = 'JSON: [{"task_id": "x", "task_version": 1}, ...]; TOML: tasks = ["x", ...]'
    if path.suffix == ".toml":
        try:
            text = read_file(path, what=str(path), max_bytes=4 << 20).decode("utf-8-sig")
            data = parse_toml(text, what=str(path))
        except UnicodeDecodeError as exc:
            raise ValidationError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
        except UntrustedInputError as exc:
            raise ValidationError(refused(str(path), exc), hint=hint) from None
    else:
        data = read_json_file(path, hint=hint, max_bytes=4 << 20)
    entries = data.get("tasks") if isinstance(data, dict) else data
    if not isinstance(entries, list) or not entries:
        raise ValidationError(f"{path}: field 'tasks': an eval is a non-empty list of tasks", hint=hint)
    if len(entries) > MAX_EVAL_ENTRIES:
        raise ValidationError(f"{path}: field 'tasks': {len(entries)} entries, over the limit of {MAX_EVAL_ENTRIES}",
                              hint="an eval names each task once; run it with --k for repeats")
    out = []
    for i, e in enumerate(entries, start=1):
        if isinstance(e, str):
            e = {"task_id": e}
        if not isinstance(e, dict) or not isinstance(e.get("task_id"), str) or not e["task_id"]:
            raise ValidationError(f"{path}: 'tasks' entry {i}: field 'task_id': missing or not a non-empty string")
        version = e.get("task_version")
        if version is not None and (not isinstance(version, int) or isinstance(version, bool) or version < 1):
            raise ValidationError(f"{path}: 'tasks' entry {i}: field 'task_version': must be a positive integer, "
                                  f"got {shorten(version)}")
        out.append({"task_id": e["task_id"], "task_version": e.get("task_version")})
    return out


def _some(names: list[str], n: int = 10) -> str:
    return ", ".join(names[:n]) + (f" and {len(names) - n} more" if len(names) > n else "")


@eval_group.command("create")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--id", "eval_id", required=True, callback=valid_id)
def create(file, eval_id):
    """Store an eval (JSON list of {task_id, task_version?}, or TOML tasks = [...])."""
    from agentenv_local.errors import ValidationError

    tasks = _read_eval_file(file)
    with session() as s:
        wanted = dict.fromkeys((t["task_id"], t["task_version"]) for t in tasks)  # each looked up once
        missing = [shorten(tid, 60, quote=False) + (f" v{v}" if v else "") for tid, v in wanted
                   if s.store.documents.find("tasks", tid, v) is None]
        if missing:
            raise ValidationError(f"{file}: unknown task(s) in 'tasks': {_some(missing)}; nothing was written",
                                  hint="create them first with `agentenv task create FILE --id ID`")
        doc = s.store.documents.put("evals", eval_id, {"tasks": tasks, "source": str(file.resolve())})
    click.echo(f"Created eval {eval_id} v{doc['version']} ({len(tasks)} task{'s' if len(tasks) != 1 else ''}).")


@eval_group.command("add-tasks")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--id", "eval_id", required=True, help="The stored eval to add to.")
@click.option("--version", type=click.IntRange(min=1), help="The eval version to start from (default: the latest).")
def add_tasks(file, eval_id, version):
    """Store a new version of an eval with FILE's tasks added (an entry replaces one of the same task_id).

    FILE is read as for `eval create`. Every task it names must be stored; otherwise nothing is written.
    """
    from agentenv_local.errors import ValidationError

    added = _read_eval_file(file)
    with session() as s:
        base = s.store.documents.get("evals", eval_id, version)
        entries = stored_list(base, "tasks")
        if entries is None or not all(isinstance(t, dict) and isinstance(t.get("task_id"), str) for t in entries):
            raise malformed(base, "eval", "tasks")
        wanted = dict.fromkeys((t["task_id"], t["task_version"]) for t in added)
        missing = [shorten(tid, 60, quote=False) + (f" v{v}" if v else "") for tid, v in wanted
                   if s.store.documents.find("tasks", tid, v) is None]
        if missing:
            raise ValidationError(f"{file}: unknown task(s) in 'tasks': {_some(missing)}; nothing was written",
                                  hint="create them first with `agentenv task create FILE --id ID`")
        # Keyed by task_id: a new entry replaces an old one in its place; new task ids go at the end.
        merged = {t["task_id"]: {"task_id": t["task_id"], "task_version": t.get("task_version")} for t in entries}
        merged.update((t["task_id"], t) for t in added)
        doc = s.store.documents.put("evals", eval_id, {"tasks": list(merged.values()),
                                                       "source": str(file.resolve())})
    new_ids = {t["task_id"] for t in added}
    replaced = len(new_ids & {e["task_id"] for e in entries})
    click.echo(f"Created eval {eval_id} v{doc['version']} from v{base['version']}: {len(merged)} task(s) "
               f"({len(new_ids) - replaced} added, {replaced} replaced).")


@eval_group.command("list")
@click.option("--json", "as_json", is_flag=True)
def list_evals(as_json):
    """Every stored eval (latest versions), newest first."""
    from agentenv_local.query import Query

    from ._common import ago, table

    with session() as s:
        docs = s.store.documents.query(Query("evals").sort("created_at", desc=True))
    rows = [{"id": d["id"], "version": d["version"], "created_at": d["created_at"],
             "tasks": len(tasks) if (tasks := stored_list(d, "tasks")) is not None else None} for d in docs]
    if as_json:
        echo_json(rows)
        return
    if not rows:
        click.echo("No evals yet. Create one with: agentenv eval create FILE --id ID")
        return
    table([[r["id"], f"v{r['version']}", "invalid" if r["tasks"] is None else str(r["tasks"]), ago(r["created_at"])]
           for r in rows],
          ["EVAL", "VERSION", "TASKS", "CREATED"])


@eval_group.command("run")
@click.option("--id", "eval_id", required=True)
@click.option("--version", type=int)
@click.option("--k", type=click.IntRange(1, 10_000), default=1, show_default=True, help="Runs of each task.")
@click.option("--concurrency", type=click.IntRange(1, 1000), help="Runs at once.")
@click.option("--sandbox", help="Sandbox provider for every step (overrides the steps' sandbox_type and "
              "[sandbox] default).")
@model_options(agent_model_alias=True)
@executor_options
@output_dir_option("each run's")
@click.option("--json", "as_json", is_flag=True)
def run_eval(eval_id, version, k, concurrency, sandbox, agent_model, user_model, judge_model, executor, ray_address,
             output_dir, as_json):
    """Run every task of an eval --k times; prints each run's result and the pass rate."""
    import secrets

    from agentenv_local.hub.launch import Job
    from agentenv_local.tasks.options import RunOptions

    from ._drive import drive, exit_code

    options = RunOptions(sandbox=sandbox or None, agent_model=agent_model or None, user_model=user_model or None,
                         judge_model=judge_model or None, executor=executor, ray_address=ray_address)
    with session() as s:
        doc = s.store.documents.get("evals", eval_id, version)
        entries = stored_list(doc, "tasks")
        if not entries or not all(isinstance(t, dict) and isinstance(t.get("task_id"), str) for t in entries):
            raise malformed(doc, "eval", "tasks")
        group = f"eval-{secrets.token_hex(4)}"
        labels = {"eval_id": eval_id, "eval_version": doc["version"]}
        jobs = [Job(t["task_id"], t.get("task_version"), label=t["task_id"], group_id=group, options=options,
                    labels=labels)
                for t in entries for _ in range(k)]
        results = drive(s, jobs, concurrency=concurrency or int(s.config.get("runner.concurrency") or 4),
                        verbose_steps=False, to_stderr=as_json)
    written = write_contexts(results, output_dir, to_stderr=as_json) if output_dir is not None else True
    if as_json:
        echo_json(results)
    else:
        passed = sum(1 for r in results if r["status"] == "passed")
        click.echo(f"\neval {eval_id} v{doc['version']}: {passed} of {len(results)} passed")
    code = exit_code(results)
    return code if code or written else 1
