"""The built-in agents, by the names a task, `agentenv agent` and `python -m agentenv_local.agents` know them
by: each name's `module:Class`."""

from __future__ import annotations

BUILTIN: dict[str, str] = {"scripted": "agentenv_local.agents.scripted:ScriptedAgent",
                           "human": "agentenv_local.agents.human:HumanAgent",
                           "tool-loop": "agentenv_local.agents.tool_loop:ToolLoopAgent"}
