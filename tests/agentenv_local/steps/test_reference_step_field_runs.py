"""The reference's step fields that mean something locally, in real runs (issue 14 item 4): load_artifact's urls
(file://, a local path, http from loopback; anything else refused) and artifact_from_step_id into a process
sandbox; rubrics_verifier's grade_up_to_turn, trajectory_filter and dict facts against a FakeModelServer judge;
prompt_agent's max_turns, model_params, user_model and user_output_format reaching tool-loop agents whose model
is a FakeModelServer, through the real runner; and the one-line note a cloud-only field leaves in the run log.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import pytest
from kits.hub import InProcessHub

from agentenv_local.errors import StepError
from agentenv_local.testing.fake_models import FakeModelServer, Reply

KEY = "sk-fields-0123456789"


# --- load_artifact: urls, artifact_from_step_id ----------------------------------------------------------------

@pytest.fixture
def loopback() -> Iterator[str]:
    """An http server on 127.0.0.1 answering /data.bin, and a redirect to a host that is not loopback."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            if self.path == "/data.bin":
                body = b"\x00served\xff"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            else:
                self.send_response(302)
                self.send_header("Location", "http://192.0.2.1/elsewhere")
                self.send_header("Content-Length", "0")
                self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_urls_load_local_files_and_loopback_http_into_the_sandbox(deployed, tmp_path, loopback):
    (tmp_path / "notes.txt").write_text("by file url")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("by path")
    deployed.execute(deployed.step({"id": "load", "type": "load_artifact", "destination_path": "/app/in", "urls": [
        (tmp_path / "notes.txt").as_uri(), str(tmp_path / "other" / "notes.txt"),
        {"url": f"{loopback}/data.bin", "filename": "served.bin"}]}))
    root = deployed.sandbox().root / "in"
    assert (root / "notes.txt").read_text() == "by file url"
    assert (root / "notes-1.txt").read_text() == "by path"  # the reference's rule for a repeated name
    assert (root / "served.bin").read_bytes() == b"\x00served\xff"
    loaded = deployed.metadata["loaded_urls"]
    assert [(e["filename"], e["bytes"]) for e in loaded] == [("notes.txt", 11), ("notes-1.txt", 7), ("served.bin", 8)]


@pytest.mark.parametrize("url, message", [
    ("https://example.com/data.csv", "not on this machine"),
    ("ftp://127.0.0.1/x", "not ftp://"),
    ("/no/such/file.txt", "cannot read"),
])
def test_a_url_a_local_run_cannot_load_fails_before_anything_is_written(deployed, tmp_path, url, message):
    (tmp_path / "good.txt").write_text("good")
    step = deployed.step({"id": "load", "type": "load_artifact", "urls": [(tmp_path / "good.txt").as_uri(), url]})
    with pytest.raises(StepError, match=message):
        deployed.execute(step)
    assert not (deployed.sandbox().root / "good.txt").exists()
    assert "loaded_urls" not in deployed.metadata


def test_a_redirect_and_a_symlink_are_not_followed(deployed, tmp_path, loopback):
    with pytest.raises(StepError, match="answered 302"):
        deployed.execute(deployed.step({"id": "l1", "type": "load_artifact", "urls": [f"{loopback}/moved"]}))
    (tmp_path / "real.txt").write_text("real")
    (tmp_path / "link.txt").symlink_to(tmp_path / "real.txt")
    with pytest.raises(StepError, match="symlink is not followed"):
        deployed.execute(deployed.step({"id": "l2", "type": "load_artifact", "urls": [str(tmp_path / "link.txt")]}))


def test_artifact_from_step_id_loads_what_collect_artifacts_stored(deployed, tmp_path):
    (tmp_path / "report.md").write_text("# found")
    deployed.execute(deployed.step({"id": "put", "type": "load_artifact", "destination_path": "/app/artifact",
                                    "urls": [str(tmp_path / "report.md")]}))
    deployed.execute(deployed.step({"id": "collect", "type": "collect_artifacts", "universe_id_suffix": "-seed1"}))
    assert deployed.metadata["collected_artifacts"]["collect"]["id"] == "run-0001__collect-artifacts-seed1"
    deployed.execute(deployed.step({"id": "back", "type": "load_artifact", "artifact_from_step_id": "collect",
                                    "destination_path": "/app/again"}))
    assert (deployed.sandbox().root / "again" / "report.md").read_text() == "# found"
    with pytest.raises(StepError, match="step 'nope' recorded no artifact"):
        deployed.execute(deployed.step({"id": "bad", "type": "load_artifact", "artifact_from_step_id": "nope"}))


