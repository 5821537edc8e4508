"""The rollouts API against a real hub: episodes stream as runs finish, grouped per prompt for a GRPO-style
update, the sync wrapper, stopping early cancels what is still going, and bad arguments fail before anything runs."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

import agentenv_local
from agentenv_local.errors import ValidationError

ROOT = Path(__file__).resolve().parents[3]
SUPPORT = ROOT / "examples" / "support"


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    for name in [n for n in os.environ if n.startswith("AGENTENV_") and n != "AGENTENV_SANDBOX_DEFAULT"]:
        monkeypatch.delenv(name)
    return root


def test_async_rollouts_yield_each_episode_with_its_reward(project):
    async def collect() -> list[dict]:
        return [e async for e in agentenv_local.rollouts(SUPPORT, k=3, concurrency=2, sandbox="process",
                                                         project=project)]

    episodes = asyncio.run(collect())
    assert len(episodes) == 3 and len({e["run_id"] for e in episodes}) == 3
    for episode in episodes:
        assert episode["status"] == "passed" and episode["score"] == 1.0
        assert episode["messages"][0]["role"] == "user" and episode["messages"][-1]["role"] == "assistant"
        assert {c["verifier"] for c in episode["criteria"]} == {"grade", "outcome"}


def test_sync_rollouts_over_stored_tasks_and_seeds(project):
    first = next(iter(agentenv_local.rollouts_sync(SUPPORT, sandbox="process", project=project)))
    ref = f"{first['task_id']}:{first['task_version']}"
    episodes = list(agentenv_local.rollouts_sync(task_ids=[ref], seeds=[{"n": "1"}, {"n": "2"}], k=2,
                                                 sandbox="process", concurrency=4, project=project))
    groups: dict[str, list[float]] = {}
    for episode in episodes:
        groups.setdefault(json.dumps(episode["seed"], sort_keys=True), []).append(episode["score"])
    assert sorted(groups) == ['{"n": "1"}', '{"n": "2"}'] and all(len(s) == 2 for s in groups.values())


def test_breaking_out_cancels_the_runs_still_going(project):
    seen = []
    for episode in agentenv_local.rollouts_sync(SUPPORT, k=4, concurrency=1, sandbox="process", project=project):
        seen.append(episode)
        break  # the other three are cancelled (or never started)
    from agentenv_local.hub import connect

    session = connect(project, defer_linger=False)
    try:
        runs = session.store.runs.list()
    finally:
        session.close()
    statuses = sorted(r["status"] for r in runs)
    assert len(seen) == 1 and statuses.count("passed") >= 1
    assert all(s in ("passed", "cancelled") for s in statuses) and len(runs) <= 2  # at most one more was started


@pytest.mark.parametrize(("args", "fields", "message"), [
    ((), {}, "need a bundle or task ids"),
    ((SUPPORT,), {"task_ids": ["x"]}, "need a bundle or task ids"),
    ((SUPPORT,), {"k": 0}, "at least 1"),
])
def test_bad_arguments_fail_before_anything_runs(project, args, fields, message):
    with pytest.raises(ValidationError, match=message):
        next(iter(agentenv_local.rollouts_sync(*args, project=project, **fields)))
    assert not (project / ".agentenv").exists()


def test_unknown_tasks_are_named(project):
    with pytest.raises(ValidationError, match="no stored task"):
        list(agentenv_local.rollouts_sync(task_ids=["@local/none/such"], project=project))
    with pytest.raises(ValidationError, match="no task named nope"):
        list(agentenv_local.rollouts_sync(SUPPORT, tasks=["nope"], project=project))
