"""Checks shared by everything that reads what a user wrote (task files, bundles, CLI ids).

Each turns bad input into a `ValidationError` (or a reason string) that names the file and the place,
so a clumsy or hostile file never reaches the store or shows a traceback.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from agentenv_local.errors import ValidationError
from agentenv_local.untrusted import UntrustedInputError, parse_json, read_file

MAX_TASK_FILE_BYTES = 16 << 20  # a task is steps of configuration; 16 MB is far past any real one
MAX_ID_LENGTH = 256
JSON_HINT = 'a task file is a JSON list of steps, each an object with at least "id" and "type"'


def read_json_file(path: Path, where: str | None = None, *, hint: str = JSON_HINT,
                   max_bytes: int = MAX_TASK_FILE_BYTES) -> Any:
    """The JSON value in a file a user wrote, within bounds; a ValidationError naming the file otherwise."""
    where = where or str(path)
    try:
        raw = read_file(path, what=where, max_bytes=max_bytes)
    except UntrustedInputError as exc:
        raise ValidationError(str(exc)) from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValidationError(f"{where}: not UTF-8 text (byte {exc.start}: {exc.reason})",
                              hint="save the file as UTF-8") from None
    return json_value(text, where, hint=hint)


def json_value(text: str, where: str, *, hint: str = JSON_HINT) -> Any:
    """`text` parsed as JSON within bounds (depth, numbers, lone surrogates); ValidationError naming `where`."""
    try:
        return parse_json(text, what=where)
    except UntrustedInputError as exc:
        m = re.fullmatch(r".* is not valid JSON: (.*) \((line \d+, column \d+)\)", str(exc), re.DOTALL)
        if m:  # "f.json: not valid JSON (line 3, column 12: Expecting value)"
            raise ValidationError(f"{where}: not valid JSON ({m.group(2)}: {m.group(1)})", hint=hint) from None
        raise ValidationError(refused(where, exc)) from None


def refused(where: str, exc: UntrustedInputError) -> str:
    """'f.json: nested too deeply ...' from 'f.json is nested too deeply ...'."""
    return f"{where}: {str(exc).removeprefix(where + ' ').removeprefix('is ')}"


def id_problem(value: str) -> str | None:
    """Why a string cannot be an id (of a step, task, artifact, eval), or None if it can."""
    if not value:
        return "it is empty"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "it is not valid Unicode"
    if len(value) > MAX_ID_LENGTH:
        return f"it is {len(value)} characters long, over the limit of {MAX_ID_LENGTH}"
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        return "it holds a control character (a NUL, a newline, a tab...)"
    if ".." in value.split("/"):
        return "it holds a '..' path segment"
    return None


def shorten(value: Any, limit: int = 80, *, quote: bool = True) -> str:
    """A value for an error message: printable whatever it holds, and cut if long."""
    text = repr(value) if quote else str(value)
    text = text.encode("utf-8", "backslashreplace").decode()
    return text if len(text) <= limit else f"{text[:limit - 20]}... ({len(text)} characters)"