# --- rubrics_verifier: grade_up_to_turn, trajectory_filter, facts, output formats -----------------------------

TURNS_TRAJECTORY = [
    {"type": "turn", "input": "first"},
    {"type": "tool_call", "tool": "lookup", "args": {"q": "a"}, "result": "SECRET-RESULT-A", "thinking": "hmm"},
    {"type": "final", "text": "turn one answer"},
    {"type": "turn", "input": "second"},
    {"type": "tool_call", "tool": "later_tool", "args": {}, "result": "later"},
    {"type": "final", "text": "turn two answer"},
]


@pytest.fixture
def conversation(run):
    run.state["prompt_responses"].append({
        "prompt_id": "chat", "response": "turn two answer", "structured_output": {"x": 1}, "agent_name": "solver",
        "step_id": "ask", "trajectory": TURNS_TRAJECTORY, "error_message": None,
        "turns": [{"turn": 0, "prompt": "first", "response": "turn one answer"},
                  {"turn": 1, "prompt": "second", "response": "turn two answer"}]})
    return run


def _judge(run, srv: FakeModelServer) -> None:
    run.services.config.values["model"] = {"base_url": srv.base_url, "api_key": KEY, "default": "m",
                                           "roles": {"judge": "judge-m"}, "max_retries": 0}


def _evidence(request) -> dict:
    return json.loads(request.last_user_text.split("The evidence (JSON):\n", 1)[1])


def test_grade_up_to_turn_and_trajectory_filter_shape_what_the_judge_sees(conversation):
    verdict = {"criteria": [{"id": "c", "passed": True, "justification": "ok"}]}
    with FakeModelServer(api_key=KEY, script=[Reply.structured(verdict)] * 2) as srv:
        _judge(conversation, srv)
        conversation.execute(conversation.step({
            "id": "whole", "type": "rubrics_verifier", "prompt_id": "chat", "criteria": [{"id": "c", "criterion": "x"}],
            "context_facts_for_judge": {"total": "42"}}))
        conversation.execute(conversation.step({
            "id": "cut", "type": "rubrics_verifier", "prompt_id": "chat", "criteria": [{"id": "c", "criterion": "x"}],
            "grade_up_to_turn": 1, "trajectory_filter": {"include_tool_call_results": False}}))
        whole, cut = srv.valid_requests()
    seen = _evidence(whole)
    assert seen["response"] == "turn two answer" and "later_tool" in json.dumps(seen["trajectory"])
    assert "SECRET-RESULT-A" in json.dumps(seen) and "hmm" in json.dumps(seen)  # no filter: all of it
    assert "- total: 42" in whole.last_user_text
    seen = _evidence(cut)
    assert seen["response"] == "turn one answer" and "structured_output" not in seen
    assert [e["type"] for e in seen["trajectory"]] == ["turn", "tool_call", "final"]
    assert "SECRET-RESULT-A" not in json.dumps(seen) and seen["trajectory"][1]["tool"] == "lookup"
    assert "hmm" not in json.dumps(seen)  # a filter's include_thinking is off by default


def test_trajectory_filter_without_tool_calls_or_responses(conversation):
    verdict = {"criteria": [{"id": "c", "passed": True, "justification": "ok"}]}
    with FakeModelServer(api_key=KEY, script=[Reply.structured(verdict)]) as srv:
        _judge(conversation, srv)
        conversation.execute(conversation.step({
            "id": "g", "type": "rubrics_verifier", "prompt_id": "chat", "criteria": [{"id": "c", "criterion": "x"}],
            "trajectory_filter": {"include_tool_calls": False, "include_response": False, "include_thinking": True,
                                  "compaction_type": "screenshot"}}))
        (request,) = srv.valid_requests()
    assert [e["type"] for e in _evidence(request)["trajectory"]] == ["turn", "turn"]
    notes = [e["body"]["message"] for e in conversation.store.events.query(run_id=conversation.run_id,
                                                                            kinds=["step.log"])]
    assert sum("compaction_type 'screenshot' is accepted but has no local meaning" in n for n in notes) == 1


