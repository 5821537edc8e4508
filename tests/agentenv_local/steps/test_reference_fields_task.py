"""One task file using the reference's step fields that mean something locally, run offline through `agentenv run`
(issue 14 item 4): a process sandbox loaded from urls (a file and loopback http), collected with a suffix and loaded
back by artifact_from_step_id, verified; two tool-loop agents on a FakeModelServer (the solver tuned with max_turns
and model_params, the user simulator configured by user_model and user_output_format); a rubric_evidence judge
grading the conversation as of turn 1 through a trajectory_filter with dict facts; cloud-only fields noted once
each in the run log.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import pytest
from kits.hub import cli, runs_json, show_json, write_bundle

from agentenv_local.testing.fake_models import FakeModelServer, Reply

KEY = "sk-task-fields-0123456789"
USER_FORMAT = {"type": "object", "properties": {"message": {"type": "string"}, "done": {"type": "boolean"}},
               "required": ["message", "done"]}


@pytest.fixture
def loopback() -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            body = b"served over loopback"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _task(notes: Path, served: str) -> list[dict]:
    return [
        {"id": "box", "type": "deploy_sandbox", "sandbox_name": "box", "sandbox_mode": "vm", "sandbox_type": "process",
         "disk_size_gb": 12.5, "boot_mode": "fast"},
        {"id": "inputs", "type": "load_artifact", "sandbox_name": "box", "destination_path": "/app/artifact",
         "urls": [notes.as_uri(), {"url": f"{served}/data", "filename": "served.txt"}], "snapshot_after_load": False},
        {"id": "collect", "type": "collect_artifacts", "container_name": "box", "universe_id_suffix": "-seed1"},
        {"id": "again", "type": "load_artifact", "artifact_from_step_id": "collect", "container_name": "box",
         "destination_path": "/app/again"},
        {"id": "files", "type": "verify_sandbox", "sandbox_name": "box", "criteria": [
            {"type": "probe_file_contains", "paths": ["again/notes.txt"], "expected": "hello"},
            {"type": "probe_file_contains", "paths": ["again/served.txt"], "expected": "loopback"}]},
        {"id": "solver", "type": "deploy_agent", "agent_name": "solver", "a2a_agent_id": "tool-loop",
         "cpu": 2.0, "memory_mb": 4096},
        {"id": "user", "type": "deploy_agent", "agent_name": "user", "a2a_agent_id": "tool-loop", "model_role": "user"},
        {"id": "chat", "type": "prompt_agent", "agent_name": "solver", "prompt": "what is in the notes?",
         "max_turns": 3, "model_params": {"temperature": 0.1}, "effort": "high",
         "max_conversation_turns": 2, "user_agent_name": "user", "user_model": "user-sim-m",
         "user_output_format": USER_FORMAT},
        {"id": "grade", "type": "rubrics_verifier", "prompt_id": "chat", "output_format": "rubric_evidence",
         "grade_up_to_turn": 1, "trajectory_filter": {"include_thinking": False},
         "context_facts_for_judge": {"notes": "the notes say hello"}, "judge_batch_size": 4,
         "criteria": [{"id": "said", "criterion": "Says the notes say hello"}]},
    ]


def test_a_task_using_the_reference_fields_that_matter_locally_validates_and_runs(tmp_path, loopback):
    notes = tmp_path / "notes.txt"
    notes.write_text("hello from the notes")
    project = tmp_path / "proj"
    (project / ".agentenv").mkdir(parents=True)
    path = write_bundle(project, "fields", {"all": _task(notes, loopback)})
    verdict = {"reasoning": "turn one says hello", "criteria": [
        {"id": "said", "evidence": "first answer", "evidence_status": "visible", "passed": True,
         "justification": "it says hello"}]}
    script = [Reply.text("The notes say hello."), Reply.structured({"message": "and then?", "done": False}),
              Reply.text("That is all."), Reply.structured(verdict)]
    with FakeModelServer(api_key=KEY, script=script) as srv:
        (project / ".agentenv" / "config.toml").write_text(
            f'[model]\nbase_url = "{srv.base_url}"\napi_key = "{KEY}"\ndefault = "solver-m"\nmax_retries = 0\n'
            '[model.roles]\njudge = "judge-m"\nuser = "user-role-m"\n')
        out = cli(project, "run", str(path), timeout=240)
        requests = srv.valid_requests()
    assert out.returncode == 0, out.stdout + out.stderr
    assert "passed (files: 1, grade: 1)" in out.stdout, out.stdout
    assert [r.model for r in requests] == ["solver-m", "user-sim-m", "solver-m", "judge-m"]
    assert requests[0].body["temperature"] == 0.1 and requests[1].response_schema == USER_FORMAT
    judged = requests[3].last_user_text
    assert "The notes say hello." in judged and "That is all." not in judged  # as of turn 1
    assert "notes: the notes say hello" in judged and "evidence_status" in judged
    run = show_json(project, runs_json(project)[0]["run_id"])
    context = run["context"]
    assert context["metadata"]["collected_artifacts"]["collect"]["id"].endswith("__collect-artifacts-seed1")
    [chat] = context["prompt_responses"]
    assert [t["response"] for t in chat["turns"]] == ["The notes say hello.", "That is all."]
    [row] = context["metadata"]["verifications"]["grade"]["results"]
    assert row["evidence_status"] == "visible" and row["result"] is True
    assert KEY not in json.dumps(run)
    notes_logged = _notes(project, run["run_id"])
    for step_id, field in (("box", "disk_size_gb"), ("box", "boot_mode"), ("inputs", "snapshot_after_load"),
                           ("solver", "cpu"), ("solver", "memory_mb"), ("chat", "effort"),
                           ("grade", "judge_batch_size")):
        line = f"step {step_id!r}: field {field!r} is accepted but has no local meaning: "
        assert sum(n.startswith(line) for n in notes_logged) == 1, (line, notes_logged)
        assert out.stdout.count(f"note: {line}") == 1, out.stdout  # and `agentenv run` shows it


def _notes(project: Path, run_id: str) -> list[str]:
    """The run's log lines, read from its store (the hub has exited)."""
    from agentenv_local.paths import ProjectPaths
    from stores.database import DuckDBStore

    paths = ProjectPaths(project / ".agentenv")
    store = DuckDBStore(paths.store_file, paths.objects_dir)
    try:
        return [e["body"]["message"] for e in store.events.query(run_id=run_id, kinds=["step.log"])]
    finally:
        store.close()
