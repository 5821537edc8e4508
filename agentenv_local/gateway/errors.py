"""The error the gateway's routes answer with: a message and the HTTP status to send it with."""

from __future__ import annotations


class GatewayError(ValueError):
    """A request the gateway refuses; ``status`` is the HTTP status, ``to_wire()`` the body."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.message = message
        self.status = status

    def to_wire(self) -> dict:
        """The reference's error body for the clock and trigger routes."""
        return {"ok": False, "error": self.message}
