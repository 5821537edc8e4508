"""Helpers shared by the CLI command modules: opening a session, tables, JSON, times."""

from __future__ import annotations

import json
import time
from contextlib import contextmanager
from typing import Any, Iterator

import click


@contextmanager
def session() -> Iterator[Any]:
    """A hub session for the current project (becomes the hub if none runs)."""
    from agentenv_local.hub import connect

    s = connect()
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
