"""`ModelError`: a model call failed, said in words a person can act on (never with a key in it)."""

from __future__ import annotations

from agentenv_local.errors import AgentenvError


class ModelError(AgentenvError):
    """A model call failed after its retries, or the answer could not be used.

    `kind`: "http" (the endpoint answered an error status), "connection" (it could not be reached),
    "timeout", "protocol" (the answer was not what the API promises), "tool_arguments" (the model
    called a tool with arguments that are not a JSON object), "config" (the provider is set up wrong).
    `status` is the HTTP status (None when there was none), `endpoint` the URL without credentials,
    `provider_message` what the endpoint said, `attempts` how many requests were sent.
    """

    def __init__(self, message: str, *, hint: str | None = None, kind: str = "http", status: int | None = None,
                 endpoint: str | None = None, provider_message: str | None = None, attempts: int = 0,
                 tool_name: str | None = None):
        super().__init__(message, hint=hint)
        self.kind = kind
        self.status = status
        self.endpoint = endpoint
        self.provider_message = provider_message
        self.attempts = attempts
        self.tool_name = tool_name

    def __repr__(self) -> str:
        return (f"ModelError(kind={self.kind!r}, status={self.status!r}, endpoint={self.endpoint!r}, "
                f"attempts={self.attempts!r}, message={self.message!r})")

    @property
    def retryable(self) -> bool:
        return self.kind in ("connection", "timeout") or (self.status is not None and _retryable_status(self.status))

    def to_wire(self) -> dict:
        out = super().to_wire()
        out.update(kind=self.kind, status=self.status, endpoint=self.endpoint)
        return out


def _retryable_status(status: int) -> bool:
    return status in (408, 409, 429) or status >= 500
