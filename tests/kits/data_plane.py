"""An env's JSON-RPC data plane (`data/get`, `data/add`, `data/reset`, ...), the one way tests call it
(`from kits.data_plane import rpc`): in-process through `Env.data_rpc`, or over real HTTP to an env server, a
gateway, or one of a gateway's children."""

from __future__ import annotations

from typing import Any

from kits.servers import run


def request(method: str, params: dict | None = None, rid: int = 1) -> dict:
    """A JSON-RPC request body (`params` {} when not given, as the reference's clients send it)."""
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}}


def agentenv_url(base: str, child: str | None = None) -> str:
    """The data-plane URL under `base`: a URL that already ends in /agentenv as is; else the gateway child's
    `/svc/mcp-<child>/agentenv` when `child` is given, or `base/agentenv`."""
    if base.endswith("/agentenv"):
        assert child is None, f"{base} already names its data plane; drop child={child!r}"
        return base
    return base.rstrip("/") + (f"/svc/mcp-{child}/agentenv" if child else "/agentenv")


def rpc(target: Any, method: str, params: dict | None = None, headers: dict | None = None, *,
        child: str | None = None) -> dict:
    """One data-plane request; returns the JSON-RPC answer.

    `target`: an in-process `Env` (answered by `env.data_rpc`, no HTTP), or a URL (see `agentenv_url`; `child`
    picks a gateway's child). `headers` go with the HTTP request, e.g. the instance's admin token."""
    if not isinstance(target, str):
        assert child is None and headers is None, "an in-process env takes neither a child nor headers"
        answer: dict = run(target.data_rpc(request(method, params)))
        return answer
    import httpx2

    r = httpx2.post(agentenv_url(target, child), json=request(method, params), headers=headers, timeout=30)
    return r.json()
