"""deploy_agent, prompt_agent and deploy_human_agent in real runs (`agentenv run`, a real hub): a scripted
agent calling an env's tools through the gateway under its role, a three-turn conversation with a scripted
user simulator, a subprocess agent, an agent that never answers, malformed A2A, continuing a context."""

from __future__ import annotations

import json
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from kits.hub import cli, runs_json, show_json, write_bundle

ROOT = Path(__file__).resolve().parents[3]

SOLVER_PLAN = {"turns": [
    [{"tool": "echo", "args": {"text": "hi {input}"}, "save_as": "e"}, {"reply": "echoed: {e}"}],
    [{"tool": "whoami", "save_as": "w"}, {"reply": "you are talking to role {w.role}"}],
    [{"reply": "bye"}]]}
USER_PLAN = {"turns": [[{"reply": "who am I talking to?"}], [{"reply": "thanks"}], [{"end": True}]]}


def bundle(project: Path, steps: list[dict], name: str = "b") -> str:
    write_bundle(project, name, {"t": steps})
    env = project / name / "envs" / "echo"
    env.mkdir(parents=True)
    shutil.copy(ROOT / "examples" / "envs" / "echo" / "server.py", env / "server.py")
    (env / "env.toml").write_text('module = "server.py:Echo"\n')
    return f"./{name}"


def last_run(project: Path) -> dict:
    return show_json(project, runs_json(project)[0]["run_id"])


def solver(**extra) -> dict:
    return {"id": "agent", "type": "deploy_agent", "agent_name": "solver", "env_ids": ["echo"], "role": "support",
            "config": {"plan": SOLVER_PLAN}, **extra}


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "proj"
    root.mkdir()
    return root


def test_three_turn_conversation_through_the_gateway_under_a_role(project):
    path = bundle(project, [
        {"id": "env", "type": "deploy_env", "env_id": "echo"},
        solver(),
        {"id": "user", "type": "deploy_agent", "agent_name": "user", "config": {"plan": USER_PLAN}},
        {"id": "ask", "type": "prompt_agent", "agent_name": "solver", "prompt": "there",
         "max_conversation_turns": 3, "user_agent_name": "user"},
        {"id": "check", "type": "agent_prompt_response_verifier", "prompt_id": "ask",
         "criteria": [{"type": "response_contains", "needles": ["bye"]}]},
    ])
    out = cli(project, "run", path, check=True)
    assert "passed (check: 1)" in out.stdout
    context = last_run(project)["context"]
    [response] = context["prompt_responses"]
    assert [t["response"] for t in response["turns"]] == [
        "echoed: hi there", "you are talking to role support", "bye"]
    assert [t.get("user_reply") for t in response["turns"]] == ["who am I talking to?", "thanks", None]
    assert response["tool_call_count"] == 2 and response["state"] == "completed"
    tools = [e["tool"] for e in response["trajectory"] if e.get("type") == "tool_call"]
    assert tools == ["echo", "whoami"]
    assert response["agent_trajectory_object_key"].endswith("/trajectories/ask.json")
    agents = {a["agent_name"]: a for a in context["deployed_agents"]}
    assert agents["solver"]["runtime"] == "in_hub" and agents["solver"]["torn_down"] is True
    assert agents["solver"]["a2a_card"]["name"] == "scripted"


def test_subprocess_agent_and_continuing_a_context(project):
    plan = {"turns": [[{"reply": "first {input}"}], [{"reply": "second {input} (turn {turn})"}]]}
    path = bundle(project, [
        {"id": "agent", "type": "deploy_agent", "agent_name": "solver", "runtime": "subprocess",
         "config": {"plan": plan}},
        {"id": "one", "type": "prompt_agent", "agent_name": "solver", "prompt": "a"},
        {"id": "two", "type": "prompt_agent", "agent_name": "solver", "prompt": "b", "context_id": "prompt:one"},
    ])
    cli(project, "run", path, check=True)
    context = last_run(project)["context"]
    one, two = context["prompt_responses"]
    assert one["response"] == "first a" and two["response"] == "second b (turn 1)"
    assert one["a2a_context_id"] == two["a2a_context_id"]
    agent = context["deployed_agents"][0]
    assert agent["runtime"] == "subprocess" and agent["pid"]
    from kits.hub import _alive

    assert not _alive(agent["pid"])  # stopped by the run's teardown


