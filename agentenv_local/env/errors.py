"""Structured errors an env raises to answer its caller with a code instead of a crash.

The wire shapes are the reference's (agentenv-framework-protocol's `AgentEnvError`):

- raised in a **tool**: the MCP result has `isError: true`, one text block `"<code>: <message>"` and the
  fields below as `structuredContent`;
- raised in an **extension** (REST route): HTTP `status` with `{"ok": false, "error": {fields}}`;
- raised in a **data-plane** handler: JSON-RPC error `-32000` with the fields as `error.data`.

`applied` says whether the call's effect happened (`"unknown"` when it may have been delivered before
something failed); a caller retries on its own only when `retryable` and `applied == "no"`.
"""

from __future__ import annotations

from typing import Any, Literal

Applied = Literal["yes", "no", "unknown"]

_APPLIED = ("yes", "no", "unknown")


class EnvError(Exception):
    """An error with a machine-readable `code` that reaches the caller as data, not as a crash."""

    def __init__(self, code: str, message: str, *, retryable: bool = False, applied: Applied = "no",
                 hint: str | None = None, status: int = 400) -> None:
        if not isinstance(code, str) or not code:
            raise TypeError("EnvError code must be a non-empty string, e.g. 'not_found'")
        if applied not in _APPLIED:
            raise ValueError(f"EnvError applied must be one of {list(_APPLIED)}, got {applied!r}")
        if not 400 <= int(status) <= 599:
            raise ValueError(f"EnvError status must be an HTTP error status (400-599), got {status!r}")
        super().__init__(message)
        self.code = code
        self.message = message
        self.retryable = bool(retryable)
        self.applied: Applied = applied
        self.hint = hint
        self.status = int(status)

    def fields(self) -> dict[str, Any]:
        """The error as it goes on the wire: code, message, retryable, applied and (when set) hint."""
        out: dict[str, Any] = {"code": self.code, "message": self.message, "retryable": self.retryable,
                               "applied": self.applied}
        if self.hint is not None:
            out["hint"] = self.hint
        return out

    def body(self) -> dict[str, Any]:
        """The REST error body: `{"ok": false, "error": {...}}`."""
        return {"ok": False, "error": self.fields()}

    def __repr__(self) -> str:
        return f"EnvError({self.code!r}, {self.message!r}, retryable={self.retryable}, applied={self.applied!r})"


def find_env_error(exc: BaseException | None) -> EnvError | None:
    """The EnvError `exc` is, or was raised from (walking `__cause__`/`__context__`), else None."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, EnvError):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None
