"""A bundle's typed artifact folders through `agentenv run` (real store, process sandbox): artifact.toml `type`
(environment, cli; the legacy name service) and a root Dockerfile making a docker_image, as the reference infers
them; a second run of unchanged folders stores no new versions; bad keys are refused before anything is written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from kits.warm_cli import run_agentenv

AGENTENV = Path(sys.executable).parent / "agentenv"

TASK = [
    {"id": "box", "type": "deploy_sandbox", "sandbox_name": "box"},
    {"id": "load", "type": "load_artifact", "sandbox_name": "box", "destination_path": "/app/in",
     "artifacts": ["crm-seed", "greet"]},
    {"id": "check", "type": "verify_sandbox", "sandbox_name": "box", "criteria": [
        {"type": "probe_file_contains", "paths": ["in/crm.json"], "expected": "acc-1"},
        {"type": "bash_cmd_succeeds", "bash_cmd": "sh /app/in/bin/greet | grep -q 'hello from greet'"}]},
]


def run(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTENV_")}
    return run_agentenv(list(args), cwd=cwd, env=env, timeout=300)


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def bundle(root: Path) -> Path:
    (root / ".agentenv").mkdir(exist_ok=True)  # this project's own state, whatever lies above tmp_path
    b = root / "typed"
    write(b, {
        "artifacts/crm-seed/artifact.toml": 'type = "environment"\nenvironment_name = "crm"\n',
        "artifacts/crm-seed/crm.json": '{"accounts": [{"id": "acc-1"}]}',
        "artifacts/old-seed/artifact.toml": 'type = "service"\nservice_name = "mail"\n',
        "artifacts/old-seed/mail.json": '{"emails": []}',
        "artifacts/greet/artifact.toml": 'type = "cli"\ncommand_name = "greet"\nentrypoint = "bin/greet"\n',
        "artifacts/greet/bin/greet": "#!/bin/sh\necho hello from greet\n",
        "artifacts/img/Dockerfile": "FROM scratch\nCOPY hello.txt /\n",
        "artifacts/img/hello.txt": "hi\n",
        "tasks/t.json": json.dumps(TASK),
    })
    return b


def stored(cwd: Path) -> dict[str, dict]:
    rows = json.loads(run(cwd, "artifact", "list", "--json").stdout)
    return {r["id"]: r for r in rows}


def test_typed_folders_are_stored_as_their_kinds_and_load_into_a_sandbox(tmp_path):
    b = bundle(tmp_path)
    out = run(tmp_path, "run", str(b), "--sandbox", "process")
    assert out.returncode == 0, out.stdout + out.stderr
    kinds = {i: r["type"] for i, r in stored(tmp_path).items() if i.startswith("@local/")}
    root = next(i for i in kinds if i.endswith("/crm-seed")).rsplit("/", 1)[0]
    assert kinds[f"{root}/crm-seed"] == "environment" and kinds[f"{root}/old-seed"] == "environment"
    assert kinds[f"{root}/greet"] == "cli" and kinds[f"{root}/img"] == "docker_image"
    assert kinds[f"{root}/crm-seed__file"] == "file" and kinds[f"{root}/greet__files"] == "file_artifact_universe"
    doc = json.loads(run(tmp_path, "artifact", "get", "--id", f"{root}/old-seed").stdout)
    assert doc["body"]["environment_name"] == "mail"  # the reference's service_name read as environment_name
    image = json.loads(run(tmp_path, "artifact", "get", "--id", f"{root}/img").stdout)["body"]
    assert image["dockerfile_path"] == "Dockerfile" and sorted(image["files"]) == ["Dockerfile", "hello.txt"]
    again = run(tmp_path, "run", str(b), "--sandbox", "process")
    assert again.returncode == 0, again.stdout + again.stderr
    assert {i: r["version"] for i, r in stored(tmp_path).items()} == {
        i: 1 for i in stored(tmp_path)}  # unchanged folders: no new versions


def test_bad_typed_folders_are_refused_naming_each_problem(tmp_path):
    b = bundle(tmp_path)
    write(b, {"artifacts/crm-seed/artifact.toml": 'type = "environment"\n',
              "artifacts/greet/artifact.toml": 'type = "cli"\ncommand_name = "-x"\nentrypoint = "bin/none"\n',
              "artifacts/uni/artifact.toml": 'type = "environment_universe"\n',
              "artifacts/uni/x.json": "{}"})
    out = run(tmp_path, "run", str(b), "--sandbox", "process")
    text = out.stdout + out.stderr
    assert out.returncode != 0
    assert "artifacts/crm-seed: environment: environment_name is required" in text
    assert "artifacts/greet: cli: command_name '-x' must be a plain name" in text
    assert "artifacts/greet: cli: entrypoint 'bin/none' is not one of this folder's files" in text
    assert "type 'environment_universe' is not supported here" in text
    assert "agentenv artifact environment-universe put" in text
    assert not (tmp_path / ".agentenv" / "store.duckdb").exists() or stored(tmp_path) == {}