TWO = [{"id": "c1", "criterion": "Looked it up"}, {"id": "c2", "criterion": "Quoted the source"}]


def _grade(run, srv: FakeModelServer, **fields) -> dict:
    run.execute(run.step({"id": "g", "type": "rubrics_verifier", "prompt_id": "chat", "criteria": TWO, **fields}))
    return run.metadata["verifications"]


def test_rubric_evidence_cites_evidence_and_bad_evidence_fails_the_criterion(conversation):
    answer = {"reasoning": "the lookup is in the trajectory; no quote anywhere", "criteria": [
        {"id": "c1", "evidence": "tool_call lookup", "evidence_status": "visible", "passed": True,
         "justification": "it called lookup"},
        {"id": "c2", "evidence": "NOT SHOWN", "evidence_status": "missing", "passed": True,
         "justification": "it says it quoted"}]}
    with FakeModelServer(api_key=KEY, script=[Reply.structured(answer)]) as srv:
        _judge(conversation, srv)
        verifications = _grade(conversation, srv, output_format="rubric_evidence")
        (request,) = srv.valid_requests()
    item = request.response_schema["properties"]["criteria"]["items"]
    assert {"evidence", "evidence_status"} <= set(item["required"])
    assert "reasoning" in request.response_schema["required"] and "evidence_status" in request.last_user_text
    v = verifications["g"]
    assert [(r["id"], r["result"], r["evidence_status"]) for r in v["results"]] == [
        ("c1", True, "visible"), ("c2", False, "missing")]  # missing evidence: not met, whatever it said
    assert v["results"][0]["evidence"] == "tool_call lookup" and v["judge"]["reasoning"].startswith("the lookup")
    assert "g-trajectory-mistakes" not in verifications


def test_rubric_evidence_with_mistakes_writes_a_second_entry(conversation):
    answer = {"reasoning": "r", "criteria": [
        {"id": "c1", "evidence": "lookup", "evidence_status": "visible", "passed": True, "justification": "ok"},
        {"id": "c2", "evidence": "NOT SHOWN", "evidence_status": "visible", "passed": False, "justification": "no"}],
              "findings": [{"severity": "high", "step": 1, "should": "check the result",
                            "description": "it trusted a stale record"}],
              "botched": False, "botched_reason": "", "summary": "one serious slip"}
    with FakeModelServer(api_key=KEY, script=[Reply.structured(answer)]) as srv:
        _judge(conversation, srv)
        verifications = _grade(conversation, srv, output_format="rubric_evidence_with_mistakes")
        (request,) = srv.valid_requests()
    assert {"findings", "botched", "summary"} <= set(request.response_schema["required"])
    assert verifications["g"]["score"] == pytest.approx(0.5)
    mistakes = verifications["g-trajectory-mistakes"]
    assert mistakes["source_verifier_id"] == "g"
    assert [r["id"] for r in mistakes["results"]] == ["summary", "botched", "mistake_0", "coverage_c1", "coverage_c2"]
    assert mistakes["results"][2]["justification"] == "[high] check the result — it trusted a stale record"
    assert mistakes["score"] == pytest.approx(2 / 3 - 0.25)  # botched ok, one of two shown, a high mistake


