"""add_skills, deploy_agent skills from a bundle's skills/, register_agent_triggers, peer_agents and
snapshot_agent_state in real runs (`agentenv run`, a real hub). Agents the run attaches to (`a2a_url`) are
served by the test, so what they hold after the run is read back over A2A."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from kits.agents import serving_agent
from kits.hub import cli, runs_json, show_json, write_bundle

from agentenv_local.agents.client import A2AClient
from agentenv_local.agents.scripted import ScriptedAgent

GREET_MD = "---\nname: greet\ndescription: Greets people politely.\n---\n# Greet\nSay hello.\n"
REVIEW_MD = ("---\nname: code-review\ndescription: |\n  Reviews diffs.\nallowed-tools: Read Grep\n---\n"
             "# Review\nRead the diff.\n")


def bundle(project: Path, steps: list[dict], skills: dict[str, dict[str, str]] | None = None,
           name: str = "b") -> str:
    folder = write_bundle(project, name, {"t": steps})
    for skill, files in (skills or {}).items():
        for rel, text in files.items():
            path = folder / "skills" / skill / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    return f"./{name}"


def last_context(project: Path) -> dict:
    return show_json(project, runs_json(project)[0]["run_id"])["context"]


def ask(url: str, call):
    async def go():
        async with A2AClient(url) as client:
            return await call(client)
    return asyncio.run(go())


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "proj"
    root.mkdir()
    return root


def test_bundle_skills_on_deploy_agent_and_add_skills(project):
    with serving_agent(ScriptedAgent(plan=[{"reply": "ok"}])) as url:
        path = bundle(project, [
            {"id": "agent", "type": "deploy_agent", "agent_name": "solver", "a2a_url": url, "skills": ["greet"]},
            {"id": "more", "type": "add_skills", "agent_name": "solver", "skills": [
                "code-review", {"name": "inline-one", "description": "An inline skill.", "body": "Do X."}]},
        ], skills={"greet": {"SKILL.md": GREET_MD, "extra/notes.txt": "not delivered inline"},
                   "code-review": {"SKILL.md": REVIEW_MD}})
        out = cli(project, "run", path, check=True)
        assert "skills/greet: v1 (new)" in out.stdout + out.stderr
        listed = ask(url, lambda c: c.skill_list())
        card = ask(url, lambda c: c.card())
    assert listed == {"greet": {"description": "Greets people politely."},
                      "code-review": {"description": "Reviews diffs."},
                      "inline-one": {"description": "An inline skill."}}
    assert {s["id"] for s in card["skills"]} >= {"skill-greet", "skill-code-review", "skill-inline-one"}
    context = last_context(project)
    recorded = context["metadata"]["agent_skills"]["solver"]
    assert [(r["name"], r.get("version"), r.get("inline")) for r in recorded] == [
        ("code-review", 1, None), ("inline-one", None, True)]
    assert recorded[0]["id"].endswith("/b/code-review")
    [agent] = context["deployed_agents"]
    assert "skill-code-review" in {s["id"] for s in agent["a2a_card"]["skills"]}  # the card re-read after adding


def test_add_skills_refusals(project):
    path = bundle(project, [
        {"id": "agent", "type": "deploy_agent", "agent_name": "solver", "config": {"plan": [{"reply": "ok"}]}},
        {"id": "more", "type": "add_skills", "agent_name": "solver", "skills": ["greet", "greet"]},
    ], skills={"greet": {"SKILL.md": GREET_MD}})
    out = cli(project, "run", path)
    assert out.returncode == 1 and "skill(s) greet listed twice" in out.stdout
    bad = bundle(project, [
        {"id": "more", "type": "add_skills", "agent_name": "solver",
         "skills": [{"name": "Bad", "description": "", "skill_md": "x"}]},
    ], name="c")
    out = cli(project, "run", bad)
    text = out.stdout + out.stderr
    assert out.returncode != 0 and "skills[0].name: 'Bad' is not a valid skill name" in text
    assert "skills[0].description: required" in text
    write_bundle(project, "d", {"t": [
        {"id": "agent", "type": "deploy_agent", "agent_name": "solver", "config": {"plan": [{"reply": "ok"}]}},
        {"id": "more", "type": "add_skills", "agent_name": "solver", "skills": ["data"]}]},
        artifacts={"data": {"a.txt": "x"}})
    out = cli(project, "run", "./d")
    assert out.returncode != 0 and "skill 'data' is not in this bundle" in out.stdout + out.stderr


def test_register_agent_triggers_then_the_trigger_ends_the_conversation(project):
    triggers = [
        {"id": "nudge", "when": {"type": "step", "turn": 1}, "actions": [{"type": "say", "text": "any news?"}]},
        {"id": "stop", "when": {"type": "conversational", "where": {"message": {"regex": "(?i)done"}}},
         "actions": [{"type": "say", "text": "thanks, bye"}, {"type": "end"}]},
    ]
    with serving_agent(ScriptedAgent(plan=[{"reply": "unused"}])) as url:
        path = bundle(project, [
            {"id": "user", "type": "deploy_agent", "agent_name": "user", "a2a_url": url},
            {"id": "trig", "type": "register_agent_triggers", "agent_name": "user", "triggers": triggers},
        ])
        cli(project, "run", path, check=True)
        # the conversation the task runner drives: decide each turn with the solver's last message
        first = ask(url, lambda c: c.triggers_decide(1, "working on it", context_id="conv"))
        second = ask(url, lambda c: c.triggers_decide(2, "still working", context_id="conv"))
        third = ask(url, lambda c: c.triggers_decide(3, "All DONE.", context_id="conv"))
        state = ask(url, lambda c: c.triggers_state())
    assert first == {"parts": [{"kind": "text", "text": "any news?"}], "done": False, "fired": ["nudge"]}
    assert second == {"parts": [], "done": False, "fired": []}
    assert third == {"parts": [{"kind": "text", "text": "thanks, bye"}], "done": True, "fired": ["stop"]}
    assert {t["id"]: t["fired_in_contexts"] for t in state["triggers"]} == {"nudge": ["conv"], "stop": ["conv"]}
    assert last_context(project)["metadata"]["agent_triggers"]["user"]["added"] == ["nudge", "stop"]


def test_a_bad_trigger_spec_is_refused_before_the_run(project):
    path = bundle(project, [
        {"id": "user", "type": "deploy_agent", "agent_name": "user", "config": {"plan": [{"reply": "x"}]}},
        {"id": "trig", "type": "register_agent_triggers", "agent_name": "user",
         "triggers": [{"when": {"type": "step", "turn": 0}, "actions": [{"type": "end"}]}]},
    ])
    out = cli(project, "run", path)
    assert out.returncode != 0
    assert "triggers: triggers[0].when.turn must be a positive integer" in out.stdout + out.stderr


def test_peer_agents_between_two_scripted_agents(project):
    with serving_agent(ScriptedAgent(plan=[{"reply": "a"}])) as url_a:
        path = bundle(project, [
            {"id": "a", "type": "deploy_agent", "agent_name": "alpha", "a2a_url": url_a},
            {"id": "b", "type": "deploy_agent", "agent_name": "beta", "config": {"plan": [{"reply": "b"}]}},
            {"id": "c", "type": "deploy_agent", "agent_name": "gamma", "config": {"plan": [{"reply": "c"}]}},
            {"id": "peer", "type": "peer_agents", "peerings": [
                {"source_agent_name": "alpha", "peer_agent_names": ["beta", "gamma"]},
                {"source_agent_name": "beta", "peer_agent_names": ["alpha"]}]},
        ])
        cli(project, "run", path, check=True)
        peers = ask(url_a, lambda c: c.peer_agents_list())
    context = last_context(project)
    assert context["metadata"]["agent_peerings"] == {"alpha": ["beta", "gamma"], "beta": ["alpha"]}
    urls = {a["agent_name"]: a["a2a_url"] for a in context["deployed_agents"]}
    assert peers == [{"name": "beta", "url": urls["beta"], "description": peers[0]["description"]},
                     {"name": "gamma", "url": urls["gamma"], "description": peers[1]["description"]}]
    assert all(p["description"] for p in peers)


def test_peer_agents_refusals(project):
    path = bundle(project, [{"id": "peer", "type": "peer_agents", "peerings": [
        {"source_agent_name": "a", "peer_agent_names": ["a", "b", "b"]}]}])
    out = cli(project, "run", path)
    text = out.stdout + out.stderr
    assert out.returncode != 0 and "an agent cannot be its own peer ('a')" in text and "b listed twice" in text
    missing = bundle(project, [
        {"id": "a", "type": "deploy_agent", "agent_name": "a", "config": {"plan": [{"reply": "a"}]}},
        {"id": "peer", "type": "peer_agents", "peerings": [{"source_agent_name": "a", "peer_agent_names": ["x"]}]},
    ], name="c")
    out = cli(project, "run", missing)
    assert out.returncode == 1 and "no agent named 'x' is deployed in this run (deployed: a)" in out.stdout


class NoSnapshotAgent(ScriptedAgent):
    """A scripted agent without snapshot/v1 (the built-in one offers it)."""

    def card_extensions(self) -> list[dict]:
        return []


def test_snapshot_agent_state_says_the_agent_does_not_support_it(project):
    with serving_agent(NoSnapshotAgent(plan=[{"reply": "a"}])) as url:
        path = bundle(project, [
            {"id": "a", "type": "deploy_agent", "agent_name": "solver", "a2a_url": url},
            {"id": "p", "type": "prompt_agent", "agent_name": "solver", "prompt": "hi"},
            {"id": "snap", "type": "snapshot_agent_state", "agent_name": "solver", "artifact_id": "solver-state"},
        ])
        out = cli(project, "run", path)
    assert out.returncode == 1
    assert "agent 'solver' does not support snapshot/v1" in out.stdout
    assert json.dumps(last_context(project)["deployed_agents"][0]["torn_down"]) == "true"
