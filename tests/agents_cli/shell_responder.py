"""A fake-model responder that drives a coding CLI through one shell tool call and a final answer.

First turn: call the CLI's shell tool (found by name among the offered tools) with COMMAND, its
arguments shaped by that tool's schema (`command` as a string or an argv list, `cmd`, plus any other
required string field). Once a tool result came back: answer text quoting that result, so a final
answer holding 42 proves the command's output reached the model.
"""

from __future__ import annotations

import re
from typing import Any

from agentenv_local.testing.fake_models import RecordedRequest, Reply

COMMAND = "echo $((6 * 7))"
SHELL_TOOLS = ("Bash", "shell", "exec_command", "shell_command", "run_shell_command", "bash", "execute_bash",
               "terminal")


def shell_arguments(schema: dict, command: str = COMMAND) -> dict[str, Any]:
    props = schema.get("properties") or {}
    args: dict[str, Any] = {}
    for key in ("command", "cmd"):
        if key in props:
            kind = props[key].get("type")
            args[key] = ["bash", "-lc", command] if kind == "array" else command
            break
    for key in schema.get("required") or []:
        prop = props.get(key) or {}
        if key not in args and prop.get("enum"):
            args[key] = prop["enum"][0]  # e.g. OpenHands' security_risk
        elif key not in args and prop.get("type") == "string":
            args[key] = "compute 6 * 7"
    return args


def final_text(result: str) -> str:
    # CLIs wrap a command's output (exit code, timing, reminders): the output is the line holding
    # only a number (after gemini's `Output:`), else the first line
    alone = re.search(r"^\s*(?:Output:\s*)?(-?\d+)\s*$", result, re.M)
    shown = alone.group(1) if alone else (result.strip().splitlines() or [""])[0]
    return f"The command printed {shown}. DONE"


class ShellResponder:
    """Tool call first, final text after. `tool` overrides the shell tool's name; `mcp_tool` calls an
    MCP tool (matched by name suffix) with `mcp_args` instead, then answers with its result."""

    def __init__(self, *, mcp_tool: str | None = None, mcp_args: dict[str, Any] | None = None,
                 command: str = COMMAND) -> None:
        self.command = command
        self.mcp_tool = mcp_tool
        self.mcp_args = mcp_args or {}
        self.called: list[str] = []

    def pick(self, request: RecordedRequest) -> dict | None:
        tools = request.tools
        if self.mcp_tool:
            return next((t for t in tools if t["name"].endswith(self.mcp_tool)), None)
        for name in SHELL_TOOLS:
            for tool in tools:
                if tool["name"] == name:
                    return tool
        return None

    def __call__(self, request: RecordedRequest) -> Reply:
        if request.answered_tools:
            results = request.tool_results
            last = results[-1]["content"] if results else ""
            return Reply(text=f"The tool said: {last.strip()}. DONE" if self.mcp_tool else final_text(last))
        tool = self.pick(request)
        if tool is None:  # a side request (title, summary...) or no tool offered: plain text
            return Reply(text="ok")
        self.called.append(tool["name"])
        args = self.mcp_args if self.mcp_tool else shell_arguments(tool.get("input_schema") or {}, self.command)
        return Reply.tool_call(tool["name"], args)
