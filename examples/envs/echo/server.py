"""The echo env: the smallest env that shows every part of the SDK.

Run it:   python -m agentenv_local.env examples/envs/echo/server.py [--port 18765 | --stdio]
   or:    python examples/envs/echo/server.py
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from agentenv_local.env import (
    DataPart,
    Env,
    EnvError,
    TextPart,
    ToolContext,
    add_data,
    environment_card,
    extension,
    get_data,
    reset_data,
    tool,
)


@environment_card(name="echo", description="Says back what it's sent; remembers what it was loaded with.")
class Echo(Env):
    def __init__(self) -> None:
        self.loaded: list[dict] = []
        self.calls = 0

    @tool()
    def echo(self, text: Annotated[str, Field(description="The text to say back")]) -> str:
        """Return the text it's sent."""
        self.calls += 1
        return text

    @tool()
    def whoami(self, ctx: ToolContext) -> dict:
        """Who is calling (role and session, as the gateway forwards them) and what time it is for the env."""
        return {"role": ctx.caller.role, "session": ctx.caller.session,
                "virtual_time": ctx.virtual_time.isoformat() if ctx.virtual_time else None,
                "now": ctx.now().isoformat()}

    @tool()
    def fail(self, code: Annotated[str, Field(description="The error code to answer with")] = "refused") -> str:
        """Always fails with a structured error (for testing clients)."""
        raise EnvError(code, "this tool always fails", hint="call echo instead")

    @tool(hidden_by_default=True, annotations={"readOnlyHint": True})
    def call_count(self) -> int:
        """How many times echo was called (plumbing for tasks; hidden from agents by default)."""
        return self.calls

    # --- data plane ---------------------------------------------------------------------------------------

    @reset_data
    def reset(self) -> None:
        self.loaded.clear()
        self.calls = 0

    @add_data
    def add(self, parts: list) -> None:
        for part in parts:
            if part.kind == "text":
                self.loaded.append({"text": part.text})
            elif part.kind == "data":
                self.loaded.append(dict(part.data))
            else:
                self.loaded.append({"file": part.name, "size": len(part.read_bytes())})

    @get_data
    def export(self) -> list:
        return [DataPart(data={"loaded": self.loaded, "calls": self.calls}), TextPart(text=f"{self.calls} calls")]

    # --- an extension --------------------------------------------------------------------------------------

    @extension("urn:agentenv:echo-config/v1", description="Tune how echo behaves.")
    def configure(self, calls: int, reason: str = "") -> dict:
        if calls < 0:
            raise EnvError("invalid_calls", f"calls must be >= 0, got {calls}", hint="pass 0 to reset the counter")
        self.calls = calls
        return {"ok": True, "calls": self.calls}


if __name__ == "__main__":
    Echo().serve()
