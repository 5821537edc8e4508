"""The podman provider end to end through the CLI: `run hello --sandbox podman`, `sandbox list|exec|logs`,
`kill -9` of the hub mid-run and `sandbox prune`, Podman missing, `auto` falling back, and `image build`."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest
from kits.hub import (
    Background,
    bash_check,
    clean_env,
    cli,
    deploy,
    gate,
    run_id_of,
    show_json,
    step_status,
    wait_until,
    write_bundle,
)
from kits.podman import containers_left, project_containers

from sandboxes.podman import images
from sandboxes.podman.service import stop_project_service


@pytest.fixture
def project(tmp_path, podman_base_image):
    root = tmp_path / "proj"
    root.mkdir()
    yield root
    state = root / ".agentenv"
    project_id = hashlib.sha256(str(state.resolve()).encode()).hexdigest()[:12]
    names = project_containers(project_id)
    if names:
        subprocess.run(["podman", "rm", "-f", *names], capture_output=True)
    stop_project_service(state)  # one-shot commands leave the project's Podman service running for the next


def project_id(root: Path) -> str:
    return hashlib.sha256(str((root / ".agentenv").resolve()).encode()).hexdigest()[:12]


def sandboxes(root: Path) -> list[dict]:
    return json.loads(cli(root, "sandbox", "list", "--provider", "podman", "--json", check=True).stdout)


def test_run_hello_in_podman_and_leave_nothing(project):
    out = cli(project, "run", "hello", "--sandbox", "podman", check=True)
    assert "passed (hello: 1)" in out.stdout
    # the sandbox (removed by a detached process, after the command exited) and the warm pool are gone
    assert containers_left(project_id(project)) == []
    assert sandboxes(project) == []
    run_id = json.loads(cli(project, "runs", "list", "--json", check=True).stdout)[0]["run_id"]
    assert show_json(project, run_id)["context"]["deployed_sandboxes"][0]["sandbox_type"] == "podman"


def test_kept_sandbox_exec_logs_and_prune_after_kill9(project, tmp_path):
    cli(project, "run", "hello", "--sandbox", "podman", "--keep", check=True)
    kept = sandboxes(project)
    assert len(kept) == 1 and kept[0]["sandbox_name"] == "box"
    kept_id = kept[0]["sandbox_id"]
    shown = cli(project, "sandbox", "exec", kept_id, "--", "cat", "/app/greeting/hello.txt", check=True)
    assert "hello" in shown.stdout
    assert cli(project, "sandbox", "exec", kept_id, "exit 7").returncode == 7
    assert cli(project, "sandbox", "logs", kept_id).returncode == 0

    release = tmp_path / "release"
    write_bundle(project, "crashy", {"crashy": [
        deploy(sandbox_type="podman"), bash_check("wait", gate(Path("/app/never"), 120), sandbox_name="box")]})
    run = Background(project, "run", "./crashy", "--sandbox", "podman", env=clean_env())
    try:
        run.wait_to_be_hub()
        run_id = run_id_of(run, project, "crashy")
        wait_until(lambda: step_status(show_json(project, run_id), "wait") == "running", timeout=120,
                   what="the run to reach its slow step")
        before = set(project_containers(project_id(project)))
        run.kill9()
    finally:
        run.stop()
    assert kept_id in before and len(before) >= 2  # the crashed run's sandbox (and maybe warm-pool ones)

    dry = cli(project, "sandbox", "prune", "--dry-run", "--json", check=True)
    doomed = {r["sandbox_id"]: r for r in json.loads(dry.stdout)}
    assert kept_id not in doomed and set(doomed) == before - {kept_id}
    assert set(project_containers(project_id(project))) == before  # a dry run removes nothing
    out = cli(project, "sandbox", "prune", check=True).stdout
    assert f"{len(doomed)} sandbox(es) removed" in out and run_id in out
    assert project_containers(project_id(project)) == [kept_id]
    assert cli(project, "sandbox", "prune", check=True).stdout.strip() == "Nothing to prune."
    assert release.exists() is False


def test_podman_missing_is_explained_and_auto_falls_back(project):
    (project / ".agentenv").mkdir()
    (project / ".agentenv" / "config.toml").write_text(
        '[sandbox.providers.podman]\npodman = "/nonexistent/podman"\n')
    failed = cli(project, "run", "hello", "--sandbox", "podman")
    assert failed.returncode == 1
    text = failed.stdout + failed.stderr
    assert "Podman is not installed" in text and "apt-get install -y podman" in text
    assert "Traceback" not in text
    env = {k: v for k, v in clean_env().items() if k != "AGENTENV_SANDBOX_DEFAULT"}  # the default: auto
    fallback = cli(project, "run", "hello", env=env, check=True)
    assert "passed (hello: 1)" in fallback.stdout
    assert "using the process sandbox provider: podman is not usable here" in fallback.stdout + fallback.stderr


def test_auto_picks_podman_where_it_answers(project):
    env = {k: v for k, v in clean_env().items() if k != "AGENTENV_SANDBOX_DEFAULT"}
    out = cli(project, "run", "hello", "--json", env=env, check=True)
    run_id = json.loads(cli(project, "runs", "list", "--json", check=True).stdout)[0]["run_id"]
    deployed = show_json(project, run_id)["context"]["deployed_sandboxes"]
    assert deployed[0]["sandbox_type"] == "podman", out.stdout


def test_image_build_cached_and_failing(project, tmp_path):
    context = tmp_path / "ctx"
    context.mkdir()
    (context / "Containerfile").write_text("ARG BASE\nFROM ${BASE}\nCOPY note.txt /opt/note.txt\n")
    (context / "note.txt").write_text("one")
    first = cli(project, "image", "build", "t-note", str(context), "--version", "1", check=True)
    assert "built localhost/agentenv/t-note:1" in first.stdout
    again = cli(project, "image", "build", "t-note", str(context), "--version", "1", check=True)
    assert "up to date" in again.stdout
    (context / "note.txt").write_text("two")
    assert "built " in cli(project, "image", "build", "t-note", str(context), "--version", "1", check=True).stdout
    listed = json.loads(cli(project, "image", "list", "--json", check=True).stdout)
    assert any(r["name"] == "t-note" and r["version"] == "1" for r in listed)

    (context / "Containerfile").write_text("ARG BASE\nFROM ${BASE}\nRUN echo about to fail && exit 3\n")
    failed = cli(project, "image", "build", "t-broken", str(context), "--version", "1")
    text = failed.stdout + failed.stderr
    assert failed.returncode == 1 and "Traceback" not in text
    assert "building image localhost/agentenv/t-broken:1 failed at STEP" in text and "exit 3" in text
    assert "about to fail" in text  # the build log's tail
    assert subprocess.run(["podman", "image", "exists", "localhost/agentenv/t-broken:1"]).returncode == 1
    images.remove_image("localhost/agentenv/t-note:1", force=True)
