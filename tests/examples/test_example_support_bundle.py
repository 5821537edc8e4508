"""examples/support end to end: offline with the scripted solver (no model), then the same bundle with
`--agent tool-loop` and a [model] endpoint, answered by the local wire-format model server."""

from __future__ import annotations

import json
from pathlib import Path

from kits.example_runs import agentenv, last_run

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = ROOT / "examples" / "support"


def test_offline_with_the_scripted_solver(project):
    out = agentenv(project, "run", str(BUNDLE))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "passed (grade: 1, outcome: 1)" in out.stdout
    run = last_run(project)
    [chat] = run["context"]["prompt_responses"]
    assert len(chat["turns"]) == 3 and chat["turns"][-1]["response"] == "You're welcome!"
    tools = [e["tool"] for e in chat["trajectory"] if e.get("type") == "tool_call"]
    assert tools == ["search_emails", "read_email", "send_email", "update_deal_stage"]
    solver = next(a for a in run["context"]["deployed_agents"] if a["agent_name"] == "solver")
    assert solver["a2a_agent_id"] == "scripted" and solver["role"] == "agent"


def test_the_same_bundle_with_the_tool_loop_agent_and_a_model(project):
    from agentenv_local.testing.fake_models import FakeModelServer, Reply

    send = {"to": "maria.lopez@acmelogistics.example", "subject": "", "in_reply_to": "e-02",
            "body": "Hi Maria, the 8% discount on a 3-year term is approved. Best, Alex"}
    script = [
        Reply.tool_call("search_emails", {"query": "acme pricing"}),
        Reply.tool_call("read_email", {"email_id": "e-02"}),
        Reply.text("Maria asked for 8% off on a 3-year term."),
        Reply.tool_call("send_email", send),
        Reply.tool_call("update_deal_stage", {"deal_id": "deal-101", "stage": "closed_won"}),
        Reply.text("Done: I replied to Maria and moved deal-101 to closed_won."),
        Reply.text("You're welcome!"),
    ]
    with FakeModelServer(api_key="sk-test-support", script=script) as server:
        state = project / ".agentenv"
        state.mkdir()
        (state / "config.toml").write_text(
            f'[model]\nbase_url = "{server.base_url}"\napi_key = "sk-test-support"\ndefault = "fake-model"\n')
        out = agentenv(project, "run", str(BUNDLE), "--agent", "tool-loop")
        requests = list(server.requests)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "passed (grade: 1, outcome: 1)" in out.stdout
    assert all(not r.problems for r in requests), [r.problems for r in requests]
    assert len(requests) == 7 and "send_email" in requests[0].tool_names
    assert "purge_mailbox" not in requests[0].tool_names  # RBAC: disabled for the role 'agent'
    run = last_run(project)
    solver = next(a for a in run["context"]["deployed_agents"] if a["agent_name"] == "solver")
    assert solver["a2a_agent_id"] == "tool-loop"
    [chat] = run["context"]["prompt_responses"]
    assert [t["response"] for t in chat["turns"]][-1] == "You're welcome!"
    assert "sk-test-support" not in json.dumps(run)  # the key never reaches the store


def test_tool_loop_without_a_model_is_refused_before_anything_deploys(project):
    out = agentenv(project, "run", str(BUNDLE), "--agent", "tool-loop")
    assert out.returncode != 0
    text = out.stdout + out.stderr
    assert "step 'solver' (deploy_agent)" in text and "[model] base_url" in text
    assert "deploy (deploy_env)" not in text  # nothing ran


def test_a_model_endpoint_that_fails_is_a_clear_failure_not_a_hang(project):
    from agentenv_local.testing.fake_models import FakeModelServer, Reply

    with FakeModelServer(api_key="sk-test-support", script=[Reply.error(500, "the model fell over")] * 20) as server:
        state = project / ".agentenv"
        state.mkdir()
        (state / "config.toml").write_text(
            f'[model]\nbase_url = "{server.base_url}"\napi_key = "sk-test-support"\ndefault = "fake-model"\n'
            "max_retries = 2\n")
        out = agentenv(project, "run", str(BUNDLE), "--agent", "tool-loop")
        attempts = len(server.requests)
    assert out.returncode == 1
    assert "step chat failed" in out.stdout and "the model fell over" in out.stdout
    assert attempts == 3  # the first try and two retries
    assert "Tore down 1 env instance" in out.stdout and "sk-test-support" not in out.stdout
