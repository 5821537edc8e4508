"""agentenv-local: local-first RL environments for LLM agents."""

__version__ = "0.1.0"
