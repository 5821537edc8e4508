"""Batch benchmark: a training step's batch of `support` episodes through one warm hub, per way of executing them
(issue 27 item 6).

    .venv/bin/python bench/bench_batch.py [--episodes 512] [--concurrency 64] [--modes hub,workers,workers-1core]
                                          [--bundle support] [--ray-nodes 0]

Each mode gets a fresh temporary project and its own hub (`agentenv up --detach`, `agentenv down` at the end),
one warm-up episode, then `agentenv run BUNDLE --k N --concurrency C --json` timed from the outside. The modes:

- `hub`: the hub executes every run itself (`[executor] kind = "local"`, one process);
- `workers`: runs execute in the hub's worker processes (`[executor] kind = "workers"`, one per core);
- `hub-1core`, `workers-1core`: the same pinned to one core (`taskset -c 0` on the hub and the command);
- `ray`: `--executor ray` on a cluster of `--ray-nodes` local nodes (`ray start`, one CPU each), started here.

For each it prints episodes passed, episodes/s, and CPU per episode read from /proc: the hub process's own, its
worker processes', and the whole machine's (the batch's command included). Then the ratios the issue names, all
from this one run: workers vs hub, 2 cores vs 1 (workers), ray vs workers. Nothing here is asserted by the tests.
Exit 1 when an episode failed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
AGENTENV = ROOT / ".venv" / "bin" / "agentenv"
RAY = ROOT / ".venv" / "bin" / "ray"
TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Result:
    mode: str
    episodes: int
    passed: int
    wall_s: float
    hub_cpu_s: float
    workers_cpu_s: float
    machine_cpu_s: float
    failures: list[str]

    @property
    def per_s(self) -> float:
        return self.episodes / self.wall_s if self.wall_s else 0.0

    def ms_per_episode(self, cpu_s: float) -> float:
        return 1000 * cpu_s / self.episodes if self.episodes else float("nan")


def _process_cpu_s(pid: int) -> float:
    """utime + stime of one process (its threads included), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        children = (task / "children").read_text().split()
        found.extend(int(c) for c in children)
    return found


def _worker_pids(hub_pid: int) -> list[int]:
    """The hub's worker processes: its children started as `agentenv_local.executors.worker_process`."""
    pids = []
    for child in _children(hub_pid):
        try:
            if b"agentenv_local.executors.worker_process" in Path(f"/proc/{child}/cmdline").read_bytes():
                pids.append(child)
        except OSError:
            continue
    return pids


