"""Calls between parts of one hub go in-process (agentenv_local/inproc.py): an app the hub serves
(hosting/asgi.py) is reached by the hub's clients (http_clients.async_client) without a socket, with the same
guard, answers and streaming; a stopped app, or AGENTENV_INPROC=0, takes the network as before.

"Without a socket" is read off the uvicorn server itself: no connection was ever accepted (its request counter
stays 0 and it holds no connection) while the calls succeed."""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import httpx2
import pytest
from kits.gateway import ECHO, load

from agentenv_local import inproc
from agentenv_local.gateway.fastpath import protocol_class
from agentenv_local.gateway.server import ChildSpec, Gateway
from agentenv_local.hosting.agents.hosted import serve_in_hub
from agentenv_local.hosting.asgi import start_server, stop_server
from agentenv_local.http_clients import async_client
from agentenv_local.http_guard import GuardPolicy, HttpGuard


def synchronously(test):
    """Run an async test on a fresh loop (the suite has no async test plugin)."""
    @functools.wraps(test)
    def run(*args, **kwargs):
        return asyncio.run(test(*args, **kwargs))
    return run


def untouched(server: Any) -> bool:
    """The uvicorn server never served a request over its socket and holds no connection."""
    return server.server_state.total_requests == 0 and not server.server_state.connections


class Probe:
    """A small ASGI app behind the HTTP guard: /echo answers the request as it arrived; /events streams one SSE
    event per `step` set; /hang never answers; /disconnect records when it sees the client go away."""

    def __init__(self) -> None:
        self.steps: asyncio.Queue[str] = asyncio.Queue()
        self.disconnects = 0

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        path = scope["path"]
        if path == "/echo":
            body = b""
            while True:
                message = await receive()
                body += message.get("body", b"")
                if not message.get("more_body"):
                    break
            headers = {k.decode(): v.decode() for k, v in scope["headers"]}
            import json

            data = json.dumps({"method": scope["method"], "path": path, "query": scope["query_string"].decode(),
                               "body": body.decode(), "host": headers.get("host"),
                               "client_host": scope["client"][0]}).encode()
            await send({"type": "http.response.start", "status": 201,
                        "headers": [(b"content-type", b"application/json"), (b"x-probe", b"yes")]})
            await send({"type": "http.response.body", "body": data})
        elif path == "/events":
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"text/event-stream")]})
            while (step := await self.steps.get()) != "end":
                await send({"type": "http.response.body", "body": f"data: {step}\n\n".encode(), "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        elif path == "/hang":
            await asyncio.sleep(3600)
        elif path == "/disconnect":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"first", "more_body": True})
            while (await receive())["type"] != "http.disconnect":
                pass
            self.disconnects += 1
        elif path == "/boom":
            raise RuntimeError("the app broke")


async def _serve_probe(max_body: int = 1000) -> tuple[Probe, Any, asyncio.Task, str]:
    probe = Probe()
    server, task, port = await start_server(HttpGuard(probe, GuardPolicy(max_body_bytes=max_body)),
                                            task_name="probe")
    return probe, server, task, f"http://127.0.0.1:{port}"


@synchronously
async def test_a_served_app_answers_in_process_as_it_does_over_the_network():
    probe, server, task, base = await _serve_probe()
    try:
        async with async_client(timeout=10) as http, httpx2.AsyncClient(timeout=10) as network:
            inside = await http.post(f"{base}/echo?x=1", content=b"hello")
            assert untouched(server)
            outside = await network.post(f"{base}/echo?x=1", content=b"hello")
        assert server.server_state.total_requests == 1  # the plain client did go over the socket
        assert inside.status_code == outside.status_code == 201
        assert inside.json() == outside.json()
        assert inside.json()["body"] == "hello" and inside.json()["client_host"] == "127.0.0.1"
        # uvicorn's own response headers (date, server) come along, as over the socket
        assert {k for k in outside.headers if k != "content-length" and k != "transfer-encoding"} \
            <= set(inside.headers)
    finally:
        await stop_server(server, task)


@synchronously
async def test_the_guard_refuses_in_process_what_it_refuses_over_the_network():
    probe, server, task, base = await _serve_probe(max_body=1000)
    cases: list[dict[str, Any]] = [
        {"headers": {"Host": "evil.example"}, "content": b"x"},               # 421: DNS rebinding
        {"headers": {"Origin": "http://evil.example"}, "content": b"x"},      # 403: a foreign page
        {"headers": {}, "content": b"x" * 5000},                              # 413: over max_body_bytes
    ]
    try:
        async with async_client(timeout=10) as http:
            inside = [await http.post(f"{base}/echo", **case) for case in cases]
        assert untouched(server)
        async with httpx2.AsyncClient(timeout=10) as network:
            outside = [await network.post(f"{base}/echo", **case) for case in cases]
        assert [r.status_code for r in inside] == [r.status_code for r in outside] == [421, 403, 413]
        assert [r.content for r in inside] == [r.content for r in outside]
    finally:
        await stop_server(server, task)


