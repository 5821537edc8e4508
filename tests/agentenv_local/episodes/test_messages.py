"""Trajectories into OpenAI-style messages and the episode record's usage, for each agent's trajectory shape."""

from __future__ import annotations

import json

from agentenv_local.episodes.messages import conversation_messages
from agentenv_local.episodes.record import episode_record


def test_an_agent_without_a_trajectory_gives_its_turns():
    turns = [{"prompt": "hi", "response": "hello"}, {"prompt": "bye", "response": "ciao"}]
    assert conversation_messages(turns, []) == [
        {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "bye"}, {"role": "assistant", "content": "ciao"}]


def test_a_tool_loop_trajectory_keeps_call_ids_names_and_results():
    trajectory = [
        {"type": "turn", "input": "what is 6*7?"},
        {"type": "model_call", "usage": {"input_tokens": 10, "output_tokens": 5, "total": 15}},
        {"type": "tool_call", "id": "call_a", "name": "calc__mul", "server": "calc", "tool": "mul",
         "args": {"a": 6, "b": 7}, "result": "42", "is_error": False},
        {"type": "model_call", "usage": {"input_tokens": 20, "output_tokens": 3, "total": 23}},
        {"type": "final", "text": "42"},
    ]
    messages = conversation_messages([{"prompt": "what is 6*7?", "response": "42"}], trajectory)
    assert messages == [
        {"role": "user", "content": "what is 6*7?"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_a", "type": "function", "function": {
            "name": "calc__mul", "arguments": json.dumps({"a": 6, "b": 7})}}]},
        {"role": "tool", "tool_call_id": "call_a", "content": "42"},
        {"role": "assistant", "content": "42"}]
    run = {"run_id": "r1", "task_id": "t", "overrides": {"agent": "tool-loop", "agent_model": "m"},
           "context": {"prompt_responses": [{"step_id": "ask", "agent_name": "solver",
                                             "turns": [{"prompt": "what is 6*7?", "response": "42"}],
                                             "trajectory": trajectory[:2], "agent_trajectory_object_key": "k"}]}}
    record = episode_record(run, {"k": json.dumps(trajectory).encode()}.get)  # the full trajectory is read
    assert record["messages"] == messages and record["agent"] == "tool-loop" and record["model"] == "m"
    assert record["usage"] == {"input_tokens": 30, "output_tokens": 8, "total_tokens": 38, "model_calls": 2,
                               "tool_calls": 1}
    assert episode_record(run)["trajectory"] == [{"step_id": "ask", "agent_name": "solver", **e}
                                                 for e in trajectory[:2]]  # no object store: the inline events


def test_a_turn_without_text_events_ends_with_the_tasks_reply():
    trajectory = [{"type": "turn", "input": "go"}, {"type": "tool_call", "server": "s", "tool": "t", "args": {},
                                                  "result": {"ok": True}}]
    messages = conversation_messages([{"prompt": "go", "response": "done"}], trajectory)
    assert messages[1]["tool_calls"][0]["function"]["name"] == "s__t"
    assert messages[2] == {"role": "tool", "tool_call_id": "call_1", "content": '{"ok": true}'}
    assert messages[-1] == {"role": "assistant", "content": "done"}
