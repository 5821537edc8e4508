"""Sandbox benchmark: the podman provider against bare `podman` commands, side by side in one run.

    .venv/bin/python bench/bench_sandbox.py [--rounds 20] [--parallel 20]

Prints (p50 over --rounds unless said otherwise):
- acquire from the warm pool (a pooled container handed to a run): target <= 10 ms;
- cold start with network none (create + start + exec agent ready), beside a bare
  `podman run --rm --network none BASE true` measured in the same run: target <= 1.2x;
- a command round trip over the persistent channel (`true`), beside `podman exec CONTAINER true`:
  target <= 2 ms;
- --parallel sandboxes started at once and torn down, with a leak check: the wall time.
Needs Podman (`scripts/setup-podman.sh`). Nothing here is asserted by the tests.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# after the path set-up above (this runs as a script, from a clone)
from agentenv_local.sandbox_api import SandboxSpec  # noqa: E402
from sandboxes.podman import PodmanSandboxProvider  # noqa: E402
from sandboxes.podman.engine import podman_binary, podman_env  # noqa: E402

SPEC = SandboxSpec(name="bench", memory_mb=512)


def ms(seconds: float) -> float:
    return seconds * 1000


def bare_podman_run(image: str, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        subprocess.run([podman_binary(), "run", "--rm", "--network", "none", image, "true"], check=True,
                       env=podman_env(), capture_output=True)
        times.append(time.perf_counter() - started)
    return ms(statistics.median(times))


def bare_podman_exec(container: str, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        subprocess.run([podman_binary(), "exec", container, "true"], check=True, env=podman_env(), capture_output=True)
        times.append(time.perf_counter() - started)
    return ms(statistics.median(times))


async def cold_starts(provider: PodmanSandboxProvider, rounds: int) -> tuple[float, float]:
    """p50 of create-until-ready, and of terminate (pool off)."""
    starts, stops = [], []
    for _ in range(rounds):
        started = time.perf_counter()
        sandbox = await provider.create(SPEC)
        starts.append(time.perf_counter() - started)
        started = time.perf_counter()
        await sandbox.terminate()
        stops.append(time.perf_counter() - started)
    return ms(statistics.median(starts)), ms(statistics.median(stops))


async def pool_acquires(provider: PodmanSandboxProvider, rounds: int) -> float:
    image = provider.image_for(SPEC)
    provider.pool.start_fill(SPEC, image)  # warm it ahead, as a long-lived hub does after its first run
    times = []
    for _ in range(rounds):
        for _ in range(600):  # wait for the background refill, outside the measurement
            if provider.pool.ready_count(SPEC, image) >= 1:
                break
            await asyncio.sleep(0.02)
        started = time.perf_counter()
        sandbox = await provider.create(SPEC)
        elapsed = time.perf_counter() - started
        assert sandbox.meta.get("acquired_at"), "not served from the pool"
        times.append(elapsed)
        await sandbox.terminate()
    return ms(statistics.median(times))


async def round_trips(provider: PodmanSandboxProvider, rounds: int) -> tuple[float, float, str]:
    sandbox = await provider.create(SPEC)
    await sandbox.exec(["true"])
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        result = await sandbox.exec(["true"])
        times.append(time.perf_counter() - started)
        assert result.ok
    bare = await asyncio.to_thread(bare_podman_exec, sandbox.container, max(5, rounds // 20))
    await sandbox.terminate()
    return ms(statistics.median(times)), bare, sandbox.sandbox_id


async def parallel(provider: PodmanSandboxProvider, count: int) -> tuple[float, int]:
    started = time.perf_counter()
    boxes = await asyncio.gather(*(provider.create(SPEC) for _ in range(count)))
    results = await asyncio.gather(*(b.exec(["echo", "ok"]) for b in boxes))
    assert all(r.stdout == "ok\n" for r in results)
    await asyncio.gather(*(b.terminate() for b in boxes))
    elapsed = time.perf_counter() - started
    leaks = len(await asyncio.to_thread(provider.containers))
    return elapsed, leaks


def row(name: str, target: str, value: str, verdict: str = "") -> None:
    print(f"{name:<64} {target:>10} {value:>12}  {verdict}")


async def main_async(args) -> None:
    root = Path(tempfile.mkdtemp(prefix="agentenv-bench-sandbox-"))
    cold = PodmanSandboxProvider(root / "cold" / ".agentenv", {"pool_size": 0})
    pooled = PodmanSandboxProvider(root / "pooled" / ".agentenv", {"pool_size": 2})
    try:
        image = await asyncio.to_thread(cold.image_for, SPEC)
        await asyncio.to_thread(cold.ready)
        bare_run = await asyncio.to_thread(bare_podman_run, image, args.rounds)
        cold_p50, stop_p50 = await cold_starts(cold, args.rounds)
        acquire_p50 = await pool_acquires(pooled, args.rounds)
        trip_p50, exec_p50, _ = await round_trips(cold, args.round_trips)
        wall, leaks = await parallel(cold, args.parallel)
        print(f"{'measure':<64} {'target':>10} {'p50':>12}  result")
        row("acquire a sandbox from the warm pool", "<= 10 ms", f"{acquire_p50:.2f} ms",
            "PASS" if acquire_p50 <= 10 else "MISS")
        row("bare `podman run --rm --network none BASE true`", "-", f"{bare_run:.1f} ms")
        ratio = cold_p50 / bare_run
        row("cold start, network none (create, start, exec agent ready)", "<= 1.2x", f"{cold_p50:.1f} ms",
            f"{ratio:.2f}x {'PASS' if ratio <= 1.2 else 'MISS'}")
        row("terminate (force remove, init, stop timeout 1 s)", "-", f"{stop_p50:.1f} ms")
        row("bare `podman exec CONTAINER true`", "-", f"{exec_p50:.1f} ms")
        row("command round trip over the persistent channel (`true`)", "<= 2 ms", f"{trip_p50:.2f} ms",
            f"{exec_p50 / trip_p50:.0f}x faster than podman exec; {'PASS' if trip_p50 <= 2 else 'MISS'}")
        row(f"{args.parallel} sandboxes started in parallel, one command each, torn down", "no leaks",
            f"{wall:.2f} s", "PASS" if leaks == 0 else f"MISS: {leaks} left")
    finally:
        await pooled.aclose()
        await cold.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--round-trips", type=int, default=500)
    parser.add_argument("--parallel", type=int, default=20)
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
