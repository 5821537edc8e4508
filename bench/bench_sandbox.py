"""Sandbox benchmark: the podman provider against bare `podman` commands, side by side in one run.

    .venv/bin/python bench/bench_sandbox.py [--rounds 20] [--parallel 20]

Prints (p50 over --rounds unless said otherwise):
- acquire from the warm pool (a pooled container handed to a run): target <= 10 ms;
- cold start with network none (create + start + exec agent ready), beside a bare
  `podman run --rm --network none BASE true` measured in the same run: target <= 1.2x;
- a command round trip over the persistent channel (`true`), beside `podman exec CONTAINER true`:
  target <= 2 ms;
- --parallel sandboxes started at once and torn down, with a leak check: the wall time;
- one-shot CLI commands (no long-lived hub), interleaved: `agentenv run hello --sandbox podman` beside
  `--sandbox process`, target <= 1.3x; with `--before DIR` (a worktree of an older commit with its own
  .venv) the same two of that build run interleaved with ours, so before and after share one run.
  The first podman command of each build starts its Podman service and is not counted (a one-shot command
  now reuses the service the one before left). The per-phase breakdown also says whether podman-py was
  imported (it should not be: sandboxes/podman/libpod.py makes sandboxes without it). `--one-shot-only` skips
  the provider measures above.
Needs Podman (`scripts/setup-podman.sh`). Nothing here is asserted by the tests.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
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
from sandboxes.podman.service import stop_project_service  # noqa: E402

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
    await asyncio.to_thread(provider.wait_removals)  # terminate hands removal to detached processes
    leaks = len(await asyncio.to_thread(provider.containers))
    return elapsed, leaks


def row(name: str, target: str, value: str, verdict: str = "") -> None:
    print(f"{name:<64} {target:>10} {value:>12}  {verdict}")


def _cli_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("AGENTENV_")}


def one_shot(agentenv: Path, project: Path, sandbox: str) -> float:
    """Wall time of one `agentenv run hello --sandbox SANDBOX` in `project` (it becomes its own hub)."""
    started = time.perf_counter()
    proc = subprocess.run([str(agentenv), "run", "hello", "--sandbox", sandbox], cwd=project, env=_cli_env(),
                          capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"`agentenv run hello --sandbox {sandbox}` failed in {project}:\n{proc.stdout}{proc.stderr}")
    return elapsed


def project_containers(project: Path) -> list[str]:
    label = hashlib.sha256(str((project / ".agentenv").resolve()).encode()).hexdigest()[:12]
    out = subprocess.run([podman_binary(), "ps", "-a", "--filter", f"label=agentenv.project={label}", "--format",
                          "{{.Names}}"], capture_output=True, text=True, env=podman_env()).stdout
    return out.split()


PHASES = r"""
import asyncio, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from agentenv_local.sandbox_api import SandboxSpec  # the CLI has it already: not counted
t = time.perf_counter()
from sandboxes.podman import PodmanSandboxProvider
out = {"import the podman provider": time.perf_counter() - t}

async def main():
    provider = PodmanSandboxProvider(Path(sys.argv[1]), {"pool_size": 0})
    t = time.perf_counter()
    await asyncio.to_thread(provider.api)
    out["find the running service (pid, socket, ping)"] = time.perf_counter() - t
    t = time.perf_counter()
    await asyncio.to_thread(provider.image_for, SandboxSpec(name="box"))
    out["the image exists (asked of the service)"] = time.perf_counter() - t
    t = time.perf_counter()
    sandbox = await provider.create(SandboxSpec(name="box"))
    out["create + start + exec agent ready"] = time.perf_counter() - t
    t = time.perf_counter()
    await sandbox.terminate()
    out["terminate (removal handed to a detached process)"] = time.perf_counter() - t
    provider.wait_removals()

asyncio.run(main())
for name, took in out.items():
    print(f"{took:.4f} {name}")
# podman-py is off this path (libpod.py): 1 here would say it crept back in
print(f"{int('podman' in sys.modules)} podman-py imported (1 = yes, 0 = no)")
"""


def one_shot_phases(project: Path, rounds: int) -> dict[str, float]:
    """Where a one-shot podman command's extra time goes: its podman phases, p50 over `rounds` processes."""
    taken: dict[str, list[float]] = {}
    for _ in range(rounds):
        proc = subprocess.run([sys.executable, "-c", PHASES, str(project / ".agentenv"), str(ROOT)],
                              capture_output=True, text=True, env=_cli_env())
        if proc.returncode != 0:
            raise SystemExit(f"the phase breakdown failed:\n{proc.stderr}")
        for line in proc.stdout.splitlines():
            took, name = line.split(" ", 1)
            taken.setdefault(name, []).append(float(took))
    return {name: statistics.median(values) for name, values in taken.items()}


