"""Re-export: the query builder is part of the core API (agentenv_local.query)."""

from agentenv_local.query import OPERATORS, Query, compile_filters, compile_order  # noqa: F401