def test_trajectory_mistakes_rows_and_an_unusable_answer(conversation):
    answer = {"findings": [{"severity": "low", "step": None, "should": "be brief", "description": "rambled"}],
              "coverage": [{"id": "c1", "shown": True, "note": "event 1"}, {"id": "c2", "shown": False, "note": ""}],
              "botched": False, "botched_reason": "", "summary": "fine"}
    with FakeModelServer(api_key=KEY, script=[Reply.structured(answer)]) as srv:
        _judge(conversation, srv)
        v = _grade(conversation, srv, output_format="trajectory_mistakes")["g"]
        (request,) = srv.valid_requests()
    assert set(request.response_schema["properties"]) == {"findings", "coverage", "botched", "botched_reason",
                                                          "summary"}
    assert [(r["id"], r["result"]) for r in v["results"]] == [
        ("summary", False), ("botched", True), ("mistake_0", False), ("coverage_c1", True), ("coverage_c2", False)]
    assert v["score"] == pytest.approx(2 / 3 - 0.02)
    with FakeModelServer(api_key=KEY, script=[Reply.text("looks fine to me")] * 2) as srv:
        _judge(conversation, srv)
        v = _grade(conversation, srv, output_format="trajectory_mistakes")["g"]
    [row] = v["results"]
    assert row["id"] == "parse_error" and not row["result"] and "not JSON" in row["justification"]


# --- prompt_agent through the runner: max_turns, model_params, user_model, user_output_format, notes -----------

@pytest.fixture
def model_hub(tmp_path) -> Iterator[tuple[InProcessHub, FakeModelServer]]:
    with FakeModelServer(api_key=KEY) as srv:
        project = tmp_path / "proj"
        project.mkdir()
        hub = InProcessHub(project, config_overrides={
            "model": {"base_url": srv.base_url, "api_key": KEY, "default": "solver-m", "max_retries": 0,
                      "roles": {"user": "user-role-m"}},
            "sandbox": {"default": "process"}})
        try:
            yield hub, srv
        finally:
            hub.close()


def _logs(hub: InProcessHub, run_id: str) -> list[str]:
    return [e["body"]["message"] for e in hub.store.events.query(run_id=run_id, kinds=["step.log"])]


def test_model_params_and_max_turns_reach_the_tool_loop_agent(model_hub):
    hub, srv = model_hub
    srv.reset([Reply.text("plain answer"), Reply.tool_call("anything", {}), Reply.text("never asked")])
    run = hub.run([
        {"id": "agent", "type": "deploy_agent", "agent_name": "solver", "a2a_agent_id": "tool-loop"},
        {"id": "tuned", "type": "prompt_agent", "agent_name": "solver", "prompt": "hi",
         "model_params": {"temperature": 0.25, "max_tokens": 77}},
        {"id": "short", "type": "prompt_agent", "agent_name": "solver", "prompt": "again", "max_turns": 1,
         "fail_task_on_error": False},
    ])
    assert run["steps"]["tuned"]["status"] == "passed", run["steps"]
    tuned, short = srv.valid_requests()[:2]
    assert tuned.body["temperature"] == 0.25 and tuned.body["max_tokens"] == 77
    assert short.body["messages"][-1]["content"] == "again"
    assert len(srv.valid_requests()) == 2  # max_turns 1: one model call, then the turn fails
    [failed] = run["context"]["metadata"]["failed_steps"]
    assert failed["step_id"] == "short" and "max_steps=1" in failed["error"]


def test_user_model_and_user_output_format_configure_the_user_simulator(model_hub):
    hub, srv = model_hub
    schema = {"type": "object", "properties": {"message": {"type": "string"}, "done": {"type": "boolean"}},
              "required": ["message", "done"]}
    srv.reset([Reply.structured({"message": "tell me more", "done": False})])
    plan = {"turns": [[{"reply": "first answer"}], [{"reply": "second answer"}]]}
    run = hub.run([
        {"id": "solver", "type": "deploy_agent", "agent_name": "solver", "a2a_agent_id": "scripted",
         "config": {"plan": plan}},
        {"id": "user", "type": "deploy_agent", "agent_name": "user", "a2a_agent_id": "tool-loop", "model_role": "user"},
        {"id": "chat", "type": "prompt_agent", "agent_name": "solver", "prompt": "start", "max_conversation_turns": 2,
         "user_agent_name": "user", "user_model": "user-sim-m", "user_output_format": schema},
    ])
    (request,) = srv.valid_requests()
    assert request.model == "user-sim-m"  # not the role's user-role-m
    assert request.response_schema == schema
    assert "first answer" in request.last_user_text
    [response] = run["context"]["prompt_responses"]
    assert [t["response"] for t in response["turns"]] == ["first answer", "second answer"]


