"""Script benchmark: host Python scripts in a fork of the warm script worker beside a fresh interpreter
(`[scripts] warm = false`), side by side in one run (issue 16 item 3).

    .venv/bin/python bench/bench_scripts.py [--rounds 15] [--episodes 8]

Prints medians and warm/cold ratios of:
- one script alone (`run_script_on_host`, what both steps call), an `env_outcome_verifier`-style script that
  imports `mcp.Client` and returns one criterion, warm and cold interleaved, --rounds each;
- the `env_outcome_verifier` step and a whole `support` episode (examples/support): two temporary projects,
  each with a long-lived hub (`agentenv up --detach`), one with `[scripts] warm = false`; one warm-up episode
  each, then --episodes single `agentenv run support --json` calls interleaved between the two: the step's
  duration_s, the episode's latency (finished_at - started_at) and the command's wall time;
- after `agentenv down`, how many script workers are left (should be 0).

Nothing here is asserted by the tests (DESIGN.md section 9).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from agentenv_local import script_worker  # noqa: E402  (after the path set-up: this runs as a script)
from agentenv_local.steps.run_code import run_script_on_host  # noqa: E402

AGENTENV = ROOT / ".venv" / "bin" / "agentenv"
VERIFY = b'''
from mcp import Client

async def verify(mcp_url, run):
    return [{"id": "ok", "result": Client is not None, "description": "imports mcp"}]
'''


def script_alone(rounds: int) -> dict[str, list[float]]:
    payload = json.dumps({"mcp_url": "http://127.0.0.1:9/mcp", "run": {}}).encode()
    times: dict[str, list[float]] = {"warm": [], "cold": []}

    async def once(warm: bool) -> None:
        started = time.perf_counter()
        code, _out, err, _timed_out, raw = await run_script_on_host(
            "bench", {"verify.py": VERIFY}, "verify.py", "verify", payload, 120, style="verify", warm=warm,
            note=print)
        if raw is None or not json.loads(raw).get("ok"):
            raise SystemExit(f"the script failed (exit {code}): {err[-2000:]}")
        times["warm" if warm else "cold"].append(time.perf_counter() - started)

    async def main() -> None:
        await once(True)  # starts the worker: not counted
        times["warm"].clear()
        for _ in range(rounds):
            await once(True)
            await once(False)

    asyncio.run(main())
    script_worker.stop()
    return times


def agentenv(project: Path, env: dict[str, str], *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([str(AGENTENV), *args], cwd=project, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


def workers_of(project_env_marker: str) -> int:
    """Running script workers whose environment carries the marker (one per bench project)."""
    count = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if b"script_worker import serve" in cmdline and project_env_marker.encode() in environ:
            count += 1
    return count


def episodes(rounds: int) -> tuple[dict[str, dict[str, list[float]]], dict[str, int]]:
    workdir = Path(tempfile.mkdtemp(prefix="agentenv-bench-scripts-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTENV_")}
    env["AGENTENV_SANDBOX_DEFAULT"] = "process"
    env["TMPDIR"] = str(workdir)  # passed on to the hub's host processes: tells this run's workers apart
    projects = {}
    for mode in ("warm", "cold"):
        project = workdir / mode
        (project / ".agentenv").mkdir(parents=True)
        if mode == "cold":
            (project / ".agentenv" / "config.toml").write_text("[scripts]\nwarm = false\n")
        shutil.copytree(ROOT / "examples" / "support", project / "support")
        projects[mode] = project
    measures: dict[str, dict[str, list[float]]] = {m: {"verifier": [], "episode": [], "wall": []} for m in projects}
    left = {}
    try:
        for project in projects.values():
            up = agentenv(project, env, "up", "--detach", timeout=120)
            if up.returncode != 0:
                raise SystemExit(f"`agentenv up --detach` failed:\n{up.stderr}")
        for round_ in range(rounds + 1):
            for mode, project in projects.items():
                started = time.perf_counter()
                proc = agentenv(project, env, "run", "support", "--json")
                wall = time.perf_counter() - started
                try:
                    run = json.loads(proc.stdout)[0]
                except (ValueError, IndexError):
                    raise SystemExit(f"`agentenv run support` printed no JSON (exit {proc.returncode}):\n"
                                     f"{proc.stderr[-3000:]}")
                if run.get("status") != "passed":
                    raise SystemExit(f"{mode} episode: {run.get('status')}: {str(run.get('error'))[:500]}")
                if round_ == 0:
                    continue  # warm-up: the hub's first imports, the worker's start
                steps = [s for s in (run.get("steps") or {}).values() if s.get("type") == "env_outcome_verifier"]
                measures[mode]["verifier"].append(float(steps[0]["duration_s"]))
                measures[mode]["episode"].append(run["finished_at"] - run["started_at"])
                measures[mode]["wall"].append(wall)
    finally:
        for project in projects.values():
            agentenv(project, env, "down", timeout=120)
        time.sleep(1)
        left["after down"] = workers_of(str(workdir))
        shutil.rmtree(workdir, ignore_errors=True)
    return measures, left


def line(label: str, warm: list[float], cold: list[float]) -> str:
    w, c = statistics.median(warm), statistics.median(cold)
    return f"{label:<44} warm {w * 1000:8.1f} ms   cold {c * 1000:8.1f} ms   warm/cold {w / c:5.2f}x"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15, help="script-alone runs of each kind")
    parser.add_argument("--episodes", type=int, default=8, help="support episodes of each kind")
    args = parser.parse_args()
    alone = script_alone(args.rounds)
    measures, left = episodes(args.episodes)
    print(f"medians; script alone over {args.rounds} interleaved runs, episodes over {args.episodes} interleaved runs")
    print(line("verifier script alone (run_script_on_host)", alone["warm"], alone["cold"]))
    print(line("env_outcome_verifier step (support)", measures["warm"]["verifier"], measures["cold"]["verifier"]))
    print(line("support episode (finished - started)", measures["warm"]["episode"], measures["cold"]["episode"]))
    print(line("`agentenv run support` (CLI wall)", measures["warm"]["wall"], measures["cold"]["wall"]))
    print(f"script workers left after `agentenv down`: {left['after down']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
