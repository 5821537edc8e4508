"""Agent benchmark: A2A round trips of prompt_agent's kind, and many runs with an env and an agent at once.

    .venv/bin/python bench/bench_agents.py [--rounds 200] [--runs 50] [--concurrency 25]

Measured side by side in one run:
- in-hub: send a prompt to the scripted agent served on this process's loop and poll the task to
  completion (what prompt_agent does): target p50 < 10 ms;
- subprocess: the same against a `python -m agentenv_local.agents scripted` subprocess, beside a bare
  httpx POST round trip to the same server: target <= 1.5x;
- --runs runs of a task (deploy the echo env, deploy a scripted agent that calls it, prompt it, a
  deterministic verifier) with `agentenv run --k N --concurrency C`: no errors; runs/s.
Nothing here is asserted by the tests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
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

PLAN = {"plan": [{"reply": "pong {input}"}]}


async def prompt_p50(url: str, rounds: int) -> float:
    from agentenv_local.agents.client import A2AClient

    async with A2AClient(url) as client:
        await client.agent_config_set(**PLAN)
        for _ in range(10):
            await client.prompt("warm")
        times = []
        for i in range(rounds):
            started = time.perf_counter()
            task = await client.prompt(f"ping {i}", poll_interval=0.001)
            times.append(time.perf_counter() - started)
            assert task.text == f"pong ping {i}", task
    return statistics.median(times) * 1000


async def bare_post_p50(url: str, rounds: int) -> float:
    import httpx2

    async with httpx2.AsyncClient() as http:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "none"}}
        for _ in range(10):
            await http.post(url + "/a2a", json=body)
        times = []
        for _ in range(rounds):
            started = time.perf_counter()
            await http.post(url + "/a2a", json=body)
            times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


async def in_hub(rounds: int) -> float:
    from agentenv_local.hosting.agents.hosted import resolve_spec, serve_in_hub

    hosted = await serve_in_hub(resolve_spec("scripted"), {})
    try:
        return await prompt_p50(hosted.url, rounds)
    finally:
        await hosted.stop()


async def subprocess_agent(rounds: int) -> tuple[float, float]:
    """Prompt round trips and bare POSTs to the same subprocess agent, interleaved call by call so that a
    change in the machine's load affects both the same way."""
    import httpx2

    from agentenv_local.agents.client import A2AClient
    from agentenv_local.hosting.agents.hosted import resolve_spec, spawn

    hosted = await spawn(resolve_spec("scripted"), {})
    body = {"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "none"}}
    try:
        async with A2AClient(hosted.url) as client, httpx2.AsyncClient() as http:
            await client.agent_config_set(**PLAN)
            for _ in range(20):
                await client.prompt("warm")
                await http.post(hosted.url + "/a2a", json=body)
            prompts, bares = [], []
            for i in range(rounds):
                started = time.perf_counter()
                await http.post(hosted.url + "/a2a", json=body)
                bares.append(time.perf_counter() - started)
                started = time.perf_counter()
                task = await client.prompt(f"ping {i}", poll_interval=0.001)
                prompts.append(time.perf_counter() - started)
                assert task.text == f"pong ping {i}", task
        return statistics.median(prompts) * 1000, statistics.median(bares) * 1000
    finally:
        await hosted.stop()


def many_runs(runs: int, concurrency: int) -> tuple[float, int, int]:
    project = Path(tempfile.mkdtemp(prefix="agentenv-bench-agents-"))
    bundle = project / "b"
    (bundle / "tasks").mkdir(parents=True)
    (bundle / "envs" / "echo").mkdir(parents=True)
    shutil.copy(ROOT / "examples" / "envs" / "echo" / "server.py", bundle / "envs" / "echo" / "server.py")
    (bundle / "envs" / "echo" / "env.toml").write_text('module = "server.py:Echo"\n')
    steps = [
        {"id": "env", "type": "deploy_env", "env_id": "echo"},
        {"id": "agent", "type": "deploy_agent", "agent_name": "solver", "env_ids": ["echo"], "role": "support",
         "config": {"plan": [{"tool": "echo", "args": {"text": "hi {input}"}, "save_as": "e"},
                             {"reply": "echoed: {e}"}]}},
        {"id": "ask", "type": "prompt_agent", "agent_name": "solver", "prompt": "there"},
        {"id": "check", "type": "agent_prompt_response_verifier", "prompt_id": "ask",
         "criteria": [{"type": "response_contains", "needles": ["hi there"]}]},
    ]
    (bundle / "tasks" / "echo.json").write_text(json.dumps(steps))
    exe = str(Path(sys.executable).parent / "agentenv")
    started = time.perf_counter()
    proc = subprocess.run([exe, "run", "./b", "--k", str(runs), "--concurrency", str(concurrency), "--json"],
                          cwd=project, capture_output=True, text=True, timeout=1800, check=False)
    elapsed = time.perf_counter() - started
    try:
        rows = json.loads(proc.stdout)
        rows = rows.get("runs", rows) if isinstance(rows, dict) else rows
        passed = sum(1 for r in rows if r.get("status") == "passed")
    except ValueError:
        passed = 0
    shutil.rmtree(project, ignore_errors=True)
    return elapsed, passed, proc.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--concurrency", type=int, default=25)
    args = parser.parse_args()
    hub_p50 = asyncio.run(in_hub(args.rounds))
    sub_p50, bare_p50 = asyncio.run(subprocess_agent(args.rounds))
    elapsed, passed, code = many_runs(args.runs, args.concurrency)
    print(f"{'measure':<66} {'target':>9} {'p50':>10}  result")
    print(f"{'prompt -> completed, scripted agent in the hub (send + poll)':<66} {'< 10 ms':>9} {hub_p50:>8.2f}ms  "
          f"{'PASS' if hub_p50 < 10 else 'MISS'}")
    print(f"{'bare httpx POST round trip to the subprocess agent':<66} {'-':>9} {bare_p50:>8.2f}ms")
    ratio = sub_p50 / bare_p50
    print(f"{'prompt -> completed, scripted agent in a subprocess':<66} {'<= 1.5x':>9} {sub_p50:>8.2f}ms  "
          f"{ratio:.2f}x {'PASS' if ratio <= 1.5 else 'MISS'}")
    ok = passed == args.runs and code == 0
    print(f"{f'{args.runs} runs (env + scripted agent + verifier), --concurrency {args.concurrency}':<66} "
          f"{'no errors':>9} {args.runs / elapsed:>6.2f} runs/s  {passed}/{args.runs} passed, "
          f"{elapsed:.1f} s {'PASS' if ok else 'MISS'}")


if __name__ == "__main__":
    main()
