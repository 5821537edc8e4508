"""The reference's `agents` bundle's claude-code-smoke task run by `agentenv run` (a real hub, the real Claude
Code CLI, the fake model server over HTTP as [model]): it passes and its stored trajectory shows the Bash call
and its output; without a model the run stops with one line naming the model setting."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from agent_cli_kit import MODEL_KEY, cli_path
from shell_responder import COMMAND, ShellResponder

from agentenv_local.testing.fake_models import FakeModelServer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kits.reference_bundles import copy_reference_bundle  # noqa: E402 - the tests folder is on the path now


def agentenv(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTENV_", "ANTHROPIC_", "LITELLM_"))}
    return subprocess.run([str(Path(sys.executable).parent / "agentenv"), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=400, check=False)


@pytest.fixture
def smoke_bundle(tmp_path: Path) -> Path:
    """The reference's `agents` bundle with its claude-code task only (the other CLIs have no agent here yet)."""
    bundle = copy_reference_bundle("agents", tmp_path)
    for task in (bundle / "tasks").iterdir():
        if task.name != "claude-code-smoke.json":
            task.unlink()
    project = tmp_path / "proj"
    project.mkdir()
    return bundle


def test_the_smoke_task_passes_with_a_model_and_records_the_bash_call(smoke_bundle: Path) -> None:
    cli_path("claude-code", "claude")
    project = smoke_bundle.parent / "proj"
    with FakeModelServer(api_key=MODEL_KEY, responder=ShellResponder()) as server:
        (project / ".agentenv").mkdir()
        (project / ".agentenv" / "config.toml").write_text(
            f'[model]\napi = "anthropic"\nbase_url = "{server.root_url}"\napi_key = "{MODEL_KEY}"\n'
            'default = "claude-sonnet-4-5"\n')
        out = agentenv(project, "run", str(smoke_bundle), "--task", "claude-code-smoke")
        problems = [r.problems for r in server.requests if r.problems]
    assert out.returncode == 0, out.stdout + out.stderr
    assert "passed" in out.stdout, out.stdout
    assert not problems
    runs = json.loads(agentenv(project, "runs", "list", "--json").stdout)
    shown = agentenv(project, "runs", "show", runs[0]["run_id"], "--json").stdout
    run = json.loads(shown)
    [chat] = run["context"]["prompt_responses"]
    calls = [e for e in chat["trajectory"] if e.get("type") == "tool_call"]
    assert [(c["name"], c["args"]["command"], c["result"].strip()) for c in calls] == [("Bash", COMMAND, "42")]
    agent = run["context"]["deployed_agents"][0]
    assert agent["a2a_agent_id"] == "claude-code"
    assert MODEL_KEY not in shown  # the key never reaches the store


def test_without_a_model_the_dry_run_passes_and_the_run_fails_with_one_line(smoke_bundle: Path) -> None:
    project = smoke_bundle.parent / "proj"
    dry = agentenv(project, "run", str(smoke_bundle), "--dry-run")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert "Would run: tasks/claude-code-smoke.json" in dry.stdout
    out = agentenv(project, "run", str(smoke_bundle), "--task", "claude-code-smoke")
    assert out.returncode != 0
    lines = [line for line in (out.stdout + out.stderr).splitlines() if "claude-code agent needs a model" in line]
    assert len(lines) == 1 and "[model] base_url" in lines[0], out.stdout + out.stderr


def test_the_full_bundle_knows_every_agent(tmp_path: Path) -> None:
    bundle = copy_reference_bundle("agents", tmp_path)
    out = agentenv(tmp_path, "run", str(bundle), "--dry-run")
    text = out.stdout + out.stderr
    assert out.returncode == 0, text
    assert "not found" not in text
    for name in ("claude-code", "codex", "gemini", "opencode", "openhands", "pi"):
        assert f"Would run: tasks/{name}-smoke.json" in text


ENV_TASK = {
    "description": "claude-code reads the office env's mail through the gateway under the role 'agent'",
    "steps": [
        {"id": "deploy", "type": "deploy_env", "env_id": "office"},
        {"id": "seed_mail", "type": "load_artifact", "artifact_id": "mail-seed", "env_id": "office",
         "depends_on": ["deploy"]},
        {"id": "lock_down", "type": "modify_env_tool_access", "env_id": "office", "action": "disable",
         "role": "agent", "tools": ["purge_mailbox"], "depends_on": ["seed_mail"]},
        {"id": "solver", "type": "deploy_agent", "a2a_agent_id": "claude-code", "agent_name": "solver",
         "env_ids": ["office"], "role": "agent", "depends_on": ["lock_down"]},
        {"id": "ask", "type": "prompt_agent", "agent_name": "solver", "prompt_id": "ask",
         "prompt": "Search the mail for Acme pricing and tell me what you found.", "depends_on": ["solver"]},
        {"id": "check", "type": "agent_prompt_response_verifier", "prompt_id": "ask", "verifier_id": "answer",
         "criteria": [{"type": "response_contains", "needles": ["DONE"]}], "depends_on": ["ask"]},
    ],
}


def test_claude_calls_an_office_tool_through_the_gateway_under_a_role(tmp_path: Path) -> None:
    cli_path("claude-code", "claude")
    root = Path(__file__).resolve().parents[2]
    bundle = tmp_path / "office-claude"
    shutil.copytree(root / "examples" / "support", bundle)
    for task in (bundle / "tasks").iterdir():
        task.unlink()
    (bundle / "tasks" / "office-claude.json").write_text(json.dumps(ENV_TASK))
    project = tmp_path / "proj"
    (project / ".agentenv").mkdir(parents=True)
    responder = ShellResponder(mcp_tool="__search_emails", mcp_args={"query": "acme pricing"})
    with FakeModelServer(api_key=MODEL_KEY, responder=responder) as server:
        (project / ".agentenv" / "config.toml").write_text(
            f'[model]\napi = "anthropic"\nbase_url = "{server.root_url}"\napi_key = "{MODEL_KEY}"\n'
            'default = "claude-sonnet-4-5"\n')
        out = agentenv(project, "run", str(bundle))
        offered = [r.tool_names for r in server.requests if r.path == "/v1/messages" and r.tools]
    assert out.returncode == 0 and "passed" in out.stdout, out.stdout + out.stderr
    assert responder.called == ["mcp__office__search_emails"]
    assert offered and all("mcp__office__purge_mailbox" not in names for names in offered)  # RBAC of the role
    runs = json.loads(agentenv(project, "runs", "list", "--json").stdout)
    run = json.loads(agentenv(project, "runs", "show", runs[0]["run_id"], "--json").stdout)
    [chat] = run["context"]["prompt_responses"]
    [call] = [e for e in chat["trajectory"] if e.get("type") == "tool_call"]
    assert (call["server"], call["tool"], call["args"], call["is_error"]) == \
        ("office", "search_emails", {"query": "acme pricing"}, False)
    assert "e-02" in call["result"], call["result"]
