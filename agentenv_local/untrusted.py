"""Parse JSON and TOML that came from outside (files a user wrote, request bodies) within bounds.

Python's parsers fail on hostile input with errors that are not `ValueError` (a `RecursionError` on
deep nesting) or with messages that name no file (a 5,000-digit number). Everything here raises one
`UntrustedInputError` whose message says what was wrong and where, and also refuses what would break a
later layer: nesting deeper than `max_depth`, strings holding lone surrogates (DuckDB and UTF-8 files
cannot store them), and bodies over `max_bytes`.
"""

from __future__ import annotations

import json
import re
from typing import Any

DEFAULT_MAX_DEPTH = 64


class UntrustedInputError(ValueError):
    """Input refused: malformed, too deep, too large, or not storable as UTF-8."""


def parse_json(raw: str | bytes, *, what: str = "JSON", max_depth: int = DEFAULT_MAX_DEPTH,
               max_bytes: int | None = None) -> Any:
    """`json.loads` that raises only `UntrustedInputError` and checks depth, size and surrogates."""
    if max_bytes is not None and len(raw) > max_bytes:
        raise UntrustedInputError(f"{what} is {len(raw)} bytes, over the limit of {max_bytes}")
    try:
        value = json.loads(raw)
    except RecursionError:
        raise UntrustedInputError(f"{what} is nested too deeply (the limit is {max_depth} levels)"
                                  f"{_deep_line(raw, max_depth)}") from None
    except UnicodeDecodeError as e:
        raise UntrustedInputError(f"{what} is not valid UTF-8 ({e.reason} at byte {e.start})") from None
    except json.JSONDecodeError as e:
        raise UntrustedInputError(f"{what} is not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})") from None
    except ValueError as e:  # e.g. an integer literal past Python's digit limit
        raise UntrustedInputError(f"{what} is not usable: {_first_clause(e)}{_long_number_line(raw)}") from None
    check_shape(value, what=what, max_depth=max_depth)
    return value


def _first_clause(e: Exception) -> str:
    # Python's digit-limit message ends in advice about sys.set_int_max_str_digits, which is not the user's fix.
    return str(e).split(";")[0]


def _deep_line(raw: str | bytes, max_depth: int) -> str:
    """' (line N)' where JSON text first nests past `max_depth`; '' if it cannot tell."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    depth, in_string, escaped, line = 0, False, False, 1
    for ch in text:
        if ch == "\n":
            line += 1
        elif in_string:
            escaped, in_string = (False, True) if escaped else (ch == "\\", ch != '"')
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > max_depth:
                return f" (line {line})"
        elif ch in "]}":
            depth -= 1
    return ""


def _long_number_line(raw: str | bytes) -> str:
    """' (line N)' of the first run of digits past Python's limit, to point at it; '' if none."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    m = re.search(r"\d{4300,}", text)
    return f" (line {text.count(chr(10), 0, m.start()) + 1})" if m else ""


def parse_toml(text: str, *, what: str = "TOML", max_depth: int = DEFAULT_MAX_DEPTH) -> dict[str, Any]:
    """`tomllib.loads` that raises only `UntrustedInputError` and checks depth and surrogates."""
    import tomllib

    try:
        value = tomllib.loads(text)
    except RecursionError:
        raise UntrustedInputError(f"{what} is nested too deeply (the limit is {max_depth} levels)") from None
    except tomllib.TOMLDecodeError as e:
        raise UntrustedInputError(f"{what} is not valid TOML: {e}") from None
    except ValueError as e:
        raise UntrustedInputError(f"{what} is not usable: {_first_clause(e)}{_long_number_line(text)}") from None
    check_shape(value, what=what, max_depth=max_depth)
    return value


def check_shape(value: Any, *, what: str = "input", max_depth: int = DEFAULT_MAX_DEPTH) -> None:
    """Refuse nesting deeper than `max_depth` and strings (values or keys) that are not valid UTF-8.

    Iterative, so a value that Python could build but not recurse through is still checked. Messages
    name where the bad value is (`[0].sandbox_name`)."""
    stack: list[tuple[Any, int, tuple]] = [(value, 1, ())]
    while stack:
        item, depth, at = stack.pop()
        if isinstance(item, str):
            _check_text(item, what, at)
        elif isinstance(item, dict | list | tuple):
            if depth > max_depth:
                raise UntrustedInputError(f"{what} is nested too deeply (the limit is {max_depth} levels)"
                                          f"{_at(at)}")
            if isinstance(item, dict):
                for key, child in item.items():
                    if isinstance(key, str):
                        _check_text(key, what, at)
                    stack.append((child, depth + 1, (*at, key)))
            else:
                stack.extend((child, depth + 1, (*at, i)) for i, child in enumerate(item))


def _at(at: tuple) -> str:
    """' at [0].criteria[1].paths' for a path of keys and indexes ('' at the top)."""
    if not at:
        return ""
    text = "".join(f"[{k}]" if isinstance(k, int) else f".{_safe(str(k))}" for k in at[:12])
    return " at " + text.lstrip(".") + ("..." if len(at) > 12 else "")


def _safe(text: str) -> str:
    text = text.encode("utf-8", "backslashreplace").decode()
    return text if len(text) <= 40 else text[:40] + "..."


def _check_text(text: str, what: str, at: tuple = ()) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise UntrustedInputError(
            f"{what} holds a string that is not valid Unicode (a lone surrogate such as \\ud800){_at(at)}: "
            f"{text[:40].encode('utf-8', 'backslashreplace').decode()!r}") from None


def read_file(path: Any, *, what: str, max_bytes: int) -> bytes:
    """The bytes of a regular file a user named, at most `max_bytes` (a FIFO or /dev/zero would never end).

    Raises `UntrustedInputError` naming `what` for a missing, unreadable, special or oversized file."""
    import os
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # O_NONBLOCK: opening a FIFO must not wait for a writer
    except OSError as e:
        raise UntrustedInputError(f"{what}: cannot read it: {e.strerror or e}") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise UntrustedInputError(f"{what}: is a directory, not a file")
        if not stat.S_ISREG(mode):
            raise UntrustedInputError(f"{what}: not a regular file (a device, FIFO or socket)")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(max_bytes + 1)
    except OSError as e:
        raise UntrustedInputError(f"{what}: cannot read it: {e.strerror or e}") from None
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise UntrustedInputError(f"{what}: over the limit of {max_bytes} bytes")
    return data
