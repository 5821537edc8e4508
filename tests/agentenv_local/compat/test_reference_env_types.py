"""The reference's env types that cannot run offline (computer_driver, website, service_db): its drivers bundle,
copied unchanged, is accepted; a stored env of such a type keeps its record; deploying one, or a dry run of a task
that would, fails with one line saying what it needs. Real `agentenv` subprocesses in a fresh project."""

from __future__ import annotations

import json

import pytest
from kits.hub import cli
from kits.reference_bundles import copy_reference_bundle

from agentenv_local.bundles.loader import load_bundle

NEEDS = {"computer_driver": "agentenv cannot create computers",
         "website": "runs no browser env",
         "service_db": "db-web and db-mcp images"}


def test_the_drivers_bundle_is_accepted(tmp_path):
    bundle = load_bundle(copy_reference_bundle("drivers", tmp_path))
    assert bundle.envs["reference"].env.type == "computer_driver"
    assert bundle.env_aliases == {"reference": "reference"}
    done = cli(tmp_path, "run", "./drivers", "--dry-run")
    out = done.stdout + done.stderr
    assert "not an env type" not in out
    assert "has no tasks to run" in out  # as the reference says: it has nothing to run


def test_a_dry_run_of_a_task_deploying_the_driver_says_what_it_needs(tmp_path):
    root = copy_reference_bundle("drivers", tmp_path)
    (root / "tasks").mkdir()
    (root / "tasks" / "t.json").write_text(json.dumps([{"id": "env", "type": "deploy_env", "env_id": "reference"}]))
    for args in (["--dry-run"], []):
        done = cli(tmp_path, "run", "./drivers", *args)
        assert done.returncode == 1
        assert ("tasks/t.json: step 'env': field 'env_id': envs/reference: cannot deploy a computer_driver env "
                "here: it runs inside a computer") in done.stderr
        assert "v1 (new)" not in done.stdout + done.stderr  # nothing was written


@pytest.mark.parametrize("env_type", sorted(NEEDS))
def test_a_stored_env_of_the_type_keeps_its_record_and_its_deploy_says_what_it_needs(tmp_path, env_type):
    folder = tmp_path / "e"
    folder.mkdir()
    extra = {"website": 'backend_image = "be"\nfrontend_image = "fe"\n', "service_db": "",
             "computer_driver": 'module = "driver.py:Driver"\n'}[env_type]
    (folder / "env.toml").write_text(f'type = "{env_type}"\n{extra}')
    (folder / "driver.py").write_text("class Driver: pass\n")
    put = cli(tmp_path, "env", "put", "./e", "--id", "e1")
    assert put.returncode == 0, put.stderr
    stored = json.loads(cli(tmp_path, "env", "get", "--id", "e1", check=True).stdout)["body"]
    assert stored["type"] == env_type
    if env_type == "website":
        assert (stored["backend_image"], stored["frontend_image"]) == ("be", "fe")
    done = cli(tmp_path, "env", "deploy", "--id", "e1")
    assert done.returncode == 1
    [line, hint] = done.stderr.strip().splitlines()
    assert line.startswith(f"Error: env e1: cannot deploy a {env_type} env here: ")
    assert NEEDS[env_type] in line
    assert "deploys with the reference" in hint
