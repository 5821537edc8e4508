"""Group-relative advantages from rollouts, the way GRPO-style trainers consume episodes (no GPU needed).

    .venv/bin/python examples/rollouts/grpo_advantages.py [BUNDLE] [--k 4] [--concurrency 4]

Every prompt (a task at a version with one seed row) is rolled out k times. Each episode's advantage is its
reward minus the mean reward of its group, divided by the group's standard deviation (left unscaled when the
group's rewards are all equal: then every advantage is 0 and the group teaches nothing). A trainer would now
weight each episode's `messages` (the tokens its policy produced) by that advantage; here they are printed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
from collections import defaultdict
from pathlib import Path

import agentenv_local

HERE = Path(__file__).resolve().parent


def prompt_key(episode: dict) -> str:
    """The group an episode belongs to: the same task version and the same seed row."""
    return f"{episode['task_id']}:v{episode['task_version']} seed={json.dumps(episode['seed'], sort_keys=True)}"


def group_advantages(rewards: list[float]) -> list[float]:
    mean = statistics.fmean(rewards)
    spread = statistics.pstdev(rewards)
    return [(r - mean) / spread if spread > 0 else 0.0 for r in rewards]


async def main(bundle: str, k: int, concurrency: int) -> list[dict]:
    groups: dict[str, list[dict]] = defaultdict(list)
    async for episode in agentenv_local.rollouts(bundle, k=k, concurrency=concurrency, sandbox="process"):
        groups[prompt_key(episode)].append(episode)
        print(f"finished {episode['run_id']}: reward {episode['score']}, {len(episode['messages'])} messages")
    rows = []
    for key, episodes in groups.items():
        rewards = [float(e["score"] or 0.0) for e in episodes]
        for episode, advantage in zip(episodes, group_advantages(rewards), strict=True):
            rows.append({"group": key, "run_id": episode["run_id"], "reward": episode["score"],
                         "advantage": round(advantage, 4), "assistant_messages":
                         sum(1 for m in episode["messages"] if m["role"] == "assistant")})
    for row in rows:
        print(json.dumps(row))
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundle", nargs="?", default=str(HERE.parent / "support"))
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    asyncio.run(main(args.bundle, args.k, args.concurrency))
