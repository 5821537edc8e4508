"""verify_universe_load_export_roundtrip, combine_universe_verdicts and build_mcp_cli against a real gateway (HTTP
and MCP) in front of tiny envs written here: a faithful data plane round-trips a snapshot, a lossy one fails naming
the lost data; the built CLI is a real script that calls the env's tools through the gateway."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Annotated

from kits.env_steps import deployed_env
from pydantic import Field

from agentenv_local.artifacts import read_files
from agentenv_local.env import DataPart, Env, add_data, environment_card, get_data, reset_data, tool


@environment_card(name="shelf", description="Keeps books.")
class Shelf(Env):
    def __init__(self, keep: int | None = None) -> None:
        self.books: list[str] = []
        self.keep = keep  # how many books a load keeps (None: all): a lossy data plane

    @tool()
    def shelve(self, title: Annotated[str, Field(description="The book's title")]) -> dict:
        """Put a book on the shelf."""
        self.books.append(title)
        return {"count": len(self.books)}

    @reset_data
    def reset(self) -> None:
        self.books.clear()

    @add_data
    def add(self, parts: list) -> None:
        for part in parts:
            self.books.extend(part.data["books"][: self.keep])

    @get_data
    def export(self) -> list:
        return [DataPart(data={"books": list(self.books)})]


def universe(run, books: list[str]) -> dict:
    body = json.dumps({"service": "shelf", "parts": [{"kind": "data", "data": {"books": books}}]}).encode()
    return run.put_artifact("u1", {"shelf.json": body}, extra={"env_snapshot": {"format": "agentenv-env-snapshot/v1",
                                                                                 "services": ["shelf"]}})


def roundtrip(run, **fields) -> dict:
    run.execute(run.step({"id": "rt", "type": "verify_universe_load_export_roundtrip", "env_id": "lib",
                          "universe_artifact_id": "u1", **fields}))
    return run.metadata["verifications"]["universe_compatibility"]


def test_a_faithful_env_round_trips_the_universe(run):
    universe(run, ["Dune", "Emma", "Ulysses"])
    env = Shelf()
    with deployed_env(run, "lib", {"shelf": env}):
        verdict = roundtrip(run, emit_file_artifact_universe=True)
    assert verdict["passed"] is True and verdict["compatible"] is True and verdict["score"] == 1
    assert [r["result"] for r in verdict["results"]] == [True, True]
    assert env.books == ["Dune", "Emma", "Ulysses"]
    exported = run.store.documents.get("artifacts", verdict["exported_universe_artifact_id"])
    assert json.loads(read_files(run.store, exported)["shelf.json"])["parts"][0]["data"]["books"] == env.books
    bundle = run.store.documents.get("artifacts", verdict["file_artifact_universe_id"])
    assert sorted(bundle["body"]["files"]) == ["export_1/shelf.json", "export_2/shelf.json", "original/shelf.json"]
    stamped = run.store.records.get("env_metadata", "lib@v1")["body"]["gates"]
    assert stamped["universe_compatibility:u1@v1"]["compatible"] is True


def test_a_lossy_env_fails_naming_what_it_lost_and_the_judge_can_only_lower_it(run):
    universe(run, ["Dune", "Emma", "Ulysses"])
    with deployed_env(run, "lib", {"shelf": Shelf(keep=2)}):
        verdict = roundtrip(run, persist_result=False)
        assert verdict["passed"] is False and verdict["services"]["shelf"]["compatible"] is False
        [lost] = [r["justification"] for r in verdict["results"] if not r["result"]]
        assert "changed by load and export" in lost and "3 item(s) became 2" in lost
        assert run.store.records.find("env_metadata", "lib@v1") is None  # persist_result=false: not stamped yet
        run.metadata["verifications"]["judge"] = {"score": 1.0, "results": [{"result": True, "score": 1}]}
        run.execute(run.step({"id": "c", "type": "combine_universe_verdicts", "env_id": "lib",
                              "universe_artifact_id": "u1", "universe_artifact_version": 1,
                              "judge_verifier_id": "judge"}))
    stamped = run.store.records.get("env_metadata", "lib@v1")["body"]["gates"]["universe_compatibility:u1@v1"]
    assert stamped["compatible"] is False and stamped["agent_judge"]["passed"] is True


def test_a_failing_judge_makes_a_good_round_trip_incompatible(run):
    universe(run, ["Dune"])
    with deployed_env(run, "lib", {"shelf": Shelf()}):
        roundtrip(run, persist_result=False)
        run.metadata["verifications"]["judge"] = {"score": 0.0, "results": [{"result": False, "score": 0}]}
        run.execute(run.step({"id": "c", "type": "combine_universe_verdicts", "env_id": "lib",
                              "universe_artifact_id": "u1", "universe_artifact_version": 1,
                              "judge_verifier_id": "judge"}))
    verdict = run.metadata["verifications"]["universe_compatibility"]
    assert verdict["compatible"] is False and verdict["passed"] is False and verdict["score"] == 0
    assert "the judge 'judge'" in verdict["results"][-1]["criterion"]


def test_build_mcp_cli_makes_a_script_that_calls_the_tools(run, tmp_path):
    env = Shelf()
    with deployed_env(run, "lib", {"shelf": env}):
        run.execute(run.step({"id": "cli", "type": "build_mcp_cli", "env_id": "lib", "command_name": "shelf-cli"}))
        ref = run.metadata["cli_artifact"]
        assert ref == {"id": "lib-cli", "version": 1, "type": "cli", "command_name": "shelf-cli"}
        doc = run.store.documents.get("artifacts", "lib-cli")
        assert doc["body"]["cli"]["entrypoint"] == "bin/shelf-cli" and doc["body"]["cli"]["tools"] == ["shelve"]
        script = tmp_path / "shelf-cli"
        script.write_bytes(read_files(run.store, doc)["bin/shelf-cli"])

        def cli(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=60)

        assert "shelve: Put a book on the shelf." in cli("--help").stdout
        assert cli("list").stdout.startswith("shelve - Put a book")
        done = cli("shelve", "title=Dune")
        assert done.returncode == 0 and json.loads(done.stdout)["count"] == 1
        assert cli("shelve", "--json", '{"title": "Emma"}').returncode == 0
        assert env.books == ["Dune", "Emma"]
        wrong = cli("shelve", "Dune")
        assert wrong.returncode != 0 and "key=value" in wrong.stderr
        assert cli("no_such_tool").returncode != 0


def test_build_mcp_cli_refuses_a_command_name_that_is_not_a_file_name(run):
    step = run.step({"id": "cli", "type": "build_mcp_cli", "env_id": "lib", "command_name": "../evil"})
    assert "must be a file name" in step.config_problems()[0]
