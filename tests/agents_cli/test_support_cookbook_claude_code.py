"""Cookbook parity: `agentenv run examples/support --agent claude-code` (the real Claude Code CLI, the fake model
server as [model] over the Anthropic Messages API) passes the support conversation as the scripted solver does:
three turns with the scripted customer, the office env's tools called through the gateway under the role 'agent'
(purge_mailbox never offered), graded by the scripted judge and the env-outcome verifier. The task is left as
written: --agent swaps the solver only (the customer and the judge stay scripted)."""

from __future__ import annotations

import shutil
from pathlib import Path

from agent_cli_kit import MODEL_KEY, ROOT, agentenv, cli_path, stored_run, tool_calls, write_model_config

from agentenv_local.testing.fake_models import FakeModelServer, RecordedRequest, Reply

DROP = ("ANTHROPIC_",)
SEND = {"to": "maria.lopez@acmelogistics.example", "subject": "", "in_reply_to": "e-02",
        "body": "Hi Maria, the 8% discount on a 3-year term is approved. Best, Alex"}
# The customer's three messages (examples/support's scripted customer) -> what the model does in that turn:
# tool calls (by tool name suffix) one per request, then the turn's answer.
TURNS = [("pricing", [("search_emails", {"query": "acme pricing"}), ("read_email", {"email_id": "e-02"})],
          "Maria asked for 8% off on a 3-year term."),
         ("Sam approved", [("send_email", SEND), ("update_deal_stage", {"deal_id": "deal-101", "stage": "closed_won"})],
          "Done: I replied to Maria and moved deal-101 to closed_won."),
         ("Thanks", [], "You're welcome!")]


def _results_since_user_text(request: RecordedRequest) -> int:
    """Tool results in the messages after the last user message that holds no tool result (the turn's prompt)."""
    count = 0
    for message in reversed(request.messages):
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
        if message.get("role") == "user" and not results:
            return count
        count += len(results)
    return count


class SupportResponder:
    """Plays the solver's model through the support conversation; a side request (no tools offered: a title,
    a summary) gets plain text."""

    def __init__(self) -> None:
        self.called: list[str] = []
        self.offered: list[list[str]] = []

    def __call__(self, request: RecordedRequest) -> Reply:
        if not request.tools:
            return Reply(text="ok")
        self.offered.append(request.tool_names)
        said = request.last_user_text
        for needle, calls, answer in TURNS:
            if needle in said:
                done = _results_since_user_text(request)
                if done >= len(calls):
                    return Reply(text=answer)
                suffix, args = calls[done]
                tool = next(t["name"] for t in request.tools if t["name"].endswith("__" + suffix))
                self.called.append(tool)
                return Reply.tool_call(tool, args)
        return Reply(text=f"unexpected prompt: {said[:200]}")


def test_the_support_cookbook_passes_with_claude_code_as_the_solver(tmp_path: Path) -> None:
    cli_path("claude-code", "claude")
    bundle = tmp_path / "support"
    shutil.copytree(ROOT / "examples" / "support", bundle)
    project = tmp_path / "proj"
    (project / ".agentenv").mkdir(parents=True)
    responder = SupportResponder()
    with FakeModelServer(api_key=MODEL_KEY, responder=responder) as server:
        write_model_config(project, api="anthropic", base_url=server.root_url, default="claude-sonnet-4-5")
        out = agentenv(project, "run", str(bundle), "--agent", "claude-code", drop=DROP)
        problems = [r.problems for r in server.requests if r.problems]
    assert out.returncode == 0 and "passed (grade: 1, outcome: 1)" in out.stdout, out.stdout + out.stderr
    assert not problems
    assert responder.called == [f"mcp__office__{name}" for name in
                                ("search_emails", "read_email", "send_email", "update_deal_stage")]
    assert responder.offered and all("mcp__office__purge_mailbox" not in names for names in responder.offered)
    run, shown = stored_run(project, DROP)
    agents = {a["agent_name"]: a["a2a_agent_id"] for a in run["context"]["deployed_agents"]}
    assert agents == {"solver": "claude-code", "customer": "scripted", "judge": "scripted"}
    assert run["context"]["metadata"]["user_overrides"]["agent"] == "claude-code"
    [chat] = run["context"]["prompt_responses"]
    assert len(chat["turns"]) == 3 and chat["turns"][-1]["response"] == "You're welcome!"
    assert [c["tool"] for c in tool_calls(chat["trajectory"])] == [
        "search_emails", "read_email", "send_email", "update_deal_stage"]
    assert MODEL_KEY not in shown  # the key never reaches the store
