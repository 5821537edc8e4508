"""Errors a person can act on: what failed, why, and what to do next.

Every error the CLI shows without a traceback derives from AgentenvError. `hint` is the
next thing to try; `problems` lists several findings reported at once (validation).
"""

from __future__ import annotations


def describe(exc: BaseException) -> str:
    """`Type: message` of an unexpected exception, for a result or a log line. An exception group (anyio's task
    groups wrap what failed inside one, e.g. an MCP client's transport) is told by the exceptions in it, so the
    cause shows rather than "unhandled errors in a TaskGroup"."""
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return "; ".join(describe(inner) for inner in exc.exceptions)
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class AgentenvError(Exception):
    """Base for expected failures: shown as `Error: ...` with exit code `exit_code`."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None, problems: list[str] | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.problems = list(problems or [])

    def render(self) -> str:
        lines = [f"Error: {self.message}"]
        lines += [f"  - {p}" for p in self.problems]
        if self.hint:
            lines.append(f"Hint: {self.hint}")
        return "\n".join(lines)

    def to_wire(self) -> dict:
        return {"type": type(self).__name__, "message": self.message, "hint": self.hint, "problems": self.problems}


class ConfigError(AgentenvError):
    """A config file, key or value is wrong."""


class ValidationError(AgentenvError):
    """Input (a task, a bundle, a step) is malformed; `problems` lists every finding."""


class NotFoundError(AgentenvError):
    """A named record, artifact, run or object does not exist."""


class ConflictError(AgentenvError):
    """A write raced another one or would overwrite something write-once."""


class HubError(AgentenvError):
    """The hub could not be reached, started or stopped."""


class StepError(AgentenvError):
    """A step failed while running."""


class StoreError(AgentenvError):
    """The store's file cannot be used: the disk is full, or the file is damaged."""


class CancelledError(AgentenvError):
    exit_code = 130


_WIRE_TYPES = {cls.__name__: cls for cls in (AgentenvError, ConfigError, ValidationError, NotFoundError,
                                             ConflictError, HubError, StepError, StoreError,
                                             CancelledError)}


def from_wire(payload: dict) -> AgentenvError:
    """Rebuild an error raised in the hub so the client raises the same type."""
    cls = _WIRE_TYPES.get(payload.get("type", ""), AgentenvError)
    return cls(payload.get("message", "unknown error"), hint=payload.get("hint"), problems=payload.get("problems"))


def printable(text: str) -> str:
    """`text` safe to print or store as UTF-8: bytes a file name had that are not UTF-8 (which
    Python keeps as lone surrogates) become `\\xff` escapes instead of crashing the writer."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate that does not stand for a byte
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
