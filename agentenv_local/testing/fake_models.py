"""A local model server that speaks both wire formats, for tests and offline examples.

    from agentenv_local.testing.fake_models import FakeModelServer, Reply

    with FakeModelServer(api_key="test-key", script=[Reply.tool_call("search", {"q": "x"}),
                                                      Reply.text("found it")]) as srv:
        provider = OpenAIChatProvider(srv.base_url, api_key="test-key")     # or AnthropicMessagesProvider
        ...
        srv.requests        # every request, in order: api, path, headers, body, status, problems

It is a real HTTP server (uvicorn in a background thread, listening on 127.0.0.1, any free port)
serving `POST /v1/chat/completions` (OpenAI Chat Completions), `POST /v1/messages` (Anthropic
Messages), `POST /v1/responses` (OpenAI Responses API) and `POST /v1beta/models/MODEL:generateContent`
(Gemini; `:streamGenerateContent`, `:countTokens`), each plain or streamed as server-sent events,
plus the side calls coding CLIs make (`GET /v1/models`, `POST /v1/messages/count_tokens`). Each
request is checked strictly, the way the real APIs check it: required fields, message and
content-block shapes, that tool results answer the tool calls of the assistant turn right before
them, tool schemas, sampling ranges, and the auth header (`Authorization: Bearer KEY`,
`x-api-key: KEY` plus `anthropic-version`, or `x-goog-api-key: KEY`). A bad request gets the API's
own error shape (400 or 401) and does not consume the script.

A good request is answered by the next item of `script` (a `Reply`, or a callable taking the
`RecordedRequest` and returning one); when the script is used up, by `responder` (default:
`RuleResponder()`: call the first offered tool until a tool result comes back, then answer text).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Self

from agentenv_local.env.serve import bind_socket
from agentenv_local.testing import wire_gemini, wire_responses
from agentenv_local.testing.model_script import Api, RecordedRequest, Reply, RuleResponder, example_from_schema
from agentenv_local.testing.wire_anthropic import anthropic_error, anthropic_stream, validate_anthropic
from agentenv_local.testing.wire_checks import count_tokens
from agentenv_local.testing.wire_openai import openai_error, openai_stream, validate_openai

ScriptItem = Reply | Callable[[RecordedRequest], Reply]


@dataclass
class _Stream:
    """A streamed answer: its server-sent events, in order."""

    events: list[bytes]


class FakeModelServer:
    """A local HTTP server speaking Chat Completions and Messages; see the module docstring.

    `api_key`: the key every request must carry (None: no auth check). `script`: replies in order.
    `responder`: answers once the script is used up (default `RuleResponder()`). `echo_key_in_errors`:
    a 401 quotes the key the client sent (some proxies do; tests use it to prove clients mask keys).
    `models`: the ids `GET /v1/models` lists (the CLIs ask at start; any model name is still answered).
    """

    def __init__(self, *, api_key: str | None = None, script: Iterable[ScriptItem] | None = None,
                 responder: Callable[[RecordedRequest], Reply] | None = None, host: str = "127.0.0.1",
                 port: int = 0, echo_key_in_errors: bool = False, models: Iterable[str] = ("fake-model",)) -> None:
        self.api_key = api_key
        self.models = list(models)
        self._script: list[ScriptItem] = list(script or [])
        self.responder = responder or RuleResponder()
        self.host = host
        self._port = port
        self.echo_key_in_errors = echo_key_in_errors
        self._requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._sock: Any = None
        self._ids = 0

    # -- lifecycle ------------------------------------------------------------------------------------

    def start(self) -> Self:
        import uvicorn

        if self._thread is not None:
            return self
        self._sock = bind_socket(self.host, self._port)
        self._port = self._sock.getsockname()[1]
        config = uvicorn.Config(self._app, log_level="warning", log_config=None, access_log=False, lifespan="off",
                                interface="asgi3",
                                timeout_graceful_shutdown=1)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]},
                                        name=f"fake-model-server:{self._port}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the fake model server did not start")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        self._closing.set()
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._sock is not None:
            self._sock.close()
        self._thread = self._server = self._sock = None

    close = stop

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- what tests read and change -------------------------------------------------------------------

    @property
    def port(self) -> int:
        return self._port

    @property
    def root_url(self) -> str:
        return f"http://{self.host}:{self._port}"

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:PORT/v1`: the base URL for both providers (Anthropic's drops the /v1)."""
        return self.root_url + "/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    def valid_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if not r.problems]

    def push(self, *items: ScriptItem) -> None:
        """Add replies to the end of the script."""
        with self._lock:
            self._script.extend(items)

    def reset(self, script: Iterable[ScriptItem] | None = None) -> None:
        """Forget recorded requests and replace the script."""
        with self._lock:
            self._requests.clear()
            self._script = list(script or [])

    @property
    def remaining(self) -> int:
        """Script items not used yet."""
        with self._lock:
            return len(self._script)

    # -- ASGI -----------------------------------------------------------------------------------------

    async def _app(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            return
        chunks = []
        while True:
            event = await receive()
            chunks.append(event.get("body", b""))
            if not event.get("more_body"):
                break
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        method, path = scope["method"], scope["path"]
        try:
            query = scope.get("query_string", b"").decode("latin-1")
            status, body, extra_headers = await self._handle(method, path, headers, b"".join(chunks), query)
        except Exception as exc:  # a bug in a scripted callable: answer 500, say what broke
            status, body, extra_headers = 500, {"error": {"message": f"fake server error: {exc!r}",
                                                          "type": "server_error"}}, {}
        extra = [(k.encode("latin-1"), str(v).encode("latin-1")) for k, v in extra_headers.items()]
        if isinstance(body, _Stream):  # server-sent events, one body chunk per event
            head = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache")]
            await send({"type": "http.response.start", "status": status, "headers": head + extra})
            for event in body.events:
                await send({"type": "http.response.body", "body": event, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
            return
        payload = json.dumps(body).encode() if not isinstance(body, bytes) else body
        out = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": out + extra})
        await send({"type": "http.response.body", "body": payload})

    async def _handle(self, method: str, path: str, headers: dict, raw: bytes,
                      query: str = "") -> tuple[int, Any, dict]:
        apis: dict[str, Api] = {"/v1/chat/completions": "openai", "/v1/messages": "anthropic",
                                "/v1/responses": "responses"}
        path = path.rstrip("/") or "/"
        api = apis.get(path)
        gemini = wire_gemini.PATH.match(path)
        if gemini:
            api = "gemini"
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        rec = RecordedRequest(api=api, method=method, path=path, headers=headers, body=body, query=query)
        with self._lock:
            self._requests.append(rec)

        def answer(status: int, payload: Any, extra: dict | None = None) -> tuple[int, Any, dict]:
            rec.status = status
            return status, payload, extra or {}

        side = self._side_endpoint(rec)
        if side is not None:
            return answer(*side)
        if api is None:
            rec.problems.append(f"unknown path {path}")
            return answer(404, {"error": {"message": f"Not found: {method} {path}", "type": "not_found_error"}})
        error = (openai_error if api == "openai" else wire_responses.responses_error if api == "responses"
                 else wire_gemini.gemini_error if api == "gemini"
                 else (lambda s, m, k, c=None: anthropic_error(s, m, k)))
        if method != "POST":
            rec.problems.append(f"method {method} not allowed")
            return answer(405, error(405, f"Method {method} not allowed", "invalid_request_error"))
        auth_problem = (self._check_gemini_auth(headers, query) if api == "gemini"
                        else self._check_auth("anthropic" if api == "anthropic" else "openai", headers))
        if auth_problem:
            rec.problems.append(auth_problem)
            return answer(401, error(401, auth_problem, None, "invalid_api_key"))
        if not isinstance(body, dict) and headers.get("content-type", "").split(";")[0].strip() != "application/json":
            rec.problems.append("content-type must be application/json")
        if gemini and gemini.group("method") == "countTokens":
            rec.problems += wire_gemini.validate_gemini(body, count_only=True)
            if rec.problems:
                return answer(400, error(400, "; ".join(rec.problems), None))
            return answer(200, {"totalTokens": count_tokens(json.dumps(body))})
        rec.problems += (validate_openai(body) if api == "openai" else wire_responses.validate_responses(body)
                         if api == "responses" else wire_gemini.validate_gemini(body) if api == "gemini"
                         else validate_anthropic(body, headers))
        if rec.problems:
            return answer(400, error(400, "; ".join(rec.problems), "invalid_request_error"))

        with self._lock:
            item = self._script.pop(0) if self._script else None
        reply = item(rec) if callable(item) else item
        if reply is None:
            reply = self.responder(rec)
        if reply.delay_s:
            deadline = time.monotonic() + reply.delay_s
            while time.monotonic() < deadline and not self._closing.is_set():
                await asyncio.sleep(min(0.02, max(0.0, deadline - time.monotonic())))
        extra = dict(reply.headers)
        if reply.retry_after is not None:
            extra["retry-after"] = str(reply.retry_after)
        if reply.raw is not None:
            raw_body = reply.raw if isinstance(reply.raw, (bytes, dict, list)) else str(reply.raw).encode()
            return answer(reply.status, raw_body, extra)
        if reply.status != 200:
            return answer(reply.status, error(reply.status, reply.error_message, reply.error_type), extra)
        assert isinstance(body, dict)  # validation refused anything else
        stream = bool(body.get("stream"))
        if api == "openai":
            completion = self._openai_body(rec, reply)
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return answer(200, _Stream(openai_stream(completion, include_usage=include_usage)) if stream
                          else completion, extra)
        if gemini:
            candidate = self._gemini_body(rec, reply)
            if gemini.group("method") == "generateContent":
                return answer(200, candidate, extra)
            chunks = wire_gemini.gemini_stream(candidate)
            if "alt=sse" in query.split("&"):
                return answer(200, _Stream(chunks), extra)
            # without alt=sse the API streams one JSON array of the same chunks
            return answer(200, [json.loads(c.decode().removeprefix("data: ")) for c in chunks], extra)
        if api == "responses":
            response = self._responses_body(rec, reply)
            return answer(200, _Stream(wire_responses.responses_stream(response)) if stream else response, extra)
        message = self._anthropic_body(rec, reply)
        return answer(200, _Stream(anthropic_stream(message)) if stream else message, extra)

    def _side_endpoint(self, rec: RecordedRequest) -> tuple[int, Any] | None:
        """The calls CLIs make besides the conversation: list models, one model, count tokens (Anthropic)."""
        path, method = rec.path, rec.method
        anthropic = "anthropic-version" in rec.headers
        if path == "/v1/messages/count_tokens" and method == "POST":
            rec.api = "anthropic"
            problem = self._check_auth("anthropic", rec.headers)
            if problem:
                rec.problems.append(problem)
                return 401, anthropic_error(401, problem, None)
            body = rec.body if isinstance(rec.body, dict) else None
            if body is not None and "max_tokens" in body:
                rec.problems.append("max_tokens: Extra inputs are not permitted")
            # the same checks as a Messages request, which needs max_tokens and has no stream
            probe = {**body, "max_tokens": 1024} if body is not None else rec.body
            rec.problems += validate_anthropic(probe, rec.headers)
            if rec.problems:
                return 400, anthropic_error(400, "; ".join(rec.problems), "invalid_request_error")
            return 200, {"input_tokens": count_tokens(json.dumps(rec.messages)) + count_tokens(rec.system)}
        if method != "GET" or not (path == "/v1/models" or path.startswith("/v1/models/")):
            return None
        problem = self._check_auth("anthropic" if anthropic else "openai", rec.headers)
        if problem:
            rec.problems.append(problem)
            return 401, (anthropic_error(401, problem, None) if anthropic else openai_error(401, problem, None))
        ids = list(dict.fromkeys(self.models + [r.model for r in self.requests if isinstance(r.model, str)]))
        if anthropic:
            cards: list[dict[str, Any]] = [{"type": "model", "id": m, "display_name": m,
                                            "created_at": "2025-01-01T00:00:00Z"} for m in ids]
        else:
            cards = [{"id": m, "object": "model", "created": 1735689600, "owned_by": "fake"} for m in ids]
        if path == "/v1/models":
            if anthropic:
                return 200, {"data": cards, "has_more": False, "first_id": ids[0] if ids else None,
                             "last_id": ids[-1] if ids else None}
            return 200, {"object": "list", "data": cards}
        wanted = path.removeprefix("/v1/models/")
        return 200, next((c for c in cards if c["id"] == wanted), {**cards[0], "id": wanted} if cards else {})

    def _check_auth(self, api: Api, headers: Mapping[str, str]) -> str | None:
        if self.api_key is None:
            return None
        if api == "openai":
            got = headers.get("authorization")
            if not got:
                return ("You didn't provide an API key. You need to provide your API key in an Authorization header "
                        "using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).")
            scheme, _, key = got.partition(" ")
            if scheme.lower() != "bearer" or key != self.api_key:
                shown = key if self.echo_key_in_errors else (key[:3] + "..." if len(key) > 8 else "***")
                return f"Incorrect API key provided: {shown}."
            return None
        got = headers.get("x-api-key")
        if not got:
            return "x-api-key header is required"
        if got != self.api_key:
            return f"invalid x-api-key{': ' + got if self.echo_key_in_errors else ''}"
        return None

    def _next_id(self, prefix: str) -> str:
        with self._lock:
            self._ids += 1
            return f"{prefix}{self._ids:04d}"

    def _usage(self, rec: RecordedRequest, reply: Reply, out_text: str) -> tuple[int, int]:
        if reply.usage is not None:
            return reply.usage
        return count_tokens(json.dumps(rec.body.get("messages"))) + count_tokens(rec.system), count_tokens(out_text)

    def _openai_body(self, rec: RecordedRequest, reply: Reply) -> dict:
        text = reply.text
        if reply.json is not None:
            text = json.dumps(reply.json)
        message: dict[str, Any] = {"role": "assistant", "content": text if (text or not reply.tool_calls) else None}
        if reply.tool_calls:
            message["tool_calls"] = [{"id": self._next_id("call_"), "type": "function",
                                      "function": {"name": n, "arguments": a if isinstance(a, str) else json.dumps(a)}}
                                     for n, a in reply.tool_calls]
        finish = "tool_calls" if reply.tool_calls else ("length" if reply.stop == "length" else "stop")
        out_text = (text or "") + json.dumps(message.get("tool_calls") or "")
        inp, outp = self._usage(rec, reply, out_text)
        return {"id": self._next_id("chatcmpl-"), "object": "chat.completion", "created": int(time.time()),
                "model": rec.model, "choices": [{"index": 0, "message": message, "finish_reason": finish,
                                                 "logprobs": None}],
                "usage": {"prompt_tokens": inp, "completion_tokens": outp, "total_tokens": inp + outp}}

    def _gemini_body(self, rec: RecordedRequest, reply: Reply) -> dict:
        text = json.dumps(reply.json) if reply.json is not None else reply.text
        calls = [(n, json.loads(a) if isinstance(a, str) else a) for n, a in reply.tool_calls]
        inp = count_tokens(json.dumps(rec.body.get("contents"))) + count_tokens(rec.system)
        usage = reply.usage or (inp, count_tokens((text or "") + json.dumps(calls)))
        return wire_gemini.response_body(model=rec.model or "", response_id=self._next_id("resp_"), text=text,
                                         calls=calls, usage=usage, truncated=reply.stop == "length")

    def _check_gemini_auth(self, headers: Mapping[str, str], query: str) -> str | None:
        if self.api_key is None:
            return None
        keys = [v for k, _, v in (p.partition("=") for p in query.split("&")) if k == "key"]
        got = headers.get("x-goog-api-key") or (keys[0] if keys else None)
        if not got:
            return ("Method doesn't allow unregistered callers (callers without established identity). Please use "
                    "API Key or other form of API consumer identity to call this API.")
        if got != self.api_key:
            return "API key not valid. Please pass a valid API key."
        return None

    def _responses_body(self, rec: RecordedRequest, reply: Reply) -> dict:
        text = json.dumps(reply.json) if reply.json is not None else reply.text
        calls = [(self._next_id("call_"), n, a if isinstance(a, str) else json.dumps(a)) for n, a in reply.tool_calls]
        inp = count_tokens(json.dumps(rec.body.get("input"))) + count_tokens(rec.system)
        usage = reply.usage or (inp, count_tokens((text or "") + json.dumps(calls)))
        return wire_responses.response_object(
            response_id=self._next_id("resp_"), model=rec.model, created=int(time.time()), text=text, calls=calls,
            usage=usage, message_id=self._next_id("msg_"), incomplete=reply.stop == "length")

    def _anthropic_body(self, rec: RecordedRequest, reply: Reply) -> dict:
        content: list[dict] = []
        calls = list(reply.tool_calls)
        if reply.json is not None:
            output_tool = rec._output_tool()
            if output_tool:
                calls.append((output_tool, reply.json))
            else:
                content.append({"type": "text", "text": json.dumps(reply.json)})
        if reply.text:
            content.insert(0, {"type": "text", "text": reply.text})
        thinking = (rec.body.get("thinking") or {}).get("type") in ("enabled", "adaptive")
        if reply.thinking and thinking:
            content.insert(0, {"type": "thinking", "thinking": reply.thinking,
                               "signature": self._next_id("sig_")})
        for name, args in calls:
            content.append({"type": "tool_use", "id": self._next_id("toolu_"), "name": name, "input": args})
        if reply.tool_calls or (reply.json is not None and rec._output_tool()):
            stop = "tool_use"
        else:
            stop = "max_tokens" if reply.stop == "length" else "end_turn"
        inp, outp = self._usage(rec, reply, json.dumps(content))
        return {"id": self._next_id("msg_"), "type": "message", "role": "assistant", "model": rec.model,
                "content": content, "stop_reason": stop, "stop_sequence": None,
                "usage": {"input_tokens": inp, "output_tokens": outp}}


__all__ = ["FakeModelServer", "RecordedRequest", "Reply", "RuleResponder", "example_from_schema",
           "validate_anthropic", "validate_openai"]
