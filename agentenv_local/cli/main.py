"""Root of the `agentenv` command: a lazy click group.

Every top-level command, built-in or a plugin's, is an entry of the `agentenv_local.cli` entry-point
group (the built-ins' are in pyproject.toml and point at agentenv_local/cli/commands.py, the TUI's at
tui/command.py). `agentenv --help` lists them from the entry points without importing their modules: a
built-in is a LazyCommand that knows its one-line help and imports its module only when it runs.
"""

from __future__ import annotations

import logging
import sys

import click

from agentenv_local import __version__


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(self.commands) | _registered_commands())

    def _entry(self, name: str) -> click.Command | None:
        """The registered command `name` as found (a LazyCommand is not imported yet)."""
        if name not in _registered_commands():
            return None
        from agentenv_local.plugins import registry

        command = registry().get("cli", name)
        if command is None:
            # A broken CLI plugin must not break the CLI: say why and skip it.
            reason = registry().failure("cli", name) or "unknown reason"
            return click.Command(name, help=f"(plugin failed to load: {reason})",
                                 callback=lambda: _fail(f"the plugin command {name!r} failed to load: {reason}"))
        return command

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.commands:
            return self.commands[name]
        command = self._entry(name)
        if command is None:
            return None
        from agentenv_local.cli.commands import LazyCommand

        if isinstance(command, LazyCommand):
            command = command.load()
        self.add_command(command, name)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.commands.get(name) or self._entry(name)
            rows.append((name, cmd.get_short_help_str(limit=formatter.width) if cmd else ""))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _registered_commands() -> set[str]:
    """Top-level command names in the `agentenv_local.cli` group (found, not imported); a built-in's name
    cannot be taken, and a name two plugins claim is offered by neither (see `agentenv plugin list`)."""
    from agentenv_local.plugins import registry

    return {name for name in registry().contributions("cli") if ":" not in name}


def core_commands() -> list[str]:
    """The names of the built-in top-level commands (agentenv-local's own entries in the cli group)."""
    from agentenv_local.plugins import registry

    return sorted(name for name, c in registry().contributions("cli").items() if c.builtin and ":" not in name)


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
