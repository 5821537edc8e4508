"""Coding CLIs as A2A agents: `harness.py` (what they share: config, finding the CLI, one turn in its own
process group with its event stream read live, context -> session, cancel/timeout) and one module per CLI
(`claude_code.py`, `codex.py`, `gemini.py`, `opencode.py`, `pi.py`, `openhands.py`). Each is an
`agentenv_local.agents` entry point, named like the reference's agents."""
