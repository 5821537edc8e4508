"""snapshot/v1 (`urn:agentenv:snapshot/v1`): save an agent's state for one conversation and load it into another
agent, as the reference's extension does, with the objects carried inline (no object-store grants offline).

    POST /ext/snapshot {"context_id"}                          -> {"context_id", "objects": {name: OBJECT}}
    PUT  /ext/snapshot {"objects": {name: OBJECT}, "target_context_id"?} -> {"context_id"}

OBJECT is `{"media_type": "application/octet-stream", "data_b64": ...}`; the objects are the reference's
`trajectory` (the agent-native conversation state, required) and `workspace` (optional). What the bytes hold is
the agent's own business. An agent offers it by serving `snapshot_routes(...)` (Agent.extra_routes) and listing
`snapshot_extension()` (Agent.card_extensions); `save` and `load` are the client side (snapshot_agent_state and
deploy_agent call them).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from typing import Any

from agentenv_local.errors import AgentenvError

URI = "urn:agentenv:snapshot/v1"
ENDPOINT = "/ext/snapshot"
OPAQUE = "application/octet-stream"
OBJECT_NAMES = ("trajectory", "workspace")
MAX_OBJECT_BYTES = 64 * 1024 * 1024  # inline in one JSON body: a bound, not the reference's GiB


class SnapshotError(AgentenvError):
    """A snapshot could not be saved or loaded."""


def snapshot_extension() -> dict[str, Any]:
    return {"uri": URI, "description": "Save and restore agent-native state (objects inline).",
            "params": {"endpoint": ENDPOINT,
                       "methods": {"save": {"method": "POST", "request": {"required": ["context_id"],
                                                                          "variants": ["inline"]}},
                                   "load": {"method": "PUT", "request": {"required": ["objects"],
                                                                         "optional": ["target_context_id"],
                                                                         "variants": ["inline"]}}}}}


def encode_objects(objects: dict[str, bytes]) -> dict[str, dict[str, str]]:
    return {name: {"media_type": OPAQUE, "data_b64": base64.b64encode(data).decode()} for name, data in objects.items()}


def decode_objects(objects: Any) -> dict[str, bytes]:
    """The bytes of each object; SnapshotError saying what is wrong with a malformed one."""
    if not isinstance(objects, dict) or "trajectory" not in objects:
        raise SnapshotError("snapshot objects must be an object with a 'trajectory' entry")
    out = {}
    for name, obj in objects.items():
        if name not in OBJECT_NAMES:
            raise SnapshotError(f"unknown snapshot object {name!r}; the objects are {', '.join(OBJECT_NAMES)}")
        if not isinstance(obj, dict) or obj.get("media_type") != OPAQUE or not isinstance(obj.get("data_b64"), str):
            raise SnapshotError(f"snapshot object {name!r} must be {{'media_type': '{OPAQUE}', 'data_b64': ...}}")
        if len(obj["data_b64"]) > MAX_OBJECT_BYTES * 4 // 3 + 4:
            raise SnapshotError(f"snapshot object {name!r} is larger than {MAX_OBJECT_BYTES} bytes")
        try:
            out[name] = base64.b64decode(obj["data_b64"], validate=True)
        except (binascii.Error, ValueError):
            raise SnapshotError(f"snapshot object {name!r}: data_b64 is not base64") from None
    return out


def snapshot_routes(save: Callable[[str], dict[str, bytes]],
                    load: Callable[[dict[str, bytes], str | None], str]) -> list[Any]:
    """The `/ext/snapshot` route over an agent's `save(context_id) -> objects` and `load(objects, target) ->
    context_id` (each raising SnapshotError, or KeyError for an unknown context, on what it cannot do)."""
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from agentenv_local.untrusted import UntrustedInputError, parse_json

    async def endpoint(request: Request) -> JSONResponse:
        try:
            body = parse_json(await request.body(), what="the body")
        except UntrustedInputError as exc:
            return JSONResponse({"detail": str(exc)}, status_code=400)
        if not isinstance(body, dict):
            return JSONResponse({"detail": "the body must be a JSON object"}, status_code=400)
        try:
            if request.method == "POST":
                context_id = body.get("context_id")
                if not isinstance(context_id, str) or not context_id:
                    raise SnapshotError("context_id: required (the conversation to save)")
                return JSONResponse({"context_id": context_id, "objects": encode_objects(save(context_id))})
            target = body.get("target_context_id")
            if target is not None and (not isinstance(target, str) or not target):
                raise SnapshotError("target_context_id: must be a non-empty string")
            return JSONResponse({"context_id": load(decode_objects(body.get("objects")), target)})
        except SnapshotError as exc:
            return JSONResponse({"detail": exc.message}, status_code=400)
        except KeyError as exc:
            return JSONResponse({"detail": str(exc.args[0]) if exc.args else "unknown context"}, status_code=404)

    return [Route(ENDPOINT, endpoint, methods=["POST", "PUT"])]


async def _call(a2a_url: str, method: str, body: dict[str, Any], timeout: float) -> dict[str, Any]:
    import httpx2

    url = a2a_url.rstrip("/") + ENDPOINT
    try:
        async with httpx2.AsyncClient(timeout=timeout) as http:
            answer = await http.request(method, url, json=body)
        payload = answer.json()
    except (httpx2.HTTPError, ValueError) as exc:
        raise SnapshotError(f"{method} {url} failed: {type(exc).__name__}: {exc}") from exc
    if answer.status_code >= 400 or not isinstance(payload, dict):
        detail = payload.get("detail") if isinstance(payload, dict) else str(payload)[:300]
        raise SnapshotError(f"{method} {url} answered HTTP {answer.status_code}: {detail}")
    return payload


async def save(a2a_url: str, context_id: str, *, timeout: float = 120) -> dict[str, bytes]:
    """The agent's snapshot objects for `context_id` (`trajectory`, maybe `workspace`)."""
    payload = await _call(a2a_url, "POST", {"context_id": context_id}, timeout)
    return decode_objects(payload.get("objects"))


async def load(a2a_url: str, objects: dict[str, bytes], *, target_context_id: str | None = None,
               timeout: float = 120) -> str:
    """Load the objects into the agent; the context id the restored conversation continues under."""
    body: dict[str, Any] = {"objects": encode_objects(objects)}
    if target_context_id:
        body["target_context_id"] = target_context_id
    context_id = (await _call(a2a_url, "PUT", body, timeout)).get("context_id")
    if not isinstance(context_id, str) or not context_id:
        raise SnapshotError(f"the agent at {a2a_url} loaded the snapshot but named no context_id")
    return context_id