def test_a_cloud_only_field_leaves_one_note_in_the_run_log(model_hub):
    hub, _ = model_hub
    run = hub.run([{"id": "box", "type": "deploy_sandbox", "sandbox_name": "box", "disk_size_gb": 12.5,
                    "boot_mode": "fast"},
                   {"id": "sure", "type": "deploy_sandbox", "sandbox_name": "two"}])
    logs = _logs(hub, run["run_id"])
    for field in ("disk_size_gb", "boot_mode"):
        line = f"step 'box': field {field!r} is accepted but has no local meaning: "
        assert sum(m.startswith(line) for m in logs) == 1, logs
    assert not any(m.startswith("step 'sure': field") for m in logs)  # defaults set nothing


# --- agent_name: the sandbox a deployed agent runs in (load_artifact, verify_sandbox, run_code) ----------------

def test_agent_name_targets_the_sandbox_the_agent_runs_in(run, tmp_path):
    run.execute(run.step({"id": "other", "type": "deploy_sandbox", "sandbox_name": "other"}))
    run.execute(run.step({"id": "work", "type": "deploy_sandbox", "sandbox_name": "work"}))
    with pytest.raises(StepError, match="no deployed agent named 'coder' with a sandbox") as info:
        run.execute(run.step({"id": "v0", "type": "verify_sandbox", "agent_name": "coder",
                              "criteria": [{"type": "probe_dir_exists", "paths": ["."]}]}))
    assert 'runtime "container"' in info.value.hint
    # what deploy_agent records for an agent it runs in a sandbox (runtime "container")
    run.state["deployed_agents"].append({"agent_name": "coder", "sandbox_id": run.record("work")["sandbox_id"],
                                         "sandbox_type": "process"})
    (tmp_path / "task.txt").write_text("fix the bug")
    run.execute(run.step({"id": "load", "type": "load_artifact", "agent_name": "coder", "destination_path": "/app/in",
                          "urls": [str(tmp_path / "task.txt")]}))
    assert (run.sandbox("work").root / "in" / "task.txt").read_text() == "fix the bug"
    assert not (run.sandbox("other").root / "in").exists()
    run.put_artifact("reader", {"reader.py": b"def run(input):\n    return open('in/task.txt').read().upper()\n"})
    run.execute(run.step({"id": "code", "type": "run_code", "script_artifact_id": "reader", "agent_name": "coder"}))
    assert run.metadata["script_results"]["code"] == "FIX THE BUG"
    run.execute(run.step({"id": "check", "type": "verify_sandbox", "agent_name": "coder", "criteria": [
        {"type": "probe_file_contains", "paths": ["in/task.txt"], "expected": "the bug"}]}))
    assert run.metadata["verifications"]["check"]["score"] == 1


# --- register_env_triggers.executor_agent_name: a deployed agent runs the triggers' nl actions -----------------

