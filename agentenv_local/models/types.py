"""The provider-neutral conversation types: messages, tool calls, tool specs, responses.

Agents and the judge speak only these; each provider translates them to and from its wire format.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Role = Literal["system", "user", "assistant", "tool"]
StopReason = Literal["end", "tool_calls", "length", "other"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ToolCall(_Model):
    """One tool call the assistant asked for; `arguments` is already parsed JSON (an object)."""

    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)


class Message(_Model):
    """One turn of a conversation.

    - `system` / `user`: `content` is the text.
    - `assistant`: `content` is the text (may be empty) and `tool_calls` the tools it called.
    - `tool`: the result of one tool call: `tool_call_id` names the call, `content` is the result
      text, `is_error` marks a failed call (`name` optionally repeats the tool's name).
    """

    role: Role
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    is_error: bool = False

    @model_validator(mode="after")
    def _shape(self) -> Message:
        if self.tool_calls and self.role != "assistant":
            raise ValueError(f"only assistant messages carry tool_calls (this one is a {self.role} message)")
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("a tool message needs the tool_call_id of the call it answers")
        if self.role != "tool" and (self.tool_call_id is not None or self.is_error):
            raise ValueError("tool_call_id and is_error belong on tool messages only")
        return self

    @classmethod
    def system(cls, text: str) -> Message:
        return cls(role="system", content=text)

    @classmethod
    def user(cls, text: str) -> Message:
        return cls(role="user", content=text)

    @classmethod
    def assistant(cls, text: str = "", tool_calls: list[ToolCall] | None = None) -> Message:
        return cls(role="assistant", content=text, tool_calls=list(tool_calls or []))

    @classmethod
    def tool_result(cls, tool_call_id: str, content: str, *, is_error: bool = False,
                    name: str | None = None) -> Message:
        return cls(role="tool", content=content, tool_call_id=tool_call_id, is_error=is_error, name=name)


class ToolSpec(_Model):
    """A tool offered to the model; `input_schema` is a JSON Schema of an object."""

    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})

    @model_validator(mode="after")
    def _object_schema(self) -> ToolSpec:
        if self.input_schema.get("type", "object") != "object":
            raise ValueError(f"tool {self.name!r}: input_schema must describe an object "
                             f"(\"type\": \"object\"), got type {self.input_schema.get('type')!r}")
        return self


class Usage(_Model):
    input_tokens: int = 0
    output_tokens: int = 0
    total: int = 0

    @model_validator(mode="after")
    def _total(self) -> Usage:
        if not self.total:
            self.total = self.input_tokens + self.output_tokens
        return self


class ModelResponse(_Model):
    """What one `complete()` call returned."""

    message: Message
    stop_reason: StopReason
    usage: Usage = Field(default_factory=Usage)
    model: str
    latency_s: float = 0.0

    @property
    def text(self) -> str:
        return self.message.content

    @property
    def tool_calls(self) -> list[ToolCall]:
        return self.message.tool_calls

    def json_output(self) -> Any:
        """The text parsed as JSON (for calls made with `response_format`); ModelError if it is not."""
        try:
            return json.loads(self.message.content)
        except json.JSONDecodeError as exc:
            from agentenv_local.models.errors import ModelError

            raise ModelError(f"model {self.model!r} answered text that is not JSON ({exc.msg} at position {exc.pos})",
                             hint="pass response_format with a JSON schema, or ask for JSON in the prompt",
                             kind="protocol") from None