@synchronously
async def test_an_event_stream_arrives_event_by_event():
    probe, server, task, base = await _serve_probe()
    try:
        async with async_client(timeout=10) as http, http.stream("GET", f"{base}/events") as r:
            assert r.status_code == 200
            lines = r.aiter_lines()
            for step in ("one", "two", "three"):
                probe.steps.put_nowait(step)  # the app sends the next event only now
                assert await asyncio.wait_for(anext(lines), 10) == f"data: {step}"
                assert await anext(lines) == ""
            probe.steps.put_nowait("end")
            assert [line async for line in lines] == []
        assert untouched(server)
    finally:
        await stop_server(server, task)


@synchronously
async def test_timeouts_errors_and_a_client_going_away_behave_as_over_the_socket():
    probe, server, task, base = await _serve_probe()
    try:
        async with async_client(timeout=httpx2.Timeout(10, read=0.2)) as http:
            with pytest.raises(httpx2.ReadTimeout):
                await http.get(f"{base}/hang")
            boom = await http.get(f"{base}/boom")  # uvicorn's answer to an app error
            assert (boom.status_code, boom.text) == (500, "Internal Server Error")
            async with http.stream("GET", f"{base}/disconnect") as r:
                assert await anext(r.aiter_bytes()) == b"first"
            # leaving the block closed the answer early: the app sees http.disconnect
            for _ in range(100):
                if probe.disconnects:
                    break
                await asyncio.sleep(0.01)
            assert probe.disconnects == 1
        assert untouched(server)
    finally:
        await stop_server(server, task)


@synchronously
async def test_a_stopped_app_falls_back_to_the_network_and_its_refusal():
    probe, server, task, base = await _serve_probe()
    port = int(base.rsplit(":", 1)[1])
    assert inproc.registered(port)
    await stop_server(server, task)
    assert not inproc.registered(port)
    async with async_client(timeout=5) as http:
        with pytest.raises(httpx2.ConnectError):
            await http.get(f"{base}/echo")


@synchronously
async def test_stopping_the_server_ends_what_is_still_open_in_process():
    probe, server, task, base = await _serve_probe()
    async with async_client(timeout=30) as http, http.stream("GET", f"{base}/events") as r:
        probe.steps.put_nowait("one")
        lines = r.aiter_lines()
        assert await anext(lines) == "data: one"
        await stop_server(server, task)
        with pytest.raises(httpx2.RemoteProtocolError):
            async for _ in lines:
                pass


@synchronously
async def test_the_off_switch_sends_everything_over_the_network(monkeypatch):
    monkeypatch.setenv("AGENTENV_INPROC", "0")
    probe, server, task, base = await _serve_probe()
    try:
        assert not inproc.registered(int(base.rsplit(":", 1)[1]))
        async with async_client(timeout=10) as http:
            assert (await http.post(f"{base}/echo", content=b"hi")).json()["body"] == "hi"
        assert server.server_state.total_requests == 1
    finally:
        await stop_server(server, task)


@synchronously
async def test_an_in_hub_agent_calls_an_in_hub_gateway_and_the_runner_calls_it_all_without_a_socket():
    """The episode's path: the runner's A2A client -> an in-hub scripted agent -> its MCP client -> an env's
    gateway in the hub (served as hosting/envs/serving.py serves it, with the gateway's own HTTP protocol)."""
    from agentenv_local.agents.client import A2AClient

    async with Gateway("echo", [ChildSpec("echo", load(ECHO))], control_plane_auth=False) as gw:
        gw_server, gw_task, gw_port = await start_server(gw.app(), task_name="gateway", http=protocol_class(gw))
        plan = {"steps": [{"tool": "echo", "args": {"text": "{input}"}, "save_as": "said"},
                          {"reply": "echoed {said}"}]}
        agent = await serve_in_hub("scripted", {"plan": plan})
        try:
            async with A2AClient(agent.url, timeout=30) as client:
                await client.mcp_config_add(f"http://127.0.0.1:{gw_port}/mcp", name="echo")
                answers = []
                for word in ("one", "two"):
                    task = await client.send(word, blocking=True)
                    answers.append(task)
            texts = [str(t.raw) for t in answers]
            assert "echoed one" in texts[0] and "echoed two" in texts[1]
            assert untouched(gw_server)
            assert untouched(agent._server)
        finally:
            await agent.stop()
            await stop_server(gw_server, gw_task)


@synchronously
async def test_a_caller_on_another_event_loop_goes_over_the_socket():
    """The app's objects belong to the hub's loop: a client running its own loop (a thread) must not run it."""
    probe, server, task, base = await _serve_probe()

    async def call() -> Any:
        async with async_client(timeout=10) as http:
            return (await http.post(f"{base}/echo", content=b"elsewhere")).json()

    try:
        answer = await asyncio.to_thread(asyncio.run, call())
        assert answer["body"] == "elsewhere"
        assert server.server_state.total_requests == 1
    finally:
        await stop_server(server, task)
