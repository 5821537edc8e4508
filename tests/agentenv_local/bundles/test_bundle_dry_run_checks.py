"""`agentenv run --dry-run` fails (exit 1, one line per problem naming the step and the field, nothing written)
whenever the run would fail before its first step: an unknown sandbox provider, agent or env, an env of a type
that cannot deploy here; it passes on the bundles that run (examples/ and the reference's hello). What a bundle
holds that means nothing here is printed, one line each. Real `agentenv` subprocesses in a fresh project."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from kits.hub import cli
from kits.reference_bundles import copy_reference_bundle

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
HELLO_STEPS = json.loads((EXAMPLES / "hello" / "tasks" / "hello.json").read_text())


def _bundle(root: Path, steps: list[dict]) -> Path:
    shutil.copytree(EXAMPLES / "hello", root)
    (root / "tasks" / "hello.json").write_text(json.dumps(steps))
    return root


def _dry_run_fails(project: Path, *flags: str) -> list[str]:
    done = cli(project, "run", "./b", "--dry-run", *flags)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert not (project / ".agentenv" / "store.duckdb").exists() or "v1 (new)" not in done.stdout
    return done.stderr.splitlines()


def _line(lines: list[str], *parts: str) -> str:
    found = [ln for ln in lines if all(p in ln for p in parts)]
    assert found, f"no line with {parts} in:\n" + "\n".join(lines)
    return found[0]


def test_an_unknown_provider_fails_the_dry_run(tmp_path):
    steps = [{**HELLO_STEPS[0], "sandbox_type": "no-such-provider"}, *HELLO_STEPS[1:]]
    _bundle(tmp_path / "b", steps)
    lines = _dry_run_fails(tmp_path)
    _line(lines, "tasks/hello.json: step 'box': field 'sandbox_type':", "no-such-provider")


def test_an_unknown_agent_fails_the_dry_run_from_the_step_or_from_agent(tmp_path):
    named = {"id": "named", "type": "deploy_agent", "agent_name": "a", "a2a_agent_id": "no-such-agent"}
    _bundle(tmp_path / "b", [*HELLO_STEPS, named, {"id": "unnamed", "type": "deploy_agent", "agent_name": "b"}])
    lines = _dry_run_fails(tmp_path)
    _line(lines, "step 'named': field 'a2a_agent_id': agent 'no-such-agent' not found", "agentenv agent put")
    assert not [ln for ln in lines if "step 'unnamed'" in ln]  # the scripted agent by default: fine

    lines = _dry_run_fails(tmp_path, "--agent", "ghost")
    _line(lines, "step 'unnamed': field 'a2a_agent_id': agent 'ghost' not found (from --agent)")
    done = cli(tmp_path, "run", "./b", "--dry-run", "--task", "hello")
    assert done.returncode == 1  # every task of the bundle is checked, as every one is stored


def test_an_unknown_env_fails_the_dry_run(tmp_path):
    _bundle(tmp_path / "b", [{"id": "env", "type": "deploy_env", "env_id": "ghost"},
                             {"id": "agent", "type": "deploy_agent", "agent_name": "a", "env_ids": ["ghost2"]}])
    lines = _dry_run_fails(tmp_path)
    _line(lines, "tasks/hello.json: step 'env': field 'env_id': env 'ghost' is not in this bundle (envs/: none)",
          "nor in the store")
    _line(lines, "step 'agent': field 'env_ids[0]': env 'ghost2' is not in this bundle")


def test_a_stored_env_of_a_type_that_cannot_deploy_here_fails_the_dry_run(tmp_path):
    folder = tmp_path / "site"
    folder.mkdir()
    (folder / "env.toml").write_text('type = "website"\nbackend_image = "be"\nfrontend_image = "fe"\n')
    cli(tmp_path, "env", "put", "./site", "--id", "site1", check=True)
    _bundle(tmp_path / "b", [{"id": "env", "type": "deploy_env", "env_id": "site1"}])
    lines = _dry_run_fails(tmp_path)
    _line(lines, "step 'env': field 'env_id': env 'site1': cannot deploy a website env here")


def test_a_stored_env_passes(tmp_path):
    shutil.copytree(EXAMPLES / "support" / "envs" / "mail", tmp_path / "mail")
    cli(tmp_path, "env", "put", "./mail", "--id", "mail1", check=True)
    _bundle(tmp_path / "b", [{"id": "env", "type": "deploy_env", "env_id": "mail1"}])
    done = cli(tmp_path, "run", "./b", "--dry-run")
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.iterdir() if (p / "tasks").is_dir()))
def test_the_example_bundles_pass(tmp_path, name):
    done = cli(tmp_path, "run", str(EXAMPLES / name), "--dry-run")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Would run: tasks/" in done.stdout


def test_the_references_hello_passes_and_its_ignored_entries_are_printed(tmp_path):
    copy_reference_bundle("hello", tmp_path)
    done = cli(tmp_path, "run", "./hello", "--dry-run")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ignored" not in done.stderr  # its README.md is for people

    echo = copy_reference_bundle("echo-mcp", tmp_path)
    done = cli(tmp_path, "run", "./echo-mcp", "--dry-run")
    assert done.returncode == 0, done.stdout + done.stderr
    _line(done.stderr.splitlines(), "note: envs/echo/Dockerfile: ignored (never built here")
    assert (echo / "envs" / "echo" / "Dockerfile").is_file()


def test_every_ignored_entry_is_printed_once(tmp_path):
    root = _bundle(tmp_path / "b", HELLO_STEPS)
    (root / "notes.txt").write_text("x")
    (root / "docs").mkdir()
    (root / "docs" / "a.md").write_text("x")
    (root / "LICENSE").write_text("x")
    (root / "artifacts" / "README.md").write_text("x")
    done = cli(tmp_path, "run", "./b", "--dry-run")
    assert done.returncode == 0, done.stderr
    ignored = [ln for ln in done.stderr.splitlines() if "ignored" in ln]
    assert ignored == [
        "note: docs/: ignored (not a bundle folder kind: envs/, agents/, artifacts/, skills/, tasks/, evals/)",
        "note: notes.txt: ignored (not a bundle folder kind: envs/, agents/, artifacts/, skills/, tasks/, evals/)",
        "note: artifacts/README.md: ignored (each artifact is a folder, artifacts/<name>/)",
    ]
    plan = json.loads(cli(tmp_path, "run", "./b", "--dry-run", "--json", check=True).stdout)
    assert [line.split(":")[0] for line in plan["ignored"]] == ["docs/", "notes.txt", "artifacts/README.md"]

    run = cli(tmp_path, "run", "./b")  # a real run prints them too
    assert run.returncode == 0, run.stderr
    assert sum("ignored" in ln for ln in run.stderr.splitlines()) == 3


def test_an_artifact_an_earlier_step_writes_may_be_read(tmp_path):
    root = _bundle(tmp_path / "b", [{"id": "env", "type": "deploy_env", "env_id": "mail"},
                                    {"id": "snap", "type": "snapshot_env", "env_id": "mail", "snapshot_id": "snap1"},
                                    {"id": "back", "type": "load_artifact", "env_id": "mail", "artifact_id": "snap1"}])
    shutil.copytree(EXAMPLES / "support" / "envs" / "mail", root / "envs" / "mail")
    done = cli(tmp_path, "run", "./b", "--dry-run")
    assert done.returncode == 0, done.stderr  # snapshot_env writes it under that id before load_artifact runs

    steps = json.loads((root / "tasks" / "hello.json").read_text())
    (root / "tasks" / "hello.json").write_text(json.dumps([steps[0], steps[2]]))
    lines = _dry_run_fails(tmp_path)
    _line(lines, "step 'back': field 'artifact_id': artifact 'snap1' is not in this bundle")
