"""Our A2A client does not lose requests to a server's keep-alive close, and an in-hub agent answers many prompts
at once (issue 16: 12 of 100 `support` episodes at --concurrency 50 failed with `cannot reach .../a2a`).

The cause: the client kept idle connections for 5 s, exactly as long as uvicorn (our agents, the reference's)
keeps them open. A prompt sent between conversation turns on a connection idle that long could reach the server
just as it closed the connection: the request was reset (a ReadError), and the prompt failed.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import uvicorn
from kits.servers import one_request_per_connection_server

from agentenv_local.agents.client import KEEPALIVE_EXPIRY_S, A2AClient
from agentenv_local.hosting.agents.hosted import resolve_spec, serve_in_hub

# Longer than our expiry, shorter than the 5 s both sides used to keep an idle connection (a fixed figure:
# with the old expiry the client would reuse the connection after this long).
IDLE_S = 1.5
CARD = {"name": "keepalive-probe", "description": "x", "url": "http://127.0.0.1/a2a", "protocolVersion": "0.3",
        "version": "1", "capabilities": {}, "skills": [], "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"]}


def _one_request_per_connection_server():
    return one_request_per_connection_server(lambda body: json.dumps(CARD).encode())


def test_an_idle_connection_is_not_reused_past_the_expiry():
    async def main() -> dict[str, Any]:
        server, port, counts = await _one_request_per_connection_server()
        async with server, A2AClient(f"http://127.0.0.1:{port}") as client:
            await client.card()
            await asyncio.sleep(IDLE_S)
            card = await client.card(refresh=True)
        return {"card": card, **counts}

    seen = asyncio.run(main())
    assert seen["card"]["name"] == "keepalive-probe"
    assert seen["reset"] == 0 and seen["answered"] == 2 and seen["connections"] == 2, seen


def test_the_expiry_is_below_the_keep_alive_of_the_servers_we_talk_to():
    """uvicorn serves our agents (in the hub and as subprocesses) and the reference's with its default."""
    assert KEEPALIVE_EXPIRY_S < IDLE_S < uvicorn.Config(app="unused:app").timeout_keep_alive


def test_our_servers_keep_idle_connections_longer_than_clients_reuse_them():
    """Clients we do not control (mcp's, the reference's, an editor's) keep reusing an idle connection for httpx's
    default 5 s: the servers the hub runs (agents, gateways, in-hub envs) must not close one sooner."""
    import httpx2

    client_expiry = httpx2.Limits().keepalive_expiry or 0.0

    async def main() -> float:
        hosted = await serve_in_hub(resolve_spec("scripted"), {"plan": {"steps": [{"reply": "x"}]}})
        try:
            return float(hosted._server.config.timeout_keep_alive)
        finally:
            await hosted.stop()

    assert asyncio.run(main()) >= 2 * client_expiry > 0


def test_sixty_concurrent_prompts_to_one_in_hub_agent_are_all_answered():
    plan = {"plan": {"steps": [{"reply": "echo: {input}"}]}}

    async def main() -> list[Any]:
        hosted = await serve_in_hub(resolve_spec("scripted"), plan)
        try:
            async def ask(i: int) -> Any:
                async with A2AClient(hosted.url) as client:
                    first = await client.prompt(f"q{i}", context_id=f"c{i}", timeout=120)
                    # a second turn on the same client after the first one's connection went idle
                    await asyncio.sleep(IDLE_S)
                    second = await client.prompt(f"again {i}", context_id=f"c{i}", timeout=120)
                    return first, second

            return await asyncio.gather(*(ask(i) for i in range(60)), return_exceptions=True)
        finally:
            await hosted.stop()

    results = asyncio.run(main())
    failures = [r for r in results if isinstance(r, BaseException)]
    assert not failures, failures[:3]
    answered = [(a.state, a.text, b.state, b.text) for a, b in (r for r in results if isinstance(r, tuple))]
    assert answered == [("completed", f"echo: q{i}", "completed", f"echo: again {i}") for i in range(60)]


def test_clients_share_one_tls_context(monkeypatch):
    """A hub makes A2A clients by the hundred under load; each one building its TLS context (loading the CA
    bundle) blocked the hub's loop. They share one, which still verifies certificates."""
    import ssl

    import httpcore2

    from agentenv_local import http_clients

    built: list[ssl.SSLContext] = []
    real = httpcore2.default_ssl_context

    def counting(**kwargs: bool) -> ssl.SSLContext:  # what httpx calls to build a verifying context
        built.append(real(**kwargs))
        return built[-1]

    monkeypatch.setattr(httpcore2, "default_ssl_context", counting)
    monkeypatch.setattr(http_clients, "_context", None)
    clients = [A2AClient(f"http://127.0.0.1:{9 + i}") for i in range(20)]
    # the network side of the in-process transport (inproc.py) is the one that opens TLS connections
    contexts = {id(client._client()._transport.network._pool._ssl_context) for client in clients}

    async def close_and_fetch_cards() -> None:
        from agentenv_local.hosting.envs.serving import fetch_card

        for client in clients:
            await client.aclose()
        for _ in range(5):  # the hub's other clients share it too (here: an env card fetched at deploy)
            await fetch_card(f"http://127.0.0.1:{clients[0].base_url.rsplit(':', 1)[1]}/card", None)

    asyncio.run(close_and_fetch_cards())
    assert len(built) == 1 and len(contexts) == 1
    shared = http_clients.shared_tls_context()
    assert shared.verify_mode == ssl.CERT_REQUIRED and shared.check_hostname
