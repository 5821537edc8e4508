"""Env reset benchmark: put an in-process env back to a snapshot.

    .venv/bin/python bench/bench_env_reset.py [--iterations 200]

For the mail and crm example envs loaded with their seed: take a snapshot (`data/get`), then time,
over --iterations rounds, `data/reset` + `data/add` of the snapshot's parts: in-process (the hub's
path for an in-process env: `Env.data_rpc`, no HTTP) and through a gateway's `/svc` data plane over
HTTP, for comparison. Target: p50 of the in-process reset below 50 ms. Nothing is asserted by tests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TARGET_MS = 50.0


def rpc(method: str, params: dict | None = None) -> dict:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}


async def measure_in_process(name: str, iterations: int) -> tuple[float, float, int]:
    from agentenv_local.env import load_env

    env = load_env(str(ROOT / "examples" / "envs" / name / "server.py"))
    seed = json.loads((ROOT / "examples" / "envs" / name / "seed.json").read_text())
    loaded = await env.data_rpc(rpc("data/add", {"parts": [{"kind": "data", "data": seed}]}))
    assert "error" not in loaded, loaded
    snapshot = (await env.data_rpc(rpc("data/get")))["result"]["parts"]
    times = []
    for _ in range(iterations):
        started = time.perf_counter()
        await env.data_rpc(rpc("data/reset"))
        answer = await env.data_rpc(rpc("data/add", {"parts": snapshot}))
        times.append((time.perf_counter() - started) * 1000)
        assert "error" not in answer, answer
    after = (await env.data_rpc(rpc("data/get")))["result"]["parts"]
    assert after == snapshot, "the reset did not restore the snapshot"
    rows = sum(len(v) for v in snapshot[0]["data"].values() if isinstance(v, list))
    return statistics.median(times), max(times), rows


async def measure_through_gateway(iterations: int) -> float:
    import httpx2
    from gateway_support import serve_gateway

    from agentenv_local.env import load_env

    mail = load_env(str(ROOT / "examples" / "envs" / "mail" / "server.py"))
    seed = json.loads((ROOT / "examples" / "envs" / "mail" / "seed.json").read_text())
    async with serve_gateway({"mail": mail}) as base, httpx2.AsyncClient(timeout=30) as http:
        url = base + "/svc/mcp-mail/agentenv"
        await http.post(url, json=rpc("data/add", {"parts": [{"kind": "data", "data": seed}]}))
        snapshot = (await http.post(url, json=rpc("data/get"))).json()["result"]["parts"]
        times = []
        for _ in range(iterations):
            started = time.perf_counter()
            await http.post(url, json=rpc("data/reset"))
            await http.post(url, json=rpc("data/add", {"parts": snapshot}))
            times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=200)
    args = parser.parse_args()
    print(f"{'measure':<58} {'target':>9} {'p50':>9} {'max':>9}  result")
    for name in ("mail", "crm"):
        p50, worst, rows = asyncio.run(measure_in_process(name, args.iterations))
        verdict = "PASS" if p50 < TARGET_MS else "MISS"
        print(f"{f'reset {name} from a snapshot ({rows} rows), in-process':<58} {'< 50 ms':>9} "
              f"{p50:>7.2f}ms {worst:>7.2f}ms  {verdict}")
    try:
        p50 = asyncio.run(measure_through_gateway(args.iterations))
        print(f"{'reset mail from a snapshot through a gateway (/svc, HTTP)':<58} {'-':>9} {p50:>7.2f}ms")
    except ImportError as exc:  # the helper below is small; keep the in-process numbers either way
        print(f"(gateway measurement skipped: {exc})")


if __name__ == "__main__":
    main()
