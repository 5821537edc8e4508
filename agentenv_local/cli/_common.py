"""Helpers shared by the CLI command modules: opening a session, tables, JSON, times."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click


@contextmanager
def session(config: Any = None) -> Iterator[Any]:
    """A hub session for the current project (becomes the hub if none runs); `config`: the project's,
    when the command loaded it already."""
    from agentenv_local.hub import connect

    s = connect(config=config)
    try:
        yield s
    finally:
        s.close()


def echo_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, default=str, ensure_ascii=False))


def table(rows: list[list[str]], headers: list[str]) -> None:
    if not rows:
        return
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()
    click.echo(line)
    for row in rows:
        click.echo("  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip())


def ago(ts: float | None) -> str:
    if not ts:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"


def file_count(n: int) -> str:
    """`1 file`, `3 files`."""
    return f"{n} file{'s' if n != 1 else ''}"


def score_text(score: float | None) -> str:
    return "-" if score is None else f"{score:.2f}".rstrip("0").rstrip(".") if score not in (0, 1) else str(int(score))


def serve_until_stopped(s: Any, teardown: Any) -> None:
    """Keep a command in the foreground until Ctrl-C, SIGTERM or the hub stopping, then call `teardown()`
    (what `env deploy` and `agent deploy` do when nobody else keeps the hub up)."""
    import signal
    import threading

    click.echo("Serving until Ctrl-C.", err=True)
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.wait(0.2):
            if s.is_hub and s.hub.shutdown_requested.is_set():
                break
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        teardown()


def valid_id(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A click callback for --id options: an id is stored, shown and used in keys, so refuse what breaks that."""
    from agentenv_local.inputs import id_problem, shorten

    if value is not None and (why := id_problem(value)):
        raise click.BadParameter(f"{shorten(value)} cannot be an id: {why}")
    return value


def stored_list(doc: dict, key: str) -> list | None:
    """`doc["body"][key]` when it is a list, else None: a stored body of the wrong shape is shown, not a crash."""
    body = doc.get("body")
    value = body.get(key) if isinstance(body, dict) else None
    return value if isinstance(value, list) else None


def malformed(doc: dict, what: str, key: str):
    """The error for a stored document whose body has no usable `key` list."""
    from agentenv_local.errors import ValidationError

    return ValidationError(f"{what} {doc.get('id')} v{doc.get('version')} is malformed in the store: its body has no "
                           f"'{key}' list", hint=f"store a good version with `agentenv {what} create FILE --id ID`")
