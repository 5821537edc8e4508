"""`agentenv run [BUNDLE]`: list the bundles there are, or run one's evals/tasks."""

from __future__ import annotations

from pathlib import Path

import click

from ._run_flags import executor_options, model_options


@click.command()
@click.argument("bundle", required=False)
@click.option("--task", "tasks", multiple=True, help="Run only this task (its name in tasks/). Repeatable.")
@click.option("--eval", "evals", multiple=True, help="Run only this eval (its name in evals/). Repeatable.")
@click.option("--k", "k", type=click.IntRange(1, 10_000), default=1, show_default=True, help="Runs of each task.")
@click.option("--concurrency", type=click.IntRange(1, 1000), default=None,
              help="Runs at once (default: [runner] concurrency, 4).")
@click.option("--seeds", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="CSV file: one run per row, its columns fill <key> placeholders.")
@click.option("--sandbox", help="Sandbox provider for every step (overrides the steps' sandbox_type and "
              "[sandbox] default).")
@click.option("--agent", "agent", help="The agent the solver runs as for this run, the tasks left as written: each "
              "deploy_agent step whose agent a prompt_agent prompts (and any that names none) deploys it, and its "
              "install_agent steps install it. A built-in (claude-code, tool-loop, ...), an agent of this bundle (its "
              "folder name, alias or id) or the store's (see `agentenv agent list`).")
@model_options(agent_model_alias=False)
@executor_options
@click.option("--keep", is_flag=True, help="Keep sandboxes after the run (no teardown).")
@click.option("--dry-run", is_flag=True, help="Check everything and print what would be written and run.")
@click.option("--follow-external-links", is_flag=True,
              help="Store what symlinks in the bundle's folders point to outside the bundle (refused by default).")
@click.option("--json", "as_json", is_flag=True, help="With no BUNDLE: list bundles as JSON. Else: runs as JSON.")
def run(bundle, tasks, evals, k, concurrency, seeds, sandbox, agent, agent_model, user_model, judge_model, executor,
        ray_address, keep, dry_run, follow_external_links, as_json):
    """Run a bundle (a folder, or the name of a known bundle), or list the known bundles.

    Runs every eval of the bundle (else every task), each --k times, --concurrency at once.
    Exit 0 when every run passed, 1 otherwise, 130 on Ctrl-C.
    """
    if bundle is None:
        if agent_model or user_model or judge_model:
            raise click.UsageError("--model, --user-model and --judge-model need a BUNDLE to run")
        return _list_bundles(as_json)
    from agentenv_local.bundles import find_bundle, load_bundle, materialize
    from agentenv_local.config import load_config
    from agentenv_local.errors import ValidationError
    from agentenv_local.hub.launch import Job
    from agentenv_local.tasks.options import RunOptions
    from agentenv_local.tasks.seeds import read_seeds_csv, unused_columns_note

    from ._common import echo_json, session
    from ._drive import drive, exit_code

    folder, package = find_bundle(bundle)
    config = load_config()  # first: its [task_steps] impls are step types of the bundle's tasks
    loaded = load_bundle(folder, package, follow_external_links=follow_external_links, config=config)
    for ignored in loaded.ignored:  # what the bundle holds that means nothing here, before any check can fail
        click.echo(f"note: {ignored}", err=True)
    selected = _select(loaded, tasks, evals)
    if not selected:  # checked before anything is written
        raise ValidationError(f"bundle {folder} has no tasks to run; nothing was written",
                              hint="add a task as tasks/<name>.json (a JSON list of steps)")
    seed_rows = read_seeds_csv(seeds) if seeds else [None]
    options = RunOptions(sandbox=sandbox or None, agent=agent or None, keep=keep, agent_model=agent_model or None,
                         user_model=user_model or None, judge_model=judge_model or None, executor=executor,
                         ray_address=ray_address)
    if seeds and (note := unused_columns_note(seed_rows, [loaded.tasks[t].steps for t in selected])):
        click.echo(note, err=True)
    with session(config) as s:
        if options.agent:  # a name of the bundle's own agents becomes what its tasks' fields get (kept on resume)
            from dataclasses import replace

            options = replace(options, agent=_run_agent(s.store, loaded, options.agent))
        result = materialize(s.store, loaded, dry_run=dry_run, sandbox=options.sandbox, agent=options.agent)
        if dry_run and as_json:
            echo_json({"dry_run": True, "ignored": list(loaded.ignored),
                       "plan": [{"kind": ln.kind, "name": ln.name, "id": ln.id, "version": ln.version,
                                 "status": ln.status} for ln in result.lines],
                       "would_run": [{"task": f"tasks/{t}.json", "task_id": result.task_versions[t][0],
                                      "version": result.task_versions[t][1], "runs": len(seed_rows) * k}
                                     for t in selected]})
            return 0
        if dry_run:
            click.echo("Dry run: nothing is written or run.")
        for line in result.lines:  # with --json, stdout carries only the JSON
            click.echo(line.render(), err=as_json)
        for kind in loaded.deferred:
            click.echo(f"note: {kind}/ is not used yet by this version (it arrives with a later release)", err=True)
        jobs = []
        for task_name in selected:
            task_id, version = result.task_versions[task_name]
            for seed in seed_rows:
                for _ in range(k):
                    jobs.append(Job(task_id, version, seed, label=f"tasks/{task_name}.json", options=options))
        if dry_run:
            for task_name in selected:
                click.echo(f"Would run: tasks/{task_name}.json v{result.task_versions[task_name][1]}"
                           + (f" x{len(seed_rows) * k}" if len(seed_rows) * k > 1 else ""))
            return 0
        n = concurrency or int(s.config.get("runner.concurrency") or 4)
        runs = drive(s, jobs, concurrency=n, verbose_steps=len(jobs) == 1, to_stderr=as_json)
        if as_json:
            echo_json(runs)
        else:
            _print_summary(runs)
        return exit_code(runs)