def test_executor_agent_name_makes_a_deployed_agent_the_triggers_executor(run):
    import asyncio

    from kits.agents import serving_agent
    from kits.env_steps import deployed_env, example, http, step_call_tool

    from agentenv_local.agents.client import A2AClient
    from agentenv_local.agents.scripted import ScriptedAgent

    trigger = {"id": "escalate", "when": {"type": "action", "tool": "search_emails"},
               "actions": [{"type": "nl", "instruction": "tell the manager about the pipeline"}]}
    with deployed_env(run, "office", {"mail": example("mail")}) as (base, _gw), \
            serving_agent(ScriptedAgent(plan=[{"reply": "noted: {input}"}])) as agent_url:
        run.state["deployed_agents"].append({"agent_name": "boss", "a2a_url": agent_url + "/a2a", "role": None})
        register = {"id": "triggers", "type": "register_env_triggers", "env_id": "office", "triggers": [trigger],
                    "watch_roles": ["agent"], "executor_agent_name": "boss"}
        with pytest.raises(StepError, match="'boss' was deployed without a role"):
            run.execute(run.step(register))
        run.state["deployed_agents"][-1]["role"] = "agent"
        with pytest.raises(StepError, match="role 'agent', which is in watch_roles"):
            run.execute(run.step(register))
        run.state["deployed_agents"][-1]["role"] = "manager"
        hours = {"start": "09:00", "end": "17:00"}
        paced = run.step({**register, "executor_hours": {"boss": hours}})
        assert paced.agent_executor(run.ctx(paced)) == {"a2a_url": agent_url + "/a2a", "role": "manager",
                                                        "timeout_seconds": 120, "hours": hours}
        run.execute(run.step(register))
        assert run.metadata["registered_env_triggers"] == {"office": ["escalate"]}
        with http(base) as h:
            assert h.get("/triggers/state").json()["triggers"][0]["status"] == "armed"
        step_call_tool(base, "search_emails", {"query": "pipeline"}, role="agent")
        with http(base) as h:
            from kits.hub import wait_until

            wait_until(lambda: h.get("/triggers/state").json()["triggers"][0]["status"] == "fired", 30)

        async def heard() -> list:
            async with A2AClient(agent_url) as client:
                return (await client.trajectory_get(context_id="trigger-escalate"))["trajectory"]

        events = asyncio.run(heard())
    assert any(e.get("input") == "tell the manager about the pipeline" for e in events), events


# --- collect_artifacts.env_id: a computer-use env's files, through its cua_bash and cua_get_file tools --------

def test_collect_artifacts_from_a_computer_use_env_through_its_tools(run, tmp_path):
    import base64
    import subprocess

    from kits.env_steps import deployed_env

    from agentenv_local.env import Env, environment_card, tool

    desktop = tmp_path / "desktop"
    (desktop / "out" / "sub").mkdir(parents=True)
    (desktop / "out" / "report.md").write_text("# done")
    (desktop / "out" / "sub" / "data.bin").write_bytes(b"\x00\x01\xff")
    (desktop / "out" / "core").write_text("skip me")

    @environment_card(name="desktop")
    class Desktop(Env):
        @tool()
        def cua_bash(self, script: str) -> str:
            """Run a bash script on the desktop; the reference controller's envelope."""
            done = subprocess.run(["bash", "-c", script], cwd=desktop, capture_output=True, text=True, timeout=30)
            return json.dumps({"output": done.stdout, "error": done.stderr, "returncode": done.returncode})

        @tool()
        def cua_get_file(self, path: str) -> str:
            """A file's bytes, base64."""
            return base64.b64encode(Path(path).read_bytes()).decode()

    @environment_card(name="plain")
    class Plain(Env):
        @tool()
        def ping(self) -> str:
            """Answer pong."""
            return "pong"

    with deployed_env(run, "desk", {"desktop": Desktop()}), deployed_env(run, "plain", {"plain": Plain()}):
        run.execute(run.step({"id": "grab", "type": "collect_artifacts", "env_id": "desk",
                              "base_path": str(desktop / "out"), "exclude_basenames": ["core"]}))
        run.execute(run.step({"id": "listed", "type": "collect_artifacts", "env_id": "desk",
                              "base_path": str(desktop / "out"), "artifact_paths": ["report.md", "gone.txt"],
                              "allow_missing": True}))
        with pytest.raises(StepError, match="has no cua_bash tool: collecting from an env needs a computer-use"):
            run.execute(run.step({"id": "nope", "type": "collect_artifacts", "env_id": "plain"}))
    grabbed = run.metadata["collected_artifacts"]["grab"]
    assert grabbed["env_id"] == "desk" and sorted(grabbed["files"]) == ["report.md", "sub/data.bin"]
    assert grabbed["excluded"] == [str(desktop / "out" / "core")]
    from agentenv_local.artifacts import read_files

    doc = run.store.documents.find("artifacts", grabbed["id"], grabbed["version"])
    assert read_files(run.store, doc) == {"report.md": b"# done", "sub/data.bin": b"\x00\x01\xff"}
    listed = run.metadata["collected_artifacts"]["listed"]
    assert sorted(listed["files"]) == ["report.md"] and listed["missing"] == ["gone.txt"]


# --- env_step_id: which deploy_env step's deployment of an env a step works on --------------------------------

