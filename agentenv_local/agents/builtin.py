"""The agents a task, `agentenv agent` and `python -m agentenv_local.agents` know by name: the
`agentenv_local.agents` entry-point group. Ours (scripted, human, tool-loop, claude-code) are declared in pyproject.toml
exactly like a plugin's, so a plugin's agent is named the same way. Listing them reads entry-point metadata
only: nothing is imported until an agent is started."""

from __future__ import annotations

# Ours, whatever else is installed (`agentenv agent list` describes them).
CORE_AGENTS = ("scripted", "human", "tool-loop", "claude-code", "codex", "gemini", "opencode", "pi", "openhands")


def named_agents() -> dict[str, str]:
    """name -> "module:Class" of every agent the group offers (a plugin cannot take one of our names, and two
    plugins claiming one name both lose it: plugins.py decides)."""
    from agentenv_local.plugins import registry

    return {name: c.value for name, c in registry().contributions("agents").items()
            if c.status in ("unloaded", "active")}
