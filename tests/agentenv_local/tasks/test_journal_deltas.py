"""The step journal holds each step's changes to the state, not the state again (tasks/journal.py)."""

from __future__ import annotations

from agentenv_local.tasks.journal import StateTracker, journal_state


def test_each_entry_holds_what_changed_and_the_journal_rebuilds_the_state():
    state = {"deployed_envs": [], "prompt_responses": [], "metadata": {"seed": {}, "verifications": {}}}
    tracker = StateTracker(state)
    entries = [{"step_id": "__seed__", "body": {"state": {**state}}}]
    state["deployed_envs"].append({"env_id": "office"})
    entries.append({"step_id": "deploy", "body": tracker.changes(state)})
    assert entries[-1]["body"] == {"state_changes": {"deployed_envs": [{"env_id": "office"}]}}
    state["metadata"]["verifications"]["grade"] = {"score": 1.0}
    state["agent_model"] = "m"
    entries.append({"step_id": "grade", "body": tracker.changes(state)})
    assert set(entries[-1]["body"]["state_changes"]) == {"metadata", "agent_model"}
    state["deployed_envs"][0]["env_id"] = "changed later"  # an entry is a copy: what came after does not leak in
    assert entries[1]["body"]["state_changes"]["deployed_envs"] == [{"env_id": "office"}]
    del state["agent_model"]
    entries.append({"step_id": "drop", "body": tracker.changes(state)})
    assert entries[-1]["body"]["state_removed"] == ["agent_model"]
    assert journal_state(entries) == state
    assert journal_state(entries[:3])["agent_model"] == "m"


def test_a_journal_of_whole_states_reads_as_before():
    entries = [{"step_id": "__seed__", "body": {"state": {"a": 1}}},
               {"step_id": "s1", "body": {"state": {"a": 2, "b": 3}}}]
    assert journal_state(entries) == {"a": 2, "b": 3}
