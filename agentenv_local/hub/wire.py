"""The hub's wire format: one JSON object per line over the unix socket.

Request  {"id": n, "method": "documents.put", "args": [...], "kwargs": {...}}
Response {"id": n, "result": ...} or {"id": n, "error": {"type", "message", "hint", "problems"}}
Stream   {"event": {...}} lines after an `events.subscribe` request.
Bytes travel as {"__b64__": "..."}; Query objects and RunOptions as their wire dicts.

The methods a client may call: the hub's own, exactly the ones listed in HUB_METHODS (Hub._ops answers
them; hub/methods.py `HubMethods` calls them, typed), and, on the store, exactly the ones listed in
STORE_METHODS.
"""

from __future__ import annotations

from agentenv_local.json_lines import decode, encode

__all__ = ["HUB_METHODS", "STORE_METHODS", "decode", "encode", "is_hub_method"]

# The store's methods a client may call through the hub, by sub-store (stores/: DocumentStore,
# RecordStore, RunStore, EventLog, ObjectStore). What only the hub does (close, subscribe,
# mark_interrupted) is not here.
STORE_METHODS: dict[str, frozenset[str]] = {
    "documents": frozenset({"find", "get", "latest_version", "put", "query", "versions"}),
    "records": frozenset({"delete", "find", "get", "query", "save"}),
    "runs": frozenset({"create", "find", "get", "journal", "journal_append", "list", "resolve", "update"}),
    "events": frozenset({"append", "append_many", "flush", "query"}),
    "objects": frozenset({"blob_path", "exists", "get", "list", "metadata", "put"}),
}


# The hub's own methods, by namespace: `hub.*` is what a connection says first (hub/session.py,
# `agentenv down`); the rest are HubMethods' typed calls.
HUB_METHODS: dict[str, frozenset[str]] = {
    "hub": frozenset({"hello", "status", "shutdown"}),
    "runner": frozenset({"submit", "resume", "cancel", "review", "attach"}),
    "envs": frozenset({"deploy", "instances", "teardown", "bind_role", "admin_token", "advance_clock"}),
    "agents": frozenset({"deploy", "instances", "teardown"}),
}


def is_hub_method(method: str) -> bool:
    """Whether `method` ("namespace.name") is one of the hub's own methods a client may call."""
    namespace, _, name = method.partition(".")
    return name in HUB_METHODS.get(namespace, frozenset())
