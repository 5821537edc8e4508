"""What an agent's ``run`` receives and returns: parts, config, the live trajectory log, results.

These are our own pydantic models; on the wire they become A2A parts and tasks (see ``wire.py``). Their
names and behaviour follow the reference SDK (``agentenv_protocol.a2a_agent``) so an agent ports across.
"""

from __future__ import annotations

import copy
import json
import threading
from enum import Enum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

STRUCTURED_OUTPUT_KEY = "structured_output"
END_CONVERSATION_KEY = "end_conversation"


# --- parts -----------------------------------------------------------------------------------------------

class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TextPart(_Frozen):
    kind: Literal["text"] = "text"
    text: str
    metadata: dict[str, Any] = Field(default_factory=dict)


class DataPart(_Frozen):
    kind: Literal["data"] = "data"
    data: dict[str, Any]
    metadata: dict[str, Any] = Field(default_factory=dict)


class FilePart(_Frozen):
    """A file, inline (``bytes``: base64) or by reference (``uri``): exactly one of the two."""

    kind: Literal["file"] = "file"
    name: str | None = None
    mime_type: str | None = None
    bytes: str | None = None
    uri: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_source(self) -> FilePart:
        if (self.bytes is None) == (self.uri is None):
            raise ValueError("a file part requires exactly one of bytes or uri")
        return self


Part = Annotated[TextPart | DataPart | FilePart, Field(discriminator="kind")]


def text_of(parts: Any) -> str:
    """The text parts joined by newlines."""
    return "\n".join(p.text for p in parts if isinstance(p, TextPart))


def data_of(parts: Any) -> dict[str, Any]:
    """The data parts merged into one dict (later parts win)."""
    merged: dict[str, Any] = {}
    for p in parts:
        if isinstance(p, DataPart):
            merged.update(p.data)
    return merged


# --- config ----------------------------------------------------------------------------------------------

class AgentConfig(BaseModel):
    """The configuration agent-config/v1 sets. Subclasses add fields (each needs a default).

    Unknown fields are refused (``extra="forbid"``); the card lists the accepted ones.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = None
    description: str | None = None
    role: str | None = None
    model: str | None = None
    system_prompt: str | None = None
    timeout_seconds: int = Field(default=600, ge=1)
    output_format: dict[str, Any] | None = None


# --- the live trajectory ---------------------------------------------------------------------------------

class TrajectoryState(str, Enum):
    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELED = "canceled"


class TrajectoryLog:
    """Append-only events of one task, readable (by cursor) while the task runs.

    Each event is encoded to JSON when appended, so what a reader saw never changes. Once the task ends the log
    is sealed and appending raises.
    """

    def __init__(self, task_id: str = "", context_id: str = "") -> None:
        self.task_id = task_id
        self.context_id = context_id
        self._events: list[str] = []
        self._format: str | None = None
        self._sealed = False
        self._lock = threading.Lock()
        self.state = TrajectoryState.PENDING

    @property
    def format(self) -> str | None:
        return self._format

    def set_format(self, format: str) -> None:
        """Name the events' versioned format (e.g. ``my-agent-events/1``); fixed once an event is appended."""
        if not isinstance(format, str) or not format.strip():
            raise ValueError("the trajectory format must be a non-empty string")
        self._check_open()
        if self._events and format != self._format:
            raise RuntimeError("the trajectory's format cannot change once events are appended")
        self._format = format

    def append(self, event: dict[str, Any]) -> None:
        """Record one event, a JSON object. Without ``set_format`` first, the format is ``agentenv-events/1``."""
        if not isinstance(event, dict):
            raise TypeError("a trajectory event must be a JSON object (a dict)")
        self._check_open()
        encoded = json.dumps(event, separators=(",", ":"), allow_nan=False, default=str)
        with self._lock:
            if self._format is None:
                self._format = "agentenv-events/1"
            self._events.append(encoded)
            if self.state is TrajectoryState.PENDING:
                self.state = TrajectoryState.RUNNING

    def events(self, after: int = 0, limit: int | None = None) -> list[dict[str, Any]]:
        """Events from position ``after`` on (at most ``limit``)."""
        with self._lock:
            chosen = self._events[after:] if limit is None else self._events[after:after + limit]
        return [json.loads(e) for e in chosen]

    def __len__(self) -> int:
        return len(self._events)

    @property
    def sealed(self) -> bool:
        return self._sealed

    def seal(self, state: TrajectoryState) -> None:
        if not self._sealed:
            self._sealed = True
            self.state = state

    def _check_open(self) -> None:
        if self._sealed:
            raise RuntimeError("the task has ended; its trajectory can no longer change")


# --- request, progress, result ---------------------------------------------------------------------------