def test_an_agent_that_never_answers_fails_the_step_at_its_timeout(project):
    path = bundle(project, [
        {"id": "env", "type": "deploy_env", "env_id": "echo"},
        {"id": "agent", "type": "deploy_agent", "agent_name": "solver", "config": {"plan": [{"sleep": 60}]}},
        {"id": "ask", "type": "prompt_agent", "agent_name": "solver", "prompt": "hello?", "timeout_seconds": 1},
    ])
    out = cli(project, "run", path)
    assert out.returncode == 1
    assert "did not finish within 1 s; its last state: working" in out.stdout
    assert "Tore down 1 env instance" in out.stdout  # the run went on to its teardown
    run = last_run(project)
    assert run["steps"]["ask"]["status"] == "failed"


class _BadAgent(BaseHTTPRequestHandler):
    """An A2A endpoint whose task lacks `status` (a protocol violation)."""

    def log_message(self, *args):
        pass

    def _json(self, body):
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        host = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._json({"name": "bad", "url": host + "/a2a", "protocolVersion": "0.3.0", "version": "1",
                    "capabilities": {}, "skills": [], "defaultInputModes": ["text"], "defaultOutputModes": ["text"]})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self._json({"jsonrpc": "2.0", "id": body.get("id"), "result": {"id": "t1", "contextId": "c1", "kind": "task"}})


def test_malformed_a2a_is_a_protocol_error_naming_the_field(project):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _BadAgent)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        path = bundle(project, [
            {"id": "agent", "type": "deploy_agent", "agent_name": "bad",
             "a2a_url": f"http://127.0.0.1:{server.server_address[1]}"},
            {"id": "ask", "type": "prompt_agent", "agent_name": "bad", "prompt": "hi", "timeout_seconds": 5},
        ])
        out = cli(project, "run", path)
    finally:
        server.shutdown()
    assert out.returncode == 1 and "Traceback" not in out.stdout + out.stderr
    assert "status" in out.stdout and "prompting agent 'bad' failed" in out.stdout


def test_bad_agent_setup_is_explained(project):
    path = bundle(project, [
        {"id": "agent", "type": "deploy_agent", "agent_name": "solver", "a2a_agent_id": "no_such_module:Agent"},
        {"id": "ask", "type": "prompt_agent", "agent_name": "solver", "prompt": "hi"},
    ])
    out = cli(project, "run", path)
    assert out.returncode == 1 and "could not start agent 'no_such_module:Agent'" in out.stdout
    missing = bundle(project, [
        {"id": "ask", "type": "prompt_agent", "agent_name": "ghost", "prompt": "hi"},
    ], name="c")
    out = cli(project, "run", missing)
    assert "no agent named 'ghost' is deployed" in out.stdout
    invalid = bundle(project, [
        {"id": "ask", "type": "prompt_agent", "agent_name": "x", "prompt": "hi", "max_conversation_turns": 3},
    ], name="d")
    out = cli(project, "run", invalid)
    assert out.returncode != 0 and "user_agent_name" in out.stdout + out.stderr


def test_user_simulator_triggers_speak_and_end_the_conversation(project):
    solver_plan = {"turns": [[{"reply": "working on it"}], [{"reply": "still on it"}], [{"reply": "All DONE."}],
                             [{"reply": "never reached"}]]}
    triggers = [
        {"id": "stop", "when": {"type": "conversational", "where": {"message": {"regex": "(?i)done"}}},
         "actions": [{"type": "say", "text": "thanks, bye"}, {"type": "end"}]},
    ]
    path = bundle(project, [
        {"id": "agent", "type": "deploy_agent", "agent_name": "solver", "config": {"plan": solver_plan}},
        {"id": "user", "type": "deploy_agent", "agent_name": "user",
         "config": {"plan": {"turns": [[{"reply": "any news?"}], [{"reply": "and now?"}]]}}},
        {"id": "trig", "type": "register_agent_triggers", "agent_name": "user", "triggers": triggers},
        {"id": "ask", "type": "prompt_agent", "agent_name": "solver", "prompt": "please do it",
         "max_conversation_turns": 10, "user_agent_name": "user"},
    ])
    cli(project, "run", path, check=True)
    [response] = last_run(project)["context"]["prompt_responses"]
    turns = response["turns"]
    assert [t["response"] for t in turns] == ["working on it", "still on it", "All DONE."]
    assert [t.get("user_reply") for t in turns] == ["any news?", "and now?", "thanks, bye"]
    assert turns[-1]["ended_by_trigger"] is True and turns[-1]["triggers_fired"] == ["stop"]