def _run_agent(store, bundle, name: str) -> str:
    """What --agent NAME names: the bundle's agent (its folder name, id, or an alias the store has no agent of) as
    its tasks' fields get it, else NAME itself (a built-in or stored agent: the dry-run checks of each step that
    would deploy it say when there is none, listing the names there are)."""
    from agentenv_local.bundles.agents import bundle_agent

    return bundle_agent(bundle, name, store) or name


def _select(bundle, tasks, evals) -> list[str]:
    from agentenv_local.errors import ValidationError

    if tasks:
        unknown = [t for t in tasks if t.removesuffix(".json").removeprefix("tasks/") not in bundle.tasks]
        if unknown:
            raise ValidationError(f"no task named {', '.join(unknown)} in {bundle.path}",
                                  hint=f"tasks here: {', '.join(bundle.tasks) or 'none'}")
        return [t.removesuffix(".json").removeprefix("tasks/") for t in tasks]
    chosen_evals = list(evals) or list(bundle.evals)
    if evals:
        unknown = [e for e in evals if e not in bundle.evals]
        if unknown:
            raise ValidationError(f"no eval named {', '.join(unknown)} in {bundle.path}",
                                  hint=f"evals here: {', '.join(bundle.evals) or 'none'}")
    if chosen_evals:  # each task once, however many evals name it (a dict keeps the order, and is fast)
        return list(dict.fromkeys(t for e in chosen_evals for t in bundle.evals[e].task_names))
    return list(bundle.tasks)


def _print_summary(runs: list[dict]) -> None:
    from ._common import duration

    passed = sum(1 for r in runs if r["status"] == "passed")
    if models := _models_named(runs):
        click.echo(f"Models named for this run: {models}.")
    if len(runs) > 1:
        took = [r.get("duration_s") or 0 for r in runs]
        click.echo(f"\n{passed} of {len(runs)} runs passed (mean {duration(sum(took) / len(took))} per run).")
    torn = sum(len(r.get("context", {}).get("metadata", {}).get("torn_down_sandbox_ids", [])) for r in runs)
    envs = sum(1 for r in runs for e in r.get("context", {}).get("deployed_envs", []) if e.get("torn_down"))
    done = [f"{torn} sandbox{'es' if torn != 1 else ''}" if torn else "",
            f"{envs} env instance{'s' if envs != 1 else ''}" if envs else ""]
    if torn or envs:
        click.echo(f"Tore down {' and '.join(d for d in done if d)}.")
    failed = [r for r in runs if r["status"] != "passed"]
    if failed:
        click.echo(f"See why with: agentenv runs show {failed[0]['run_id']}")


def _models_named(runs: list[dict]) -> str:
    """The models --model/--user-model/--judge-model named (the same for every run of one command)."""
    overrides = (runs[0].get("overrides") or {}) if runs else {}
    roles = (("solver", "agent_model"), ("user simulator", "user_model"), ("judge", "judge_model"))
    return ", ".join(f"{role} {overrides[key]}" for role, key in roles if overrides.get(key))


def _list_bundles(as_json: bool) -> int:
    from agentenv_local.bundles import known_bundles

    from ._common import echo_json, table

    bundles = known_bundles()
    if as_json:
        echo_json([b.to_dict() for b in bundles])
        return 0
    table([[b.name, b.package, f"{b.tasks} task{'s' if b.tasks != 1 else ''}", b.description[:70]] for b in bundles],
          ["NAME", "PACKAGE", "CONTENTS", "DESCRIPTION"])
    click.echo("\nRun one with: agentenv run NAME. To change one, copy its folder and run the copy: "
               "agentenv run ./FOLDER")
    return 0