def _machine_busy_s() -> float:
    """CPU seconds the whole machine spent busy (all cores), from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) / TICKS


def _agentenv(project: Path, env: dict[str, str], *args: str, pin: bool = False,
              timeout: float = 1800) -> subprocess.CompletedProcess:
    command = [str(AGENTENV), *args]
    if pin:
        command = ["taskset", "-c", "0", *command]
    return subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, timeout=timeout, check=False)


def _start_ray(temp_dir: Path, nodes: int) -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    address = f"127.0.0.1:{port}"
    for i in range(nodes):
        where = ["--head", f"--port={port}", "--include-dashboard=false", f"--temp-dir={temp_dir}"] if i == 0 \
            else [f"--address={address}"]
        proc = subprocess.run([str(RAY), "start", *where, "--node-ip-address=127.0.0.1", "--num-cpus=1",
                               "--disable-usage-stats"], env=env, capture_output=True, text=True, timeout=180)
        if proc.returncode != 0:
            raise SystemExit(f"`ray start` failed (pip install 'agentenv-local[ray]'?):\n{proc.stderr[-2000:]}")
    return address


def run_mode(mode: str, bundle_source: Path | None, bundle: str, episodes: int, concurrency: int,
             ray_address: str | None) -> Result:
    workdir = Path(tempfile.mkdtemp(prefix=f"agentenv-bench-batch-{mode}-"))
    project = workdir / "proj"
    (project / ".agentenv").mkdir(parents=True)
    target = bundle
    if bundle_source is not None:
        shutil.copytree(bundle_source, project / bundle)
        target = str(project / bundle)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTENV_")}
    env["AGENTENV_SANDBOX_DEFAULT"] = "process"
    pin = mode.endswith("-1core")
    kind = "workers" if mode.startswith("workers") else "local"
    (project / ".agentenv" / "config.toml").write_text(f'[executor]\nkind = "{kind}"\n')
    where = ["--executor", "ray", "--ray-address", ray_address] if mode == "ray" and ray_address else []
    try:
        up = _agentenv(project, env, "up", "--detach", pin=pin, timeout=120)
        if up.returncode != 0:
            raise SystemExit(f"`agentenv up --detach` failed ({mode}):\n{up.stderr}")
        hub_pid = int(json.loads((project / ".agentenv" / "hub.json").read_text())["pid"])
        warm = _agentenv(project, env, "run", target, "--k", "2", "--json", *where, pin=pin)
        if warm.returncode != 0:
            raise SystemExit(f"the warm-up run failed ({mode}):\n{warm.stdout[-2000:]}{warm.stderr[-2000:]}")
        workers = _worker_pids(hub_pid)
        hub0, workers0, machine0 = _process_cpu_s(hub_pid), sum(map(_process_cpu_s, workers)), _machine_busy_s()
        started = time.perf_counter()
        proc = _agentenv(project, env, "run", target, "--k", str(episodes), "--concurrency", str(concurrency),
                         "--json", *where, pin=pin)
        wall = time.perf_counter() - started
        hub1, machine1 = _process_cpu_s(hub_pid), _machine_busy_s()
        workers1 = sum(_process_cpu_s(pid) for pid in workers if Path(f"/proc/{pid}").exists())
        try:
            runs: list[dict[str, Any]] = json.loads(proc.stdout)
        except ValueError:
            raise SystemExit(f"`agentenv run` printed no JSON ({mode}, exit {proc.returncode}):\n"
                             f"{proc.stderr[-3000:]}") from None
        failures = [str(r.get("error") or r.get("status"))[:300] for r in runs if r.get("status") != "passed"]
        return Result(mode, len(runs), len(runs) - len(failures), wall, hub1 - hub0, workers1 - workers0,
                      machine1 - machine0, failures)
    finally:
        _agentenv(project, env, "down", timeout=120)
        shutil.rmtree(workdir, ignore_errors=True)


def report(results: list[Result]) -> None:
    print(f"\n{'mode':<15}{'passed':>10}{'wall s':>9}{'eps/s':>8}{'hub ms/ep':>11}{'workers ms/ep':>15}"
          f"{'machine ms/ep':>15}")
    for r in results:
        print(f"{r.mode:<15}{f'{r.passed}/{r.episodes}':>10}{r.wall_s:>9.1f}{r.per_s:>8.2f}"
              f"{r.ms_per_episode(r.hub_cpu_s):>11.1f}{r.ms_per_episode(r.workers_cpu_s):>15.1f}"
              f"{r.ms_per_episode(r.machine_cpu_s):>15.1f}")
        for failure in r.failures[:3]:
            print(f"    FAILED: {failure}")
    by_mode = {r.mode: r for r in results}

    def ratio(label: str, a: str, b: str) -> None:
        if a in by_mode and b in by_mode and by_mode[b].per_s:
            print(f"  {label}: {by_mode[a].per_s:.2f} / {by_mode[b].per_s:.2f} eps/s = "
                  f"{by_mode[a].per_s / by_mode[b].per_s:.2f}x")

    print("\nratios, side by side in this run:")
    ratio("workers vs the hub alone", "workers", "hub")
    ratio("2 cores vs 1 (workers)", "workers", "workers-1core")
    ratio("2 cores vs 1 (the hub alone)", "hub", "hub-1core")
    ratio("ray vs workers", "ray", "workers")
    ratio("ray vs the hub alone", "ray", "hub")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=512)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--modes", default="hub,workers,workers-1core",
                        help="comma-separated, of hub, workers, hub-1core, workers-1core, ray")
    parser.add_argument("--bundle", default="support", help="support (examples/support) or a built-in bundle")
    parser.add_argument("--ray-nodes", type=int, default=1, help="local Ray nodes for the ray mode")
    args = parser.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    known = {"hub", "workers", "hub-1core", "workers-1core", "ray"}
    if set(modes) - known:
        parser.error(f"unknown mode(s) {sorted(set(modes) - known)}; known: {', '.join(sorted(known))}")
    source = ROOT / "examples" / args.bundle if (ROOT / "examples" / args.bundle).is_dir() else None
    ray_dir = Path(tempfile.mkdtemp(prefix="agentenv-bench-ray-")) if "ray" in modes else None
    ray_address = _start_ray(ray_dir, args.ray_nodes) if ray_dir else None
    results = []
    try:
        for mode in modes:
            print(f"{mode}: {args.episodes} {args.bundle} episodes at concurrency {args.concurrency} ...",
                  file=sys.stderr, flush=True)
            results.append(run_mode(mode, source, args.bundle, args.episodes, args.concurrency, ray_address))
    finally:
        if ray_dir is not None:
            subprocess.run([str(RAY), "stop", "--force"], capture_output=True, timeout=120, check=False)
            shutil.rmtree(ray_dir, ignore_errors=True)
    report(results)
    return 0 if all(r.passed == r.episodes for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
