"""--model / --user-model / --judge-model on `run`, `task run` and `eval run`: each role's requests reach the
local model server with the model named on the command line (the server sees each request's `model`), the
options are recorded on the run and kept by a resume, and a value that looks like a key is refused before
anything is written. Real `agentenv` subprocesses in a fresh project, a real FakeModelServer."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from agentenv_local.testing.fake_models import FakeModelServer, RecordedRequest, Reply

SOLVER, CUSTOMER = "You are the solver.", "You are the customer."
STEPS = [
    {"id": "solver", "type": "deploy_agent", "a2a_agent_id": "tool-loop", "agent_name": "solver",
     "system_prompt": SOLVER},
    {"id": "customer", "type": "deploy_agent", "a2a_agent_id": "tool-loop", "agent_name": "customer",
     "model_role": "user", "system_prompt": CUSTOMER},
    {"id": "chat", "type": "prompt_agent", "agent_name": "solver", "prompt": "Hi! What is 6*7?",
     "max_conversation_turns": 2, "user_agent_name": "customer", "depends_on": ["solver", "customer"]},
    {"id": "grade", "type": "rubrics_verifier", "prompt_id": "chat", "depends_on": ["chat"],
     "criteria": [{"id": "answer", "criterion": "The assistant answers."}]},
]
VERDICT = {"criteria": [{"id": "answer", "passed": True, "justification": "it answered"}]}


class Judge:
    """Answers the judge (a request asking for a schema) with a verdict, or an error while `failing`."""

    def __init__(self) -> None:
        self.failing = False

    def __call__(self, request: RecordedRequest) -> Reply:
        if request.response_schema is not None:
            return Reply(status=500, error_message="judge down") if self.failing else Reply.structured(VERDICT)
        return Reply(text="42")


def role_of(request: RecordedRequest) -> str:
    if request.response_schema is not None:
        return "judge"
    return "solver" if SOLVER in request.system else "customer" if CUSTOMER in request.system else "?"


def models_by_role(requests: list[RecordedRequest]) -> dict[str, set[str | None]]:
    seen: dict[str, set[str | None]] = {}
    for request in requests:
        assert request.valid, request.problems
        seen.setdefault(role_of(request), set()).add(request.model)
    return seen


@pytest.fixture
def served(project) -> Iterator[tuple[FakeModelServer, Judge]]:
    judge = Judge()
    with FakeModelServer(api_key="sk-test-o3-models", responder=judge) as server:
        project.write(".agentenv/config.toml",
                      f'[model]\nbase_url = "{server.base_url}"\napi_key = "sk-test-o3-models"\n'
                      'default = "cfg-default"\nmax_retries = 0\n[model.roles]\nuser = "cfg-user"\n'
                      'judge = "cfg-judge"\n')
        project.write("b/README.md", "# b\n")
        project.write("b/tasks/t.json", json.dumps(STEPS))
        yield server, judge


def test_run_without_flags_uses_the_configured_models(project, served):
    server, _ = served
    [run] = project.json("run", "./b")
    assert run["status"] == "passed", run
    assert models_by_role(server.requests) == {"solver": {"cfg-default"}, "customer": {"cfg-user"},
                                               "judge": {"cfg-judge"}}
    assert run["overrides"] == {}


def test_run_flags_choose_each_roles_model_and_are_recorded(project, served):
    server, _ = served
    [run] = project.json("run", "./b", "--model", "m-solver", "--user-model", "m-user", "--judge-model", "m-judge")
    assert run["status"] == "passed", run
    assert models_by_role(server.requests) == {"solver": {"m-solver"}, "customer": {"m-user"}, "judge": {"m-judge"}}
    wanted = {"agent_model": "m-solver", "user_model": "m-user", "judge_model": "m-judge"}
    assert run["overrides"] == wanted
    assert run["context"]["metadata"]["user_overrides"] == wanted
    assert run["context"]["prompt_responses"][0]["model"] == "m-solver"
    assert run["verifications"]["grade"]["judge"]["model"] == "m-judge"
    assert "sk-test-o3-models" not in json.dumps(run)



def test_the_endpoints_headers_reach_every_model_request_and_no_stored_byte(project, served):
    """[model.headers]: the tool-loop solver and customer send them with their model requests (deploy_agent hands
    them over as write-only model_headers), as the judge does; the run stores neither the values nor the key."""
    server, _ = served
    value = "team-header-value-7f3a"
    config = project.root / ".agentenv" / "config.toml"
    config.write_text(config.read_text() + f'[model.headers]\nX-Team = "{value}"\n')
    [run] = project.json("run", "./b")
    assert run["status"] == "passed", run
    assert set(models_by_role(server.requests)) == {"solver", "customer", "judge"}
    assert {request.headers.get("x-team") for request in server.requests} == {value}
    shown = project.cli("runs", "show", run["run_id"], "--json").stdout
    assert value not in shown and "sk-test-o3-models" not in shown

def test_task_run_and_eval_run_take_the_flags_and_the_agent_model_alias(project, served):
    server, _ = served
    project.cli("task", "create", "b/tasks/t.json", "--id", "t1")
    [run] = project.json("task", "run", "--id", "t1", "--agent-model", "m-a", "--judge-model", "m-j")
    assert run["status"] == "passed", run
    assert models_by_role(server.requests) == {"solver": {"m-a"}, "customer": {"cfg-user"}, "judge": {"m-j"}}

    before = len(server.requests)
    project.write("e.json", json.dumps([{"task_id": "t1"}]))
    project.cli("eval", "create", "e.json", "--id", "e1")
    [run] = project.json("eval", "run", "--id", "e1", "--model", "m-e", "--user-model", "m-u")
    assert run["status"] == "passed", run
    assert models_by_role(server.requests[before:]) == {"solver": {"m-e"}, "customer": {"m-u"}, "judge": {"cfg-judge"}}


def test_resume_keeps_the_runs_models(project, served):
    server, judge = served
    judge.failing = True
    [run] = project.json("run", "./b", "--judge-model", "m-judge", code=1)
    assert run["status"] == "error" and "judge down" in run["error"], run
    judge.failing = False
    before = len(server.requests)
    project.cli("runs", "resume", run["run_id"])
    again = project.json("runs", "show", run["run_id"])
    assert again["status"] == "passed", again
    assert models_by_role(server.requests[before:]) == {"judge": {"m-judge"}}  # only the judge ran again


@pytest.mark.parametrize("flag, value, why", [
    ("--model", "sk-proj-abcdefghijklmnop", "looks like an API key"),
    ("--judge-model", "3f9a0c7b1d2e4f6a8b9c0d1e2f3a4b5c", "looks like an API key"),
    ("--user-model", "secret:OPENAI_KEY", "is a reference"),
    ("--model", "two words", "is not a model name"),
])
def test_a_value_that_is_not_a_model_name_is_refused_writing_nothing(project, served, flag, value, why):
    out = project.cli("run", "./b", flag, value, code=1)
    assert f"Error: {flag}" in out.stderr and why in out.stderr, out.stderr
    if "API key" in why:  # a key is never echoed whole
        assert value not in out.stderr + out.stdout
    assert project.stored()["runs"] == 0 and not project.stored()["documents"]


def test_the_summary_names_the_models_and_the_flags_need_a_bundle(project, served):
    out = project.cli("run", "./b", "--model", "m-solver", "--judge-model", "m-judge")
    assert "Models named for this run: solver m-solver, judge m-judge." in out.stdout
    refused = project.cli("run", "--user-model", "m-user", code=2)
    assert "--model, --user-model and --judge-model need a BUNDLE to run" in refused.stderr
