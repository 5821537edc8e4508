"""The `agentenv` CLI: one module per command group, imported only when that command runs."""
