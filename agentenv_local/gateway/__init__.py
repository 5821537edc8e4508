"""The MCP gateway: one endpoint in front of an env's servers, with the virtual clock, per-role tool
access (RBAC), triggers, a consistency mode and the trajectory.

Modules are imported directly (``agentenv_local.gateway.clock``, ``agentenv_local.gateway.rbac``,
``agentenv_local.gateway.durations`` …); this package imports nothing so that importing one of them
stays cheap.
"""
