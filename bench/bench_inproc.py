"""In-process calls inside one hub (agentenv_local/inproc.py) against the same calls over loopback TCP, side by side.

    .venv/bin/python bench/bench_inproc.py [--turns 200] [--concurrency 1,10,50] [--rounds 3]

One process, one event loop, as in a hub: an env gateway over the `echo` example env and an in-hub `scripted`
agent whose turn calls the gateway's `echo` tool, both served through hosting/asgi.py. A round sends --turns A2A
messages (blocking) at each concurrency with the apps registered (in-process) and again with AGENTENV_INPROC=0
(over the socket), alternately; it prints turns/s for each and their ratio (the median over --rounds). Each turn is
two in-hub calls that take the short-circuit: runner -> agent (A2A) and agent -> gateway (MCP tools/call).
Nothing here is asserted by the tests.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ECHO = ROOT / "examples" / "envs" / "echo" / "server.py"


async def measure(turns: int, concurrency: int, inproc_on: bool) -> float:
    from agentenv_local.agents.client import A2AClient
    from agentenv_local.env import load_env
    from agentenv_local.gateway.fastpath import protocol_class
    from agentenv_local.gateway.server import ChildSpec, Gateway
    from agentenv_local.hosting.agents.hosted import serve_in_hub
    from agentenv_local.hosting.asgi import start_server, stop_server

    os.environ["AGENTENV_INPROC"] = "1" if inproc_on else "0"  # read as each app starts
    async with Gateway("echo", [ChildSpec("echo", load_env(ECHO))], control_plane_auth=False) as gw:
        server, task, port = await start_server(gw.app(), task_name="gateway", http=protocol_class(gw))
        plan = {"steps": [{"tool": "echo", "args": {"text": "{input}"}, "save_as": "said"}, {"reply": "{said}"}]}
        agent = await serve_in_hub("scripted", {"plan": plan})
        try:
            async with A2AClient(agent.url, timeout=60) as client:
                await client.mcp_config_add(f"http://127.0.0.1:{port}/mcp", name="echo")
                await client.send("warm", blocking=True)
                gate = asyncio.Semaphore(concurrency)

                async def one(i: int) -> None:
                    async with gate:
                        await client.send(f"turn {i}", blocking=True)

                started = time.perf_counter()
                await asyncio.gather(*(one(i) for i in range(turns)))
                return turns / (time.perf_counter() - started)
        finally:
            await agent.stop()
            await stop_server(server, task)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--concurrency", default="1,10,50")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    concurrencies = [int(c) for c in args.concurrency.split(",") if c.strip()]
    results: dict[tuple[int, bool], list[float]] = {}
    for round_no in range(args.rounds):
        for concurrency in concurrencies:
            for inproc_on in (True, False) if round_no % 2 == 0 else (False, True):  # alternate who goes first
                rate = asyncio.run(measure(args.turns, concurrency, inproc_on))
                results.setdefault((concurrency, inproc_on), []).append(rate)
    print(f"A2A turns/s (each: runner -> in-hub agent -> in-hub gateway tool call), median of {args.rounds} rounds:")
    for concurrency in concurrencies:
        on = statistics.median(results[(concurrency, True)])
        off = statistics.median(results[(concurrency, False)])
        print(f"  concurrency {concurrency:>3}: in-process {on:7.1f}/s, over TCP {off:7.1f}/s = {on / off:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