class TaskRequest(BaseModel):
    """One turn given to ``Agent.run``: the user's parts plus everything configured on the agent."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    task_id: str
    context_id: str
    parts: tuple[Part, ...] = ()
    config: AgentConfig = Field(default_factory=AgentConfig)
    mcp_servers: dict[str, dict[str, Any]] = Field(default_factory=dict)
    skills: tuple[dict[str, Any], ...] = ()
    metadata: dict[str, Any] = Field(default_factory=dict)
    trajectory: TrajectoryLog = Field(default_factory=TrajectoryLog, exclude=True, repr=False)

    @property
    def text(self) -> str:
        """The text parts joined by newlines."""
        return text_of(self.parts)

    @property
    def data(self) -> dict[str, Any]:
        """The data parts merged into one dict."""
        return data_of(self.parts)


class TaskProgress(_Frozen):
    """A non-final status update, yielded by a streaming ``run`` (the task stays ``working``)."""

    parts: tuple[Part, ...] = ()
    metadata: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def text(cls, text: str, *, metadata: dict[str, Any] | None = None) -> TaskProgress:
        return cls(parts=(TextPart(text=text),), metadata=metadata or {})


class TaskOutcome(str, Enum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"


ErrorType = Literal["agent_error", "infra_error"]


class TaskError(_Frozen):
    code: str
    message: str
    error_type: ErrorType = "agent_error"


class Usage(_Frozen):
    tool_call_count: int | None = Field(default=None, ge=0)
    input_tokens: int | None = Field(default=None, ge=0)
    output_tokens: int | None = Field(default=None, ge=0)
    total_tokens: int | None = Field(default=None, ge=0)
    cost_usd: float | None = Field(default=None, ge=0)
    provider_details: dict[str, Any] = Field(default_factory=dict)

    @property
    def is_empty(self) -> bool:
        return not self.to_dict()

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True, exclude_defaults=True)


class TaskResult(_Frozen):
    """The end of one turn: succeeded (at least one part) or failed (with an error)."""

    outcome: TaskOutcome
    parts: tuple[Part, ...] = ()
    error: TaskError | None = None
    usage: Usage = Field(default_factory=Usage)

    @model_validator(mode="after")
    def _consistent(self) -> TaskResult:
        if self.outcome is TaskOutcome.SUCCEEDED:
            if self.error is not None:
                raise ValueError("a successful result cannot carry an error")
            if not self.parts:
                raise ValueError("a successful result needs at least one part")
        elif self.error is None:
            raise ValueError("a failed result needs an error")
        return self

    @classmethod
    def builder(cls) -> TaskResultBuilder:
        return TaskResultBuilder()

    @classmethod
    def text(cls, text: str, *, usage: Usage | None = None) -> TaskResult:
        return cls(outcome=TaskOutcome.SUCCEEDED, parts=(TextPart(text=text),), usage=usage or Usage())

    @classmethod
    def success(cls, parts: Any, *, usage: Usage | None = None) -> TaskResult:
        return cls(outcome=TaskOutcome.SUCCEEDED, parts=tuple(parts), usage=usage or Usage())

    @classmethod
    def failure(cls, code: str, message: str, *, error_type: ErrorType = "agent_error",
                parts: Any = None) -> TaskResult:
        return cls(outcome=TaskOutcome.FAILED,
                   parts=tuple(parts) if parts is not None else (TextPart(text=message),),
                   error=TaskError(code=code, message=message, error_type=error_type))

    @property
    def succeeded(self) -> bool:
        return self.outcome is TaskOutcome.SUCCEEDED

    @property
    def structured_output(self) -> Any:
        for p in self.parts:
            if isinstance(p, DataPart) and STRUCTURED_OUTPUT_KEY in p.data:
                return p.data[STRUCTURED_OUTPUT_KEY]
        return None


class TaskResultBuilder:
    """Assemble a result step by step: ``TaskResult.builder().succeeded().add_text("hi").build()``."""

    def __init__(self) -> None:
        self._outcome: TaskOutcome | None = None
        self._error: TaskError | None = None
        self._parts: list[Any] = []
        self._usage = Usage()

    def succeeded(self) -> TaskResultBuilder:
        self._outcome, self._error = TaskOutcome.SUCCEEDED, None
        return self

    def failed(self, code: str, message: str, *, error_type: ErrorType = "agent_error") -> TaskResultBuilder:
        self._outcome = TaskOutcome.FAILED
        self._error = TaskError(code=code, message=message, error_type=error_type)
        return self

    def parts(self, parts: Any) -> TaskResultBuilder:
        self._parts = list(parts)
        return self

    def add_text(self, text: str, *, metadata: dict[str, Any] | None = None) -> TaskResultBuilder:
        self._parts.append(TextPart(text=text, metadata=metadata or {}))
        return self

    def add_data(self, data: dict[str, Any], *, metadata: dict[str, Any] | None = None) -> TaskResultBuilder:
        self._parts.append(DataPart(data=copy.deepcopy(data), metadata=metadata or {}))
        return self

    def add_file(self, *, name: str | None = None, mime_type: str | None = None, bytes: str | None = None,
                 uri: str | None = None) -> TaskResultBuilder:
        self._parts.append(FilePart(name=name, mime_type=mime_type, bytes=bytes, uri=uri))
        return self

    def add_structured_output(self, value: Any) -> TaskResultBuilder:
        """Structured output travels as a data part ``{"structured_output": value}`` (the AgentEnv convention)."""
        return self.add_data({STRUCTURED_OUTPUT_KEY: value})

    def usage(self, usage: Usage) -> TaskResultBuilder:
        self._usage = usage
        return self

    def build(self) -> TaskResult:
        if self._outcome is None:
            raise ValueError("the result's outcome is required: call succeeded() or failed(...)")
        return TaskResult(outcome=self._outcome, parts=tuple(self._parts), error=self._error, usage=self._usage)