def one_shot_commands(builds: dict[str, Path], rounds: int) -> None:
    """`run hello` podman vs process per build, every command interleaved with the others'."""
    root = Path(tempfile.mkdtemp(prefix="agentenv-bench-oneshot-"))
    projects = {(build, sandbox): root / f"{build}-{sandbox}" for build in builds for sandbox in ("process", "podman")}
    for folder in projects.values():
        folder.mkdir()
    times: dict[tuple[str, str], list[float]] = {key: [] for key in projects}
    try:
        for (build, sandbox), folder in projects.items():  # warm-up, not counted: images, the first service
            one_shot(builds[build], folder, sandbox)
        for _ in range(rounds):
            for (build, sandbox), folder in projects.items():
                times[(build, sandbox)].append(one_shot(builds[build], folder, sandbox))
        phases = one_shot_phases(projects[("after", "podman")], max(3, rounds // 2))
        leaks = {}
        deadline = time.monotonic() + 30
        for (build, sandbox), folder in projects.items():  # removals run detached: give them a moment
            while sandbox == "podman" and project_containers(folder) and time.monotonic() < deadline:
                time.sleep(0.1)
            leaks[(build, sandbox)] = len(project_containers(folder)) if sandbox == "podman" else 0
    finally:
        for (_build, sandbox), folder in projects.items():
            if sandbox == "podman":
                stop_project_service(folder / ".agentenv")
    print(f"\none-shot `agentenv run hello`, {rounds} interleaved rounds (p50 of each)")
    for build in builds:
        proc_p50 = statistics.median(times[(build, "process")])
        pod_p50 = statistics.median(times[(build, "podman")])
        ratio = pod_p50 / proc_p50
        row(f"{build}: --sandbox process", "-", f"{ms(proc_p50):.0f} ms")
        row(f"{build}: --sandbox podman (containers left after: {leaks[(build, 'podman')]})", "<= 1.3x",
            f"{ms(pod_p50):.0f} ms", f"{ratio:.2f}x {'PASS' if ratio <= 1.3 else 'MISS'}")
        # each round's podman command ran right after its process one: their ratio shares the machine's load
        paired = statistics.median(pod / proc for pod, proc in zip(times[(build, "podman")],
                                                                    times[(build, "process")], strict=True))
        row(f"{build}: podman / process of the same round (p50)", "<= 1.3x", f"{paired:.2f}x",
            "PASS" if paired <= 1.3 else "MISS")
    print("where a podman command's extra time goes (after; p50, each phase in a fresh process):")
    for name, took in phases.items():
        if name.startswith("podman-py imported"):
            row(f"  {name}", "0", f"{took:.0f}", "PASS" if took == 0 else "MISS")
        else:
            row(f"  {name}", "-", f"{ms(took):.0f} ms")
    if len(builds) > 1:
        ours, *others = builds
        for other in others:
            gain = statistics.median(times[(other, "podman")]) / statistics.median(times[(ours, "podman")])
            row(f"--sandbox podman, {other} / {ours}", "-", f"{gain:.2f}x")


async def main_async(args) -> None:
    builds = {"after": ROOT / ".venv" / "bin" / "agentenv"}
    if args.before:
        builds["before"] = Path(args.before).resolve() / ".venv" / "bin" / "agentenv"
    if args.one_shot_only:
        one_shot_commands(builds, args.one_shot_rounds)
        return
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
        row("terminate (hands the removal to a detached `podman rm`)", "-", f"{stop_p50:.1f} ms")
        row("bare `podman exec CONTAINER true`", "-", f"{exec_p50:.1f} ms")
        row("command round trip over the persistent channel (`true`)", "<= 2 ms", f"{trip_p50:.2f} ms",
            f"{exec_p50 / trip_p50:.0f}x faster than podman exec; {'PASS' if trip_p50 <= 2 else 'MISS'}")
        row(f"{args.parallel} sandboxes started in parallel, one command each, torn down", "no leaks",
            f"{wall:.2f} s", "PASS" if leaks == 0 else f"MISS: {leaks} left")
    finally:
        await pooled.aclose()
        await cold.aclose()
        for provider in (pooled, cold):
            provider.wait_removals()
            stop_project_service(provider.state_dir)
    one_shot_commands(builds, args.one_shot_rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--round-trips", type=int, default=500)
    parser.add_argument("--parallel", type=int, default=20)
    parser.add_argument("--one-shot-rounds", type=int, default=10)
    parser.add_argument("--before", help="a worktree of an older commit, with its own .venv, to run beside ours")
    parser.add_argument("--one-shot-only", action="store_true", help="only the one-shot CLI commands")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
