"""`EnvGateway`: the HTTP client of one deployed env's gateway (its REST control plane, its children's cards and
extensions, their data planes), as the env steps, load_artifact and the env checks use it; and the instance's
admin credential it sends on every request (held by the hub's env manager, never in the deploy record)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Self

from agentenv_local import jsonrpc
from agentenv_local.errors import StepError

from . import tail

if TYPE_CHECKING:
    from agentenv_local.tasks.context import StepContext


class RpcError(Exception):
    def __init__(self, message: str, code: int | None = None):
        super().__init__(message)
        self.message = message
        self.code = code


def deployment(ctx: StepContext, env_id: str, env_step_id: str | None = None) -> dict:
    """The run's deployment of `env_id`: the latest, or (the reference's `env_step_id`) the one that deploy_env step
    made; a step id that made none of them is an error naming the ones that did."""
    if env_step_id is None:
        return ctx.deployed_env(env_id)
    matches = [r for r in ctx.state.get("deployed_envs", [])
               if env_id in (r.get("env_id"), r.get("instance_id")) and not r.get("torn_down")]
    for record in reversed(matches):
        if record.get("step_id") == env_step_id:
            return record
    if not matches:
        return ctx.deployed_env(env_id)  # its error: not deployed at all
    raise StepError(f"step {ctx.step.id!r}: env_step_id {env_step_id!r} names no deployment of env {env_id!r} "
                    f"(deployed by: {', '.join(str(r.get('step_id')) for r in matches)})",
                    hint="name the deploy_env step whose deployment this step is for")


class EnvGateway:
    """A small HTTP client for one deployed env's gateway (used by the env steps and load_artifact)."""

    def __init__(self, ctx: StepContext, env_id: str, timeout: float = 30.0, env_step_id: str | None = None):
        self.ctx = ctx
        self.env_id = env_id
        self.record = deployment(ctx, env_id, env_step_id)
        url = self.record.get("gateway_url")
        if not url:
            raise StepError(f"step {ctx.step.id!r}: env {env_id!r} has no gateway_url in its deploy record",
                            hint="the env's topology has no gateway; these steps need one")
        self.base = str(url).rstrip("/")
        self.timeout = timeout
        self._http: Any = None
        self._cards: dict[str, dict] = {}

    async def __aenter__(self) -> Self:
        import httpx2

        from agentenv_local.http_clients import async_client

        # a gateway in this hub is called in-process (inproc.py), any other over the network
        self._http = async_client(base_url=self.base, timeout=httpx2.Timeout(self.timeout, connect=10),
                                  headers=admin_headers(self.ctx, self.record))
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._http.aclose()

    def where(self, child: str | None = None) -> str:
        return f"env {self.env_id!r}" + (f" child {child!r}" if child else "")

    async def request(self, method: str, path: str, *, body: Any = None, params: dict | None = None,
                      child: str | None = None) -> tuple[int, Any]:
        """(status, decoded JSON body or text); a transport failure is a StepError."""
        try:
            r = await self._http.request(method, path, json=body, params=params)
        except Exception as exc:
            raise StepError(f"step {self.ctx.step.id!r}: cannot reach the gateway of {self.where(child)} at "
                            f"{self.base}{path}: {type(exc).__name__}: {exc}",
                            hint="is the env still deployed? (agentenv env instances)") from exc
        try:
            return r.status_code, r.json()
        except ValueError:
            return r.status_code, r.text

    async def call(self, method: str, path: str, what: str, *, body: Any = None, child: str | None = None) -> Any:
        """A REST call that must succeed (2xx, and no `ok: false`); otherwise the gateway's message, as a StepError."""
        status, answer = await self.request(method, path, body=body, child=child)
        if status >= 300 or (isinstance(answer, dict) and answer.get("ok") is False):
            raise StepError(f"step {self.ctx.step.id!r}: {what} on {self.where(child)} failed "
                            f"({method} {path} -> {status}): {message_of(answer)}")
        return answer

    # -- children and cards ----------------------------------------------------------------------------
    async def children(self) -> list[str]:
        names = [c if isinstance(c, str) else c["name"] for c in self.record.get("children") or []
                 if isinstance(c, str) or (isinstance(c, dict) and c.get("name"))]
        if names:
            return names
        card = self.record.get("environment_card") or {}
        if not card.get("children_environments"):
            card = await self.call("GET", "/.well-known/agent-env.json", "reading the env card")
        return [c["name"] for c in card.get("children_environments") or [] if c.get("name")]

    async def child_card(self, child: str) -> dict:
        if child not in self._cards:
            status, card = await self.request("GET", f"/svc/mcp-{child}/.well-known/agent-env.json", child=child)
            if status >= 300 or not isinstance(card, dict):
                raise StepError(f"step {self.ctx.step.id!r}: cannot read the card of {self.where(child)} "
                                f"({status}): {message_of(card)}")
            self._cards[child] = card
        return self._cards[child]

    async def operations(self, child: str) -> list[str]:
        return list(((await self.child_card(child)).get("capabilities") or {}).get("operations") or [])

    async def extension(self, child: str, uri: str) -> dict | None:
        for ext in ((await self.child_card(child)).get("capabilities") or {}).get("extensions") or []:
            if isinstance(ext, dict) and ext.get("uri") == uri:
                return ext
        return None

    async def call_extension(self, child: str, ext: dict, args: dict, op: str | None = None) -> Any:
        """Call the endpoint an extension advertises (params.methods.<op> or params.endpoint), child-rooted
        endpoints made gateway-rooted under /svc/mcp-<child>."""
        params = ext.get("params") or {}
        methods = params.get("methods")
        if not isinstance(methods, dict):
            methods = {}
        entry: dict = {}
        if op is not None:
            if op not in methods:
                raise StepError(f"step {self.ctx.step.id!r}: extension {ext.get('uri')!r} of {self.where(child)} "
                                f"has no op {op!r}" + (f" (it has: {', '.join(methods)})" if methods else ""))
            entry = methods[op] or {}
        elif len(methods) == 1:
            entry = next(iter(methods.values())) or {}
        endpoint = entry.get("endpoint") or params.get("endpoint")
        if op is not None and not entry.get("endpoint") and endpoint and len(methods) > 1:
            endpoint = endpoint.rstrip("/") + "/" + op
        if not endpoint:
            raise StepError(f"step {self.ctx.step.id!r}: extension {ext.get('uri')!r} of {self.where(child)} "
                            "advertises no endpoint to call")
        if not endpoint.startswith("/svc/"):
            endpoint = f"/svc/mcp-{child}/" + endpoint.lstrip("/")
        method = str(entry.get("method") or "POST").upper()
        if method == "GET":
            status, answer = await self.request("GET", endpoint, params=args, child=child)
        else:
            status, answer = await self.request(method, endpoint, body=args, child=child)
        if status >= 300 or (isinstance(answer, dict) and answer.get("ok") is False):
            raise StepError(f"step {self.ctx.step.id!r}: {ext.get('uri')} on {self.where(child)} failed "
                            f"({method} {endpoint} -> {status}): {message_of(answer)}")
        return answer

    # -- data plane ------------------------------------------------------------------------------------
    async def rpc(self, child: str | None, method: str, params: dict | None = None) -> Any:
        """JSON-RPC on a child's data plane (/svc/mcp-<child>/agentenv), or the env-level one (child None)."""
        path = f"/svc/mcp-{child}/agentenv" if child else "/agentenv"
        body = jsonrpc.request(method, params or {})
        status, answer = await self.request("POST", path, body=body, child=child)
        if isinstance(answer, dict) and answer.get("error"):
            err = answer["error"]
            if isinstance(err, dict):
                data = err.get("data")
                if isinstance(data, dict):  # the SDK's structured error: code, message, hint, ...
                    extra = f" (hint: {data['hint']})" if data.get("hint") else ""
                else:
                    extra = f" ({json.dumps(data, default=str)[:300]})" if data else ""
                raise RpcError(f"{err.get('message')}{extra}", err.get("code"))
            raise RpcError(str(err))
        if status >= 300 or not isinstance(answer, dict) or "result" not in answer:
            raise RpcError(f"HTTP {status}: {message_of(answer)}")
        return answer["result"]


def admin_token(ctx: StepContext, record: dict) -> str | None:
    """The control-plane credential of a deployed env instance (None when it has none: an opted-out instance)."""
    manager = getattr(ctx.services, "envs", None)
    return manager.admin_token(record["instance_id"]) if manager is not None and record.get("instance_id") else None


def admin_headers(ctx: StepContext, record: dict) -> dict[str, str]:
    """The control-plane credential of a deployed env instance, as request headers ({} when it has none)."""
    token = admin_token(ctx, record)
    return {"Authorization": f"Bearer {token}"} if token else {}


def message_of(answer: Any) -> str:
    if isinstance(answer, dict):
        for key in ("error", "message", "detail"):
            value = answer.get(key)
            if isinstance(value, dict):
                value = value.get("message") or json.dumps(value)
            if value:
                return str(value)
        return json.dumps(answer, default=str)[:500]
    return tail(str(answer), 500) or "(empty answer)"