def test_env_step_id_picks_the_deployment_a_deploy_env_step_made(run):
    from kits.data_plane import rpc
    from kits.env_steps import deployed_env, example, seed

    from agentenv_local.artifacts import universe_members

    with deployed_env(run, "office", {"mail": example("mail")}) as (seeded, _a), \
            deployed_env(run, "office", {"mail": example("mail")}) as (_empty, _b):
        first, second = run.state["deployed_envs"]
        first["step_id"], second["step_id"] = "env_a", "env_b"
        rpc(seeded, "data/add", {"parts": [{"kind": "data", "data": seed("mail")}]}, child="mail")
        for step_id, env_step_id in (("snap_a", "env_a"), ("snap_latest", None)):
            run.execute(run.step({"id": step_id, "type": "snapshot_env", "env_id": "office",
                                  **({"env_step_id": env_step_id} if env_step_id else {})}))
        with pytest.raises(StepError, match=r"env_step_id 'env_c' names no deployment of env 'office' "
                                            r"\(deployed by: env_a, env_b\)"):
            run.execute(run.step({"id": "snap_c", "type": "snapshot_env", "env_id": "office", "env_step_id": "env_c"}))
    sizes = {}
    for step_id in ("snap_a", "snap_latest"):
        ref = run.metadata["env_snapshotted_universes"][step_id]
        doc = run.store.documents.find("artifacts", ref["id"], ref["version"])
        [member] = universe_members(run.store, doc)
        sizes[step_id] = len(member.data)
    assert sizes["snap_a"] > sizes["snap_latest"]  # env_a holds the seeded mail; the latest (env_b) is empty


# --- prompt_agent.user_a2a_url: a counterpart at a URL instead of a deployed user simulator --------------------

def test_user_a2a_url_talks_to_a_counterpart_the_run_did_not_deploy(run):
    from kits.agents import serving_agent

    from agentenv_local.agents.scripted import ScriptedAgent

    solver_plan = {"turns": [[{"reply": "first: {input}"}], [{"reply": "second: {input}"}]]}
    person_plan = {"turns": [[{"reply": "tell me more"}]]}
    with serving_agent(ScriptedAgent(plan=solver_plan)) as solver, \
            serving_agent(ScriptedAgent(plan=person_plan)) as person:
        run.state["deployed_agents"].append({"agent_name": "solver", "a2a_url": solver})
        step = run.step({"id": "chat", "type": "prompt_agent", "agent_name": "solver", "prompt": "hi",
                         "max_conversation_turns": 2, "user_a2a_url": person + "/a2a"})
        assert step.config_problems() == []
        run.execute(step)
    [response] = run.state["prompt_responses"]
    assert [(t["response"], t.get("user_reply")) for t in response["turns"]] == [
        ("first: hi", "tell me more"), ("second: tell me more", None)]
    assert run.step({"id": "c", "type": "prompt_agent", "prompt": "hi", "max_conversation_turns": 2}
                    ).config_problems()[0].endswith("a human agent, or user_a2a_url")


def test_deploy_agent_env_step_id_binds_the_agent_to_that_deployment(run):
    import asyncio

    from kits.agents import serving_agent
    from kits.env_steps import deployed_env, example

    from agentenv_local.agents.client import A2AClient
    from agentenv_local.agents.scripted import ScriptedAgent

    one, two = {"mail": example("mail")}, {"mail": example("mail")}
    with deployed_env(run, "office", one), deployed_env(run, "office", two), \
            serving_agent(ScriptedAgent(plan=[{"reply": "hi"}])) as url:
        first, second = run.state["deployed_envs"]
        first["step_id"], second["step_id"] = "env_a", "env_b"
        run.execute(run.step({"id": "agent", "type": "deploy_agent", "agent_name": "solver", "a2a_url": url,
                              "env_ids": ["office"], "env_step_id": "env_a"}))

        async def servers() -> str:
            async with A2AClient(url) as client:
                return json.dumps(await client.mcp_config_list())

        listed = asyncio.run(servers())
    assert first["mcp_url"] in listed and second["mcp_url"] not in listed
