"""DuckDB's errors about the store's file, turned into errors a person can act on.

Every call the stores make on the connection goes through a `Guard`: a full disk or a damaged
file becomes one `StoreError` that says what to do, instead of a DuckDB traceback. Such a
failure is sticky: after it, every call fails with the same error until the store is opened
again. A write that failed half-way leaves the hub's runs out of step with the file, so going
on (and reporting runs that never finish) would be worse than stopping; the next hub marks
the runs this one had in flight as interrupted, and `agentenv runs resume` finishes them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agentenv_local.errors import StoreError, ValidationError, printable

from .duckdb_engine import duckdb

_FULL = ("No space left on device", "Disk quota exceeded", "ENOSPC")
_DAMAGED = ("Corrupt database file", "not a valid DuckDB database file", "Could not read enough bytes",
            "does not match stored checksum", "INTERNAL Error")
_UNWRITABLE = ("Could not write file", "Read-only file system", "Permission denied", "Could not truncate",
               "Could not fsync", "Could not open file")


def disk_full(db_path: Path, detail: str) -> StoreError:
    folder = db_path.parent
    return StoreError(
        f"no space left on the disk that holds the store {db_path} ({detail})",
        hint=(f"free some space on that disk (`df -h {folder}` shows how much is left), then run the command "
              "again. What was recorded before is kept: a write that failed was not recorded, and the store "
              "opens again once there is room. If a hub runs in the background, restart it (`agentenv down`, "
              "then `agentenv up --detach`); runs it had going are then marked interrupted: finish them with "
              "`agentenv runs resume RUN`."))


def damaged(db_path: Path, detail: str) -> StoreError:
    folder = db_path.parent
    return StoreError(
        f"the store {db_path} is damaged ({detail})",
        hint=(f"stop the hub if one runs (`agentenv down`), move the file aside and run the command again to "
              f"start an empty store: `mv {db_path} {db_path}.damaged` (and `{db_path}.wal` if it exists). "
              "That loses what the store recorded: tasks, envs, agents, evals, artifact records, runs and their "
              "step journals. There is no copy of the run journal outside this file, so runs cannot be rebuilt; "
              f"the artifacts' contents stay in {folder / 'objects'} (put them again with `agentenv artifact "
              "put`). Keep the .damaged file if you need what it held: DuckDB may still read its sound tables."))


def unwritable(db_path: Path, detail: str) -> StoreError:
    return StoreError(f"cannot write the store {db_path} ({detail})",
                      hint=f"check that {db_path.parent} is writable and its disk has room, then run the command again")


def translate(exc: duckdb.Error, db_path: Path, args: tuple = ()) -> Exception | None:
    """The error to raise instead of `exc`, or None to let it through (constraints, SQL bugs)."""
    message = str(exc)
    detail = _short(message)
    if isinstance(exc, duckdb.InvalidInputException) and "surrogate" in message:
        value = next((v for v in _flat(args) if isinstance(v, str) and _has_surrogate(v)), "")
        return ValidationError(f"{printable(value)!r} is not valid UTF-8 text, so the store cannot hold it",
                               hint="it came from a name or file with bytes that are not UTF-8: use a UTF-8 name")
    if any(marker in message for marker in _FULL):
        return disk_full(db_path, "No space left on device")
    if any(marker in message for marker in _DAMAGED) or isinstance(exc, duckdb.InternalException):
        return damaged(db_path, detail)
    if any(marker in message for marker in _UNWRITABLE) or isinstance(exc, duckdb.FatalException):
        return unwritable(db_path, detail)
    return None


class Guard:
    """Translates the errors of the calls it wraps; remembers the first failure of the file."""

    def __init__(self, db_path: Path):
        self.db_path = Path(db_path)
        self.failure: StoreError | None = None

    @contextlib.contextmanager
    def check(self, args: tuple = ()) -> Iterator[None]:
        if self.failure is not None:
            raise StoreError(self.failure.message, hint=self.failure.hint)
        try:
            yield
        except duckdb.Error as exc:
            error = translate(exc, self.db_path, args)
            if error is None:
                raise
            if isinstance(error, StoreError):
                self.failure = error
            raise error from exc


class Guarded:
    """A DuckDB connection, cursor or appender whose calls go through `guard`."""

    def __init__(self, target: Any, guard: Guard):
        self._target = target
        self._guard = guard

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._guard.check(args):
                result = attr(*args, **kwargs)
            if isinstance(result, (duckdb.DuckDBPyConnection, duckdb.Appender)):
                return Guarded(result, self._guard)  # execute() returns the connection: fetchall() is guarded too
            return result

        return call


def _short(message: str) -> str:
    """DuckDB's message without its error-class prefix and long repeated detail."""
    first = message.strip().splitlines()[0] if message.strip() else message
    for prefix in ("FATAL Error: ", "IO Error: ", "TransactionContext Error: ", "INTERNAL Error: "):
        first = first.replace(prefix, "")
    return first[:300]


def _has_surrogate(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _flat(args: tuple) -> Iterator[Any]:
    for arg in args:
        if isinstance(arg, (list, tuple)):
            yield from arg
        else:
            yield arg
