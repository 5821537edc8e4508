"""Root of the `agentenv` command: a lazy click group.

Subcommands are named here as "module:attribute" and imported only when invoked (or when
`--help` lists them, which reads just their short help from LAZY_HELP), so `agentenv --help`
stays fast. Plugins add top-level commands through the `agentenv_local.cli` entry-point group.
"""

from __future__ import annotations

import logging
import sys

import click

from agentenv_local import __version__

# name -> (import path, one-line help shown by `agentenv --help` without importing it)
LAZY_COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("agentenv_local.cli.run:run", "Run a bundle's tasks, or list the bundles there are."),
    "runs": ("agentenv_local.cli.runs:runs", "List, show, resume and cancel runs."),
    "tui": ("agentenv_local.cli.tui:tui", "Watch runs live in a terminal UI (DAG, clock, triggers, tool calls, scores)."),
    "human": ("agentenv_local.cli.human:human", "Answer the questions human agents of live runs wait on."),
    "task": ("agentenv_local.cli.task:task", "Create, get, validate and run stored tasks."),
    "artifact": ("agentenv_local.cli.artifact:artifact", "Put, get and list artifacts (files and file bundles)."),
    "eval": ("agentenv_local.cli.eval:eval_group", "Create and run evals (sets of tasks)."),
    "env": ("agentenv_local.cli.env:env_group", "Put, deploy and develop environments (MCP servers, multi envs)."),
    "gateway": ("agentenv_local.cli.gateway:gateway_group", "Use a deployed env's gateway from stdio MCP clients."),
    "agent": ("agentenv_local.cli.agent:agent_group", "Store, list, deploy and validate A2A agents."),
    "sandbox": ("agentenv_local.cli.sandbox:sandbox_group", "Set up Podman; list, exec into, read logs of and prune sandboxes."),
    "image": ("agentenv_local.cli.image:image_group", "Build, import and list images in Podman's local storage."),
    "docs": ("agentenv_local.cli.docs:docs_group", "Search and read the docs, or serve them over MCP (offline)."),
    "config": ("agentenv_local.cli.config:config", "Show the resolved configuration and where each value came from."),
    "plugin": ("agentenv_local.cli.plugin:plugin", "List installed plugins and what they contribute."),
    "up": ("agentenv_local.cli.hub:up", "Start a long-lived hub for this project."),
    "down": ("agentenv_local.cli.hub:down", "Stop this project's hub."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(LAZY_COMMANDS) | set(self.commands) | set(_plugin_commands()))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.commands:
            return self.commands[name]
        if name in LAZY_COMMANDS:
            module_name, _, attr = LAZY_COMMANDS[name][0].partition(":")
            import importlib

            command = getattr(importlib.import_module(module_name), attr)
        elif name in _plugin_commands():
            from agentenv_local.plugins import registry

            command = registry().get("cli", name)
            if command is None:
                # A broken CLI plugin must not break the CLI: say why and skip it.
                reason = registry().failure("cli", name) or "unknown reason"
                return click.Command(name, help=f"(plugin failed to load: {reason})",
                                     callback=lambda: _fail(f"the plugin command {name!r} failed to load: {reason}"))
        else:
            return None
        self.add_command(command, name)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            if name in LAZY_COMMANDS:
                rows.append((name, LAZY_COMMANDS[name][1]))
            else:
                cmd = self.get_command(ctx, name)
                rows.append((name, cmd.get_short_help_str(limit=formatter.width) if cmd else ""))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _plugin_commands() -> set[str]:
    """Top-level command names contributed by plugins (found, not imported); core names win,
    and a name two plugins claim is offered by neither (see `agentenv plugin list`)."""
    from agentenv_local.plugins import registry

    return {name for name in registry().contributions("cli") if ":" not in name and name not in LAZY_COMMANDS}


def _fail(message: str) -> None:
    click.echo(f"Error: {message}", err=True)
    sys.exit(1)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="agentenv", message="%(prog)s %(version)s")
@click.option("-v", "--verbose", count=True, help="More logging (-v info, -vv debug).")
def cli(verbose: int) -> None:
    """agentenv: build RL environments for LLM agents and run graded tasks in them, locally.

    Start with `agentenv run hello`.
    """
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")


def main() -> None:
    """Console entry: map our errors to exit codes (1 failure, 2 usage, 130 Ctrl-C)."""
    from agentenv_local.errors import AgentenvError

    for stream in (sys.stdout, sys.stderr):
        # A file name that is not UTF-8 reaches output as lone surrogates: print them as \udcff
        # escapes instead of failing with UnicodeEncodeError (only where the stream would fail).
        if getattr(stream, "errors", None) == "strict" and hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    try:
        rv = cli.main(standalone_mode=False)
        sys.exit(rv if isinstance(rv, int) else 0)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(130)
    except KeyboardInterrupt:
        click.echo("Interrupted.", err=True)
        sys.exit(130)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except AgentenvError as exc:
        click.echo(exc.render(), err=True)
        sys.exit(exc.exit_code)
    except OSError as exc:  # full disk, permissions, a vanished folder: say what, not a traceback
        import errno

        where = f": {exc.filename}" if exc.filename else ""
        click.echo(f"Error: {exc.strerror or exc}{where}", err=True)
        if exc.errno == errno.ENOSPC:
            from pathlib import Path

            from agentenv_local.paths import find_state_dir

            folder = Path(exc.filename).parent if exc.filename else find_state_dir()
            click.echo(f"Hint: the disk is full; free some space on the disk that holds {folder} "
                       f"(`df -h {folder}`) and run the command again (nothing half-written was recorded)", err=True)
        elif exc.errno in (errno.EACCES, errno.EPERM):
            click.echo("Hint: check the permissions of that path", err=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
