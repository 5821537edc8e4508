#!/usr/bin/env python3
"""The docs server's speed: search latency (p50/p95 over a mix of queries), the index build, and how soon
`agentenv docs serve` answers its first request over stdio (spawn, initialize, tools/list, one search).

    .venv/bin/python bench/bench_docs.py [--rounds 200] [--starts 5]

Prints numbers; asserts nothing (the targets: search p50 under 20 ms, first response within 1 s).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

QUERIES = ["virtual clock", "rbac", "how do I compose environments", "sync_env_clock", "hot reload",
           "podman sandbox warm pool", "resume a run", "secret references in config", "env card extensions",
           "prompt_agent conversation user simulator", "collect artifacts from a sandbox", "plugin entry points",
           "triggers barrier await_fired", "tool name clashes", "what is a bundle"]


def _agentenv() -> str:
    for candidate in (Path(sys.executable).parent / "agentenv", ROOT / ".venv" / "bin" / "agentenv"):
        if candidate.is_file():
            return str(candidate)
    return shutil.which("agentenv") or "agentenv"


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(q * (len(values) - 1)))]


def bench_search(rounds: int) -> None:
    from agentenv_local.docs_server.corpus import _load
    from agentenv_local.docs_server.search import _index, get_index

    t = time.perf_counter()
    index = get_index()
    build = time.perf_counter() - t
    _load.cache_clear()
    _index.cache_clear()
    t = time.perf_counter()
    get_index()
    rebuild = time.perf_counter() - t
    times = []
    for _ in range(rounds):
        for q in QUERIES:
            t = time.perf_counter()
            index.search(q, 5)
            times.append((time.perf_counter() - t) * 1000)
    print(f"index: {len(index.pages)} pages, {len(index.sections)} sections, {len(index.postings)} terms; "
          f"built in {build * 1000:.0f} ms (first, with imports) / {rebuild * 1000:.0f} ms (again)")
    print(f"search_docs: p50 {statistics.median(times):.3f} ms, p95 {pct(times, 0.95):.3f} ms, "
          f"max {max(times):.3f} ms over {len(times)} queries")


async def _first_response() -> tuple[float, float, float]:
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=_agentenv(), args=["docs", "serve"], cwd=str(ROOT))
    t0 = time.perf_counter()
    async with Client(params) as client:
        await client.list_tools()
        first = time.perf_counter() - t0
        t = time.perf_counter()
        await client.call_tool("search_docs", {"query": "virtual clock"})
        search = time.perf_counter() - t
    return first, search, time.perf_counter() - t0


def bench_serve(starts: int) -> None:
    firsts, searches = [], []
    for _ in range(starts):
        first, search, _total = asyncio.run(_first_response())
        firsts.append(first * 1000)
        searches.append(search * 1000)
    print(f"agentenv docs serve (stdio): first response (spawn + initialize + tools/list) p50 "
          f"{statistics.median(firsts):.0f} ms, max {max(firsts):.0f} ms over {starts} starts; "
          f"a search_docs call round trip p50 {statistics.median(searches):.1f} ms")


def bench_cli(starts: int) -> None:
    times = []
    for _ in range(starts):
        t = time.perf_counter()
        subprocess.run([_agentenv(), "docs", "search", "rbac", "--limit", "1"], capture_output=True, check=True)
        times.append((time.perf_counter() - t) * 1000)
    print(f"agentenv docs search (a fresh process): p50 {statistics.median(times):.0f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200, help="passes over the query mix")
    parser.add_argument("--starts", type=int, default=5, help="server starts to time")
    args = parser.parse_args()
    bench_search(args.rounds)
    bench_serve(args.starts)
    bench_cli(args.starts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
