"""Episode benchmark: latency, episodes/s and where an episode's time goes, for `hello` and `support` at several
concurrencies, all in one long-lived hub (issue 16 item 7).

    .venv/bin/python bench/bench_episodes.py [--concurrency 1,10,50] [--episodes-per-slot 2] [--bundles hello,support]
                                             [--sandbox process] [--with-reference [--reference-runs 8]]

One fresh temporary project, a hub started with `agentenv up --detach` (stopped with `agentenv down` at the end,
whatever happens). For each bundle and each concurrency C it runs `agentenv run BUNDLE --k N --concurrency C --json`
with N = max(C * --episodes-per-slot, 4) (at least 4, so that C=1 has a median) and reports: episodes passed out of N,
episodes/s (N over the command's wall time), the median and p90 episode latency (a run's finished_at - started_at)
and each step's median duration (the step breakdown). Beside them, the median of single `agentenv run hello` calls
in the same hub, the unit the issue's goals are ratios of.

--executor ray also starts a two-node Ray cluster on 127.0.0.1 (`ray start`, stopped at the end) and runs each
bundle and concurrency locally and on Ray, alternately, printing Ray's episodes/s beside the local ones and their
ratio (the cluster's overhead per episode).

--baseline ROOT also runs every batch with another checkout's `ROOT/.venv/bin/agentenv` (e.g. the commit a change
started from, with its own venv), in its own project and hub, alternately with this one (which goes first flips each
batch), and prints after/before ratios side by side.

--capture-off-too runs every batch the same way (its own project and hub, alternately) with this checkout and the
runner's end-of-episode capture of each env's changelog and /state off: "before" is the capture off.

--with-reference also times the reference's `agent-env run hello` (.venv-ref) --reference-runs times, one after
another and each in a fresh XDG_STATE_HOME (it has no hub and no --k), and prints its runs/s beside ours.

Nothing here is asserted by the tests (DESIGN.md section 9). Exit 1 when an episode failed or a command broke.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
AGENTENV = ROOT / ".venv" / "bin" / "agentenv"
REF_AGENT_ENV = ROOT / ".venv-ref" / "bin" / "agent-env"
RAY = ROOT / ".venv" / "bin" / "ray"
BUNDLE_SOURCES = {"hello": None, "support": ROOT / "examples" / "support"}  # None: the built-in bundle


@dataclass
class Measure:
    bundle: str
    concurrency: int
    executor: str
    episodes: int
    passed: int
    wall_s: float
    latencies: list[float] = field(default_factory=list)
    steps: dict[str, list[float]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    @property
    def per_s(self) -> float:
        return self.episodes / self.wall_s if self.wall_s else 0.0


def _quantile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _agentenv(project: Path, env: dict[str, str], *args: str, timeout: float = 1800,
              agentenv: Path = AGENTENV) -> subprocess.CompletedProcess:
    return subprocess.run([str(agentenv), *args], cwd=project, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


def run_batch(project: Path, env: dict[str, str], bundle: str, concurrency: int, episodes: int,
              ray_address: str | None = None, agentenv: Path = AGENTENV, label: str = "local") -> Measure:
    target = bundle if BUNDLE_SOURCES[bundle] is None else str(project / bundle)
    where = ["--executor", "ray", "--ray-address", ray_address] if ray_address else []
    started = time.perf_counter()
    proc = _agentenv(project, env, "run", target, "--k", str(episodes), "--concurrency", str(concurrency), "--json",
                     *where, agentenv=agentenv)
    wall = time.perf_counter() - started
    try:
        runs: list[dict[str, Any]] = json.loads(proc.stdout)
    except ValueError:
        raise SystemExit(f"`agentenv run {bundle}` printed no JSON (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    measure = Measure(bundle, concurrency, "ray" if ray_address else label, len(runs),
                      sum(r.get("status") == "passed" for r in runs), wall)
    steps: dict[str, list[float]] = defaultdict(list)
    for run in runs:
        if run.get("started_at") and run.get("finished_at"):
            measure.latencies.append(run["finished_at"] - run["started_at"])
        for name, step in (run.get("steps") or {}).items():
            if step.get("duration_s") is not None:
                steps[f"{name} ({step.get('type')})"].append(float(step["duration_s"]))
        if run.get("status") != "passed":
            measure.failures.append(str(run.get("error") or run.get("status"))[:300])
    measure.steps = dict(steps)
    return measure


def start_ray_cluster(temp_dir: Path) -> str:
    """A head and a second node on 127.0.0.1 (one CPU each, as the tests' cluster); its address."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    address = f"127.0.0.1:{port}"
    for args in (["--head", f"--port={port}", "--include-dashboard=false", f"--temp-dir={temp_dir}"],
                 [f"--address={address}"]):
        proc = subprocess.run([str(RAY), "start", *args, "--node-ip-address=127.0.0.1", "--num-cpus=1",
                               "--disable-usage-stats"], env=env, capture_output=True, text=True, timeout=180)
        if proc.returncode != 0:
            raise SystemExit(f"`ray start` failed (pip install 'agentenv-local[ray]'?):\n{proc.stderr[-2000:]}")
    return address


def single_hello(project: Path, env: dict[str, str], reps: int, agentenv: Path = AGENTENV) -> list[float]:
    times = []
    for _ in range(reps):
        started = time.perf_counter()
        proc = _agentenv(project, env, "run", "hello", agentenv=agentenv)
        times.append(time.perf_counter() - started)
        if proc.returncode != 0:
            raise SystemExit(f"`agentenv run hello` failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return times


def reference_hello(runs: int) -> list[float] | str:
    if not REF_AGENT_ENV.exists():
        return f"no reference CLI at {REF_AGENT_ENV} (scripts/setup.sh --test installs it)"
    times = []
    for _ in range(runs):
        state = tempfile.mkdtemp(prefix="agentenv-bench-ref-")
        try:
            started = time.perf_counter()
            proc = subprocess.run([str(REF_AGENT_ENV), "run", "hello"], cwd=state, capture_output=True, text=True,
                                  env={**os.environ, "XDG_STATE_HOME": state}, timeout=300, check=False)
            times.append(time.perf_counter() - started)
            if proc.returncode != 0:
                return f"`agent-env run hello` failed: {(proc.stderr or proc.stdout)[-500:]}"
        finally:
            shutil.rmtree(state, ignore_errors=True)
    return times


def report(measures: list[Measure], hello_s: list[float], reference: list[float] | str | None,
           before_hello_s: list[float] | None = None) -> None:
    hello_p50 = statistics.median(hello_s)
    print(f"\n`agentenv run hello` in the same hub, one at a time: p50 {hello_p50 * 1000:.0f} ms over {len(hello_s)}")
    if before_hello_s:
        print(f"  the baseline's: p50 {statistics.median(before_hello_s) * 1000:.0f} ms")
    print(f"\n{'bundle':<9}{'where':>6}{'conc':>5}{'passed':>10}{'eps/s':>8}{'p50 s':>8}{'p90 s':>8}{'p50/hello':>11}")
    for m in measures:
        p50 = _quantile(m.latencies, 0.5)
        print(f"{m.bundle:<9}{m.executor:>6}{m.concurrency:>5}{f'{m.passed}/{m.episodes}':>10}{m.per_s:>8.2f}"
              f"{p50:>8.2f}{_quantile(m.latencies, 0.9):>8.2f}{p50 / hello_p50:>10.1f}x")
    local = {(m.bundle, m.concurrency): m for m in measures if m.executor == "local"}
    ray = [m for m in measures if m.executor == "ray" and (m.bundle, m.concurrency) in local]
    if ray:
        print("\nRay vs local, side by side (episodes/s; below 1: the cluster's overhead per episode):")
        for m in ray:
            base = local[(m.bundle, m.concurrency)]
            print(f"  {m.bundle} at {m.concurrency}: ray {m.per_s:.2f} / local {base.per_s:.2f} = "
                  f"{m.per_s / base.per_s if base.per_s else float('nan'):.2f}x")
    before = {(m.bundle, m.concurrency): m for m in measures if m.executor == "before"}
    if before:
        print("\nthis checkout vs the baseline, side by side (eps/s after/before; p50 latency before/after):")
        for (bundle, concurrency), b in before.items():
            a = local[(bundle, concurrency)]
            print(f"  {bundle} at {concurrency}: {a.per_s:.2f} / {b.per_s:.2f} eps/s = "
                  f"{a.per_s / b.per_s if b.per_s else float('nan'):.2f}x; p50 "
                  f"{_quantile(b.latencies, 0.5) / _quantile(a.latencies, 0.5):.2f}x")
    for m in measures:
        print(f"\nsteps of {m.bundle} ({m.executor}) at concurrency {m.concurrency} (median s over {m.episodes} "
              "episodes):")
        for name, values in sorted(m.steps.items(), key=lambda kv: -statistics.median(kv[1])):
            print(f"  {statistics.median(values):7.3f}  {name}")
        for failure in m.failures[:5]:
            print(f"  FAILED: {failure}")
    if reference is not None:
        print("\nthe reference's `agent-env run hello`, one-shot, one after another:")
        if isinstance(reference, str):
            print(f"  not measured: {reference}")
        else:
            ref_p50 = statistics.median(reference)
            print(f"  p50 {ref_p50 * 1000:.0f} ms ({1 / ref_p50:.2f} runs/s); ours in the hub p50 "
                  f"{hello_p50 * 1000:.0f} ms ({1 / hello_p50:.2f} runs/s): ours {ref_p50 / hello_p50:.1f}x faster")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrency", default="1,10,50", help="comma-separated concurrencies")
    parser.add_argument("--episodes-per-slot", type=int, default=2, help="episodes per concurrency slot")
    parser.add_argument("--bundles", default="hello,support", help=f"of {', '.join(BUNDLE_SOURCES)}")
    parser.add_argument("--sandbox", default="process", help="AGENTENV_SANDBOX_DEFAULT for the hub")
    parser.add_argument("--hello-reps", type=int, default=5)
    parser.add_argument("--executor", choices=["local", "ray"], default="local",
                        help="ray: also run every batch on a two-node Ray cluster started here, side by side")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="another checkout's root (its .venv/bin/agentenv): each batch runs there too, alternately")
    parser.add_argument("--capture-off-too", action="store_true",
                        help="each batch also runs in a second hub with the end-of-episode capture of each env's "
                             "changelog and /state off (AGENTENV_CAPTURE_ENV_STATE=0), alternately: its cost")
    parser.add_argument("--with-reference", action="store_true")
    parser.add_argument("--reference-runs", type=int, default=8)
    args = parser.parse_args()
    bundles = [b.strip() for b in args.bundles.split(",") if b.strip()]
    unknown = [b for b in bundles if b not in BUNDLE_SOURCES]
    if unknown:
        parser.error(f"unknown bundle(s) {unknown}; known: {', '.join(BUNDLE_SOURCES)}")
    concurrencies = [int(c) for c in args.concurrency.split(",") if c.strip()]

    workdir = Path(tempfile.mkdtemp(prefix="agentenv-bench-episodes-"))
    project = workdir / "proj"
    before_project = workdir / "proj-before"
    before_agentenv = args.baseline / ".venv" / "bin" / "agentenv" if args.baseline else None
    if args.capture_off_too:  # the "before" side: this checkout, its capture off
        before_agentenv = AGENTENV
    for folder in (project, before_project) if before_agentenv else (project,):
        (folder / ".agentenv").mkdir(parents=True)
        for name in bundles:
            source = BUNDLE_SOURCES[name]
            if source is not None:  # the same bundle both sides: the same work
                shutil.copytree(source, folder / name)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTENV_")}
    env["AGENTENV_SANDBOX_DEFAULT"] = args.sandbox
    before_env = {**env, "AGENTENV_CAPTURE_ENV_STATE": "0"} if args.capture_off_too else env
    measures: list[Measure] = []
    before_hello_s: list[float] | None = None
    cluster = start_ray_cluster(workdir / "ray") if args.executor == "ray" else None
    try:
        up = _agentenv(project, env, "up", "--detach", timeout=120)
        if up.returncode != 0:
            raise SystemExit(f"`agentenv up --detach` failed:\n{up.stderr}")
        if before_agentenv is not None:
            up = _agentenv(before_project, before_env, "up", "--detach", timeout=120, agentenv=before_agentenv)
            if up.returncode != 0:
                raise SystemExit(f"the baseline's `agentenv up --detach` failed:\n{up.stderr}")
        for name in bundles:  # one warm-up episode each: first imports and the bundle's first store
            run_batch(project, env, name, 1, 1)
            if before_agentenv is not None:
                run_batch(before_project, before_env, name, 1, 1, agentenv=before_agentenv)
        hello_s = single_hello(project, env, args.hello_reps)
        if before_agentenv is not None:
            before_hello_s = single_hello(before_project, before_env, args.hello_reps, agentenv=before_agentenv)
        flip = False
        for name in bundles:
            for concurrency in concurrencies:
                episodes = max(concurrency * args.episodes_per_slot, 4)
                print(f"{name}: {episodes} episodes at concurrency {concurrency} ...", file=sys.stderr, flush=True)
                if before_agentenv is not None and not flip:
                    measures.append(run_batch(before_project, before_env, name, concurrency, episodes,
                                              agentenv=before_agentenv, label="before"))
                measures.append(run_batch(project, env, name, concurrency, episodes))
                if before_agentenv is not None and flip:
                    measures.append(run_batch(before_project, before_env, name, concurrency, episodes,
                                              agentenv=before_agentenv, label="before"))
                flip = not flip
                if cluster is not None:
                    measures.append(run_batch(project, env, name, concurrency, episodes, ray_address=cluster))
    finally:
        _agentenv(project, env, "down", timeout=120)
        if before_agentenv is not None:
            _agentenv(before_project, before_env, "down", timeout=120, agentenv=before_agentenv)
        if cluster is not None:
            subprocess.run([str(RAY), "stop", "--force"], capture_output=True, timeout=120, check=False)
        shutil.rmtree(workdir, ignore_errors=True)
    reference = reference_hello(args.reference_runs) if args.with_reference else None
    report(measures, hello_s, reference, before_hello_s)
    return 0 if all(m.passed == m.episodes for m in measures) else 1


if __name__ == "__main__":
    sys.exit(main())
