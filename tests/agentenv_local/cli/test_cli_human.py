"""`agentenv human` against a real run in the background: a person (the built-in human agent) is the user
side of a two-turn conversation with a scripted solver; `human pending` shows each question, `human reply`
answers it (by run id prefix, from --message and from stdin, then --end), `human show` prints the conversation,
and the run passes with the conversation in prompt_responses[...]["turns"]. Plus the clear errors: no such run,
a run without a human agent, nothing pending, a run that ended."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from kits.hub import (
    Background,
    agentenv_exe,
    clean_env,
    cli,
    run_id_of,
    show_json,
    step_status,
    wait_until,
    write_bundle,
)

SOLVER_PLAN = {"turns": [[{"reply": "Q1: what colour do you want for {input}?"}],
                         [{"reply": "Q2: {input} it is. What size?"}],
                         [{"reply": "done"}]]}
STEPS = [
    {"id": "solver", "type": "deploy_agent", "agent_name": "solver", "config": {"plan": SOLVER_PLAN}},
    {"id": "before", "type": "review", "label": "before", "poll_interval_seconds": 0.05},
    {"id": "person", "type": "deploy_agent", "a2a_agent_id": "human", "agent_name": "person"},
    {"id": "after", "type": "review", "label": "after", "poll_interval_seconds": 0.05},
    {"id": "talk", "type": "prompt_agent", "agent_name": "solver", "prompt": "a hat", "max_conversation_turns": 3,
     "user_agent_name": "person", "timeout_seconds": 60, "user_agent_timeout_seconds": 120},
]


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "proj"
    root.mkdir()
    return root


def pending(project: Path, run_id: str) -> list[dict]:
    return json.loads(cli(project, "human", "pending", run_id, "--json", check=True).stdout)


def wait_for_question(project: Path, run_id: str, starts: str) -> dict:
    return wait_until(lambda: next((q for q in pending(project, run_id) if q["text"].startswith(starts)), None),
                      60, interval=0.2, what=f"a question starting {starts!r}")


def wait_for_step(project: Path, run_id: str, step_id: str) -> None:
    wait_until(lambda: step_status(show_json(project, run_id), step_id) == "running", 60, interval=0.2,
               what=f"step {step_id} to run")


def test_a_person_answers_a_scripted_solver_through_agentenv_human(project):
    write_bundle(project, "shop", {"talk": STEPS})
    run = Background(project, "run", "./shop")
    try:
        run_id = run_id_of(run, project, "talk")
        # No human agent deployed yet: a clear error naming what to do.
        wait_for_step(project, run_id, "before")
        none = cli(project, "human", "pending", run_id)
        assert none.returncode == 1 and f"run {run_id} has no human agent" in none.stderr
        assert "a2a_agent_id" in none.stderr
        everywhere = cli(project, "human", "pending", check=True)
        assert "No question is waiting" in everywhere.stdout
        cli(project, "runs", "review", run_id, "--continue", check=True)

        # The human agent is up, but nobody has asked it anything yet.
        wait_for_step(project, run_id, "after")
        assert pending(project, run_id) == []
        early = cli(project, "human", "reply", run_id, "--message", "hello?")
        assert early.returncode == 1 and "nothing is pending" in early.stderr
        assert f"agentenv human pending {run_id}" in early.stderr
        unknown_agent = cli(project, "human", "reply", run_id, "--agent", "bob", "--message", "x")
        assert unknown_agent.returncode == 1 and "no human agent named 'bob'" in unknown_agent.stderr
        cli(project, "runs", "review", run_id, "--continue", check=True)

        # Turn 1: the solver's question reaches the person.
        first = wait_for_question(project, run_id, "Q1")
        assert first["text"] == "Q1: what colour do you want for a hat?"
        assert first["agent_name"] == "person" and first["run_id"] == run_id
        listed = cli(project, "human", "pending", check=True).stdout  # every live run
        assert "Q1: what colour do you want for a hat?" in listed and "agentenv human reply" in listed
        answered = cli(project, "human", "reply", run_id[:10], "--message", "blue", check=True)
        assert f"answered person's question (task {first['task_id']})" in answered.stdout

        # Turn 2: answered from stdin, ending the conversation.
        second = wait_for_question(project, run_id, "Q2")
        assert second["text"] == "Q2: blue it is. What size?"
        assert [(e["role"], e["text"]) for e in second["conversation"]] == [
            ("asker", "Q1: what colour do you want for a hat?"), ("human", "blue"),
            ("asker", "Q2: blue it is. What size?")]
        shown = cli(project, "human", "show", run_id, check=True).stdout
        assert "asked: Q1: what colour do you want for a hat?" in shown and "human: blue" in shown
        ended = subprocess.run([agentenv_exe(), "human", "reply", run_id, "--agent", "person", "--end"],
                               cwd=project, env=clean_env(), input="large\n", capture_output=True, text=True,
                               check=False, timeout=60)
        assert ended.returncode == 0, ended.stderr
        assert "ended the conversation" in ended.stdout
        run.expect(0, timeout=120)
    finally:
        run.stop()

    final = show_json(project, run_id)
    assert final["status"] == "passed"
    [response] = final["context"]["prompt_responses"]
    assert [(t["response"], t.get("user_reply"), t.get("ended_by_user")) for t in response["turns"]] == [
        ("Q1: what colour do you want for a hat?", "blue", None),
        ("Q2: blue it is. What size?", "large", True)]
    person = next(a for a in final["context"]["deployed_agents"] if a["agent_name"] == "person")
    assert person["a2a_agent_id"] == "human" and person["torn_down"] is True

    # The run is over: nobody waits, but what was said is still there.
    late = cli(project, "human", "reply", run_id, "--message", "x")
    assert late.returncode == 1 and f"run {run_id} is passed, not running" in late.stderr
    assert "agentenv human show" in late.stderr
    after = cli(project, "human", "show", run_id, check=True).stdout
    assert "its human agents are gone" in after and "reply:    large   [ended]" in after
    missing = cli(project, "human", "pending", "no-such-run")
    assert missing.returncode == 1 and "run 'no-such-run' not found" in missing.stderr
