"""The gateway's composed Environment Card: its own control-plane extensions (the reference's eight; ``changes/v1``
only while the gateway keeps a changelog, i.e. a child advertises ``urn:agentenv:changes/v1`` or has reported
changed rows, see changes.py) and each child's card under ``children_environments``, rewritten to be reached
through the gateway's ``/svc/mcp-<name>`` proxy."""

from __future__ import annotations

import copy
from typing import Any

from .changes import PAGE_DEFAULT_LIMIT, PAGE_MAX_LIMIT
from .triggers import FEATURES

_ROLE_TOOLS = {
    "type": "object",
    "properties": {
        "role": {"type": "string"},
        "tools": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"const": "*"}]},
    },
    "required": ["role", "tools"],
}
_STEP = {
    "type": "object",
    "properties": {"action": {"enum": ["list_tools", "call_tool"]},
                   "tool_name": {"type": "string", "minLength": 1},
                   "arguments": {"type": "object"}},
    "required": ["action"],
    "if": {"properties": {"action": {"const": "call_tool"}}},
    "then": {"required": ["tool_name"]},
}
_EMPTY = {"type": "object", "properties": {}}


def _ext(uri: str, description: str, endpoint: str, methods: dict, **params: Any) -> dict:
    return {"uri": uri, "description": description, "params": {"endpoint": endpoint, **params, "methods": methods},
            "required": False}


_CHANGES_QUERY = {
    "type": "object",
    "properties": {"after_id": {"type": "integer", "minimum": 0, "default": 0},
                   "limit": {"type": "integer", "minimum": 1, "maximum": PAGE_MAX_LIMIT,
                             "default": PAGE_DEFAULT_LIMIT}},
}


def gateway_extensions(*, changes: bool = False) -> list[dict]:
    """The gateway's own extensions; ``changes``: whether it keeps a changelog (advertise ``changes/v1``)."""
    extensions = [
        _ext("urn:agentenv:disable-tool/v1", "Disable tools for a role.", "/tools/disable",
             {"disable": {"method": "POST", "request": _ROLE_TOOLS}}),
        _ext("urn:agentenv:enable-tool/v1", "Enable tools for a role.", "/tools/enable",
             {"enable": {"method": "POST", "request": _ROLE_TOOLS}}),
        _ext("urn:agentenv:triggers/v1",
             "Env triggers: register (additive, by id), remove, clear, or read the triggers and their event log.",
             "/triggers/register", {
                 "register": {"method": "POST", "endpoint": "/triggers/register", "request": {
                     "type": "object", "properties": {"watch_roles": {"type": "array", "items": {"type": "string"}},
                                                      "executor": {"type": "object"},
                                                      "executors": {"type": "object"},
                                                      "triggers": {"type": "array"}},
                     "required": ["triggers"]}},
                 "remove": {"method": "POST", "endpoint": "/triggers/remove", "request": {
                     "type": "object", "properties": {"ids": {"type": "array", "items": {"type": "string"}}},
                     "required": ["ids"]}},
                 "clear": {"method": "POST", "endpoint": "/triggers/clear", "request": _EMPTY},
                 "state": {"method": "GET", "endpoint": "/triggers/state", "request": _EMPTY}},
             features=list(FEATURES)),
        _ext("urn:agentenv:clock/v1",
             "Virtual clock: read the env's time (get_time tool or GET /clock/time); set-time and clear arm and "
             "disarm it.", "/clock/time", {
                 "get_time": {"method": "GET", "endpoint": "/clock/time"},
                 "set_time": {"method": "PUT", "endpoint": "/clock/set-time", "request": {
                     "type": "object", "properties": {"virtual_time": {"type": "string"},
                                                      "virtual_seconds_per_real_second": {"type": "number"},
                                                      "mode": {"enum": ["wall", "frozen", "stepped", "schedule"]},
                                                      "step_seconds": {"type": "number"},
                                                      "schedule": {"type": "array", "items": {"type": "string"}}},
                     "required": ["virtual_time"]}},
                 "clear": {"method": "POST", "endpoint": "/clock/clear", "request": _EMPTY},
                 "state": {"method": "GET", "endpoint": "/clock/state", "request": _EMPTY}}),
        _ext("urn:agentenv:trajectory/v1",
             "Env trajectory: JSONL of tool calls, results, failures, trigger fires and internal calls, "
             "virtual_time-stamped while the clock is armed.", "/trajectory",
             {"get": {"method": "GET", "endpoint": "/trajectory"}}),
        _ext("urn:agentenv:step/v1", "Step: list or call the env's tools over REST, filtered by the AgentEnv-Role "
             "header.", "/step", {"step": {"method": "POST", "endpoint": "/step", "request": _STEP}}),
        _ext("urn:agentenv:state/v1", "State: the env's MCP servers and their tools, tool names more than one of "
             "them serves, its changelog id and its role rules.", "/state",
             {"get": {"method": "GET", "endpoint": "/state"}}),
    ]
    if changes:
        extensions.append(_ext(
            "urn:agentenv:changes/v1", "Changes: the rows the env's tool calls changed, numbered gateway-wide, each "
            "with the one call (or trigger action) that changed it; page with after_id and limit.", "/changes",
            {"get": {"method": "GET", "endpoint": "/changes", "request": _CHANGES_QUERY}}))
    return extensions


def _rewrite_endpoint(prefix: str, endpoint: Any) -> Any:
    if isinstance(endpoint, str) and endpoint.startswith("/"):
        return prefix + endpoint
    return endpoint


def rewrite_child_card(service: str, card: dict) -> dict:
    """A child's card as the gateway nests it: data plane at ``/svc/<service>/agentenv``, extension endpoints
    gateway-rooted under ``/svc/<service>``, ``additionalInterfaces`` emptied (its tools are the gateway's)."""
    card = copy.deepcopy(card)
    prefix = f"/svc/{service}"
    card["url"] = f"{prefix}/agentenv"
    card["additionalInterfaces"] = []
    for ext in (card.get("capabilities") or {}).get("extensions") or []:
        params = ext.get("params")
        if not isinstance(params, dict):
            continue
        if "endpoint" in params:
            params["endpoint"] = _rewrite_endpoint(prefix, params["endpoint"])
        for method in (params.get("methods") or {}).values():
            if isinstance(method, dict) and "endpoint" in method:
                method["endpoint"] = _rewrite_endpoint(prefix, method["endpoint"])
    return card
