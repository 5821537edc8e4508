"""Env pool benchmark: `deploy_env` step time and `support` episode latency with and without env pools, side by side
in one run (issue 16 item 2).

    .venv/bin/python bench/bench_env_pool.py [--rounds 4] [--episodes 4] [--concurrency 1]

Two fresh temporary projects with the `support` bundle, each with its own hub (`agentenv up --detach`, stopped with
`agentenv down` at the end, whatever happens): one with the default `[envs.pool]`, one with `size = 0`. After a
warm-up episode in each, --rounds rounds alternate between them, each running `agentenv run support --k EPISODES
--concurrency C --json` (bench_episodes.run_batch), so both see the same machine load. Reported: the median
`deploy_env` step time, the median teardown-inclusive episode latency, episodes/s, and pooled / cold ratios.

Nothing here is asserted by the tests (DESIGN.md section 9). Exit 1 when an episode failed or a command broke.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_episodes import BUNDLE_SOURCES, Measure, _agentenv, run_batch  # noqa: E402 - after the path

MODES = {"pool": "", "no pool": "[envs.pool]\nsize = 0\n"}


def _project(workdir: Path, name: str, config: str) -> Path:
    project = workdir / name
    (project / ".agentenv").mkdir(parents=True)
    if config:
        (project / ".agentenv" / "config.toml").write_text(config)
    source = BUNDLE_SOURCES["support"]
    assert source is not None
    shutil.copytree(source, project / "support")
    return project


def _deploy_times(measures: list[Measure]) -> list[float]:
    return [t for m in measures for name, times in m.steps.items() if "(deploy_env)" in name for t in times]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=4, help="alternating rounds (each runs both modes once)")
    parser.add_argument("--episodes", type=int, default=4, help="episodes per batch (--k)")
    parser.add_argument("--concurrency", type=int, default=1)
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="agentenv-bench-env-pool-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTENV_")}
    env["AGENTENV_SANDBOX_DEFAULT"] = "process"
    projects = {mode: _project(workdir, mode.replace(" ", "-"), config) for mode, config in MODES.items()}
    measures: dict[str, list[Measure]] = {mode: [] for mode in MODES}
    try:
        for mode, project in projects.items():
            up = _agentenv(project, env, "up", "--detach", timeout=120)
            if up.returncode != 0:
                raise SystemExit(f"`agentenv up --detach` ({mode}) failed:\n{up.stderr}")
            run_batch(project, env, "support", 1, 1)  # warm-up: first imports, the bundle's first store
        for r in range(args.rounds):
            order = list(projects) if r % 2 == 0 else list(reversed(projects))
            for mode in order:
                print(f"round {r + 1}: {mode} ...", file=sys.stderr, flush=True)
                measures[mode].append(run_batch(projects[mode], env, "support", args.concurrency, args.episodes))
    finally:
        for project in projects.values():
            _agentenv(project, env, "down", timeout=120)
        shutil.rmtree(workdir, ignore_errors=True)

    rows = {}
    for mode, ms in measures.items():
        latencies = [lat for m in ms for lat in m.latencies]
        wall = sum(m.wall_s for m in ms)
        episodes = sum(m.episodes for m in ms)
        rows[mode] = (statistics.median(_deploy_times(ms)), statistics.median(latencies), episodes / wall,
                      sum(m.passed for m in ms), episodes)
    print(f"support at concurrency {args.concurrency}, {args.rounds} alternating rounds of {args.episodes} episodes")
    print(f"{'mode':<10} {'deploy_env p50':>15} {'episode p50':>12} {'episodes/s':>11} {'passed':>8}")
    for mode, (deploy, latency, rate, passed, total) in rows.items():
        print(f"{mode:<10} {deploy * 1000:>13.1f}ms {latency:>11.3f}s {rate:>11.2f} {passed:>4}/{total}")
    pool, cold = rows["pool"], rows["no pool"]
    print(f"pooled / cold: deploy_env {pool[0] / cold[0]:.2f}x, episode latency {pool[1] / cold[1]:.2f}x, "
          f"episodes/s {pool[2] / cold[2]:.2f}x")
    failures = [f for ms in measures.values() for m in ms for f in m.failures]
    for failure in failures[:5]:
        print(f"failed: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
