"""`agentenv bundle init`: start a bundle folder, new or from what the store holds."""

from __future__ import annotations

from pathlib import Path

import click


@click.group("bundle")
def bundle_group() -> None:
    """Create bundle folders, which `agentenv run` runs."""


@bundle_group.command("init")
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path))
@click.option("--from-task", "task_id", help="Write this stored task (by id) and everything it uses.")
@click.option("--from-eval", "eval_id", help="Write this stored eval (by id), its tasks and everything they use.")
@click.option("--version", type=click.IntRange(min=1), help="The version of the task or eval (default: the latest).")
@click.option("--include-scope", "include_scopes", multiple=True, type=click.Choice(["user"]),
              help="Keep the fields of this scope as stored (user: the agent, sandbox provider, models), as the "
                   "reference's option does; an agent named by id then still needs the store.")
def init(folder: Path, task_id: str | None, eval_id: str | None, version: int | None,
         include_scopes: tuple[str, ...]) -> None:
    """Write a bundle at FOLDER, which must be new or empty.

    With no option: a new bundle that runs as it is (one task, one artifact, a README), to change from there.
    With --from-task or --from-eval: the stored task, or the eval and its tasks, with every artifact and env they
    use as folders of the bundle, so it runs with no store. Fields of your setup (the agent, the sandbox
    provider, models) and values that look like secrets are left out, and listed (--include-scope user keeps
    the first). Nothing is written to the store, and a failure writes no folder.
    """
    if task_id is not None and eval_id is not None:
        raise click.UsageError("give --from-task or --from-eval, not both")
    if (version is not None or include_scopes) and task_id is None and eval_id is None:
        raise click.UsageError("--version and --include-scope need --from-task or --from-eval")
    if task_id is None and eval_id is None:
        from agentenv_local.bundles.scaffold import scaffold

        written = scaffold(folder)
        click.echo(f"Created a new bundle in {folder}:")
        for rel in written:
            click.echo(f"  {rel}")
        click.echo(f"Run it with: agentenv run {_run_arg(folder)}")
        return
    from agentenv_local.bundles.export import check_target, export

    from ._common import session

    check_target(folder)  # before the store is opened: a refused folder costs nothing
    with session() as s:
        result = export(s.store, s.config, folder, task_id=task_id, eval_id=eval_id, version=version,
                        keep_user_fields="user" in include_scopes)
    click.echo(f"Wrote {result.what} into {folder}:")
    for rel in sorted(result.files):
        click.echo(f"  {rel}")
    if result.left_out:
        click.echo("Left out:")
        for line in result.left_out:
            click.echo(f"  {line}")
    if result.needs_store:
        click.echo("Still needs the store:")
        for line in result.needs_store:
            click.echo(f"  {line}")
    click.echo(f"Run it with: agentenv run {_run_arg(folder)}")


def _run_arg(folder: Path) -> str:
    """FOLDER as `agentenv run` takes it: a bare name would be looked up as a known bundle first."""
    text = str(folder)
    return text if "/" in text or text.startswith(".") else f"./{text}"
