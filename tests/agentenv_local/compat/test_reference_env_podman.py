"""The reference's env folders in Podman: with a container sandbox provider (`--sandbox podman`, or the reference's
`sandbox_type: "local"`, which is podman for containers) their server.py runs in a container of agentenv's
runtime image with the stand-in for agentenv_protocol, reached through the gateway by our MCP client, and the
container is removed at teardown; `--sandbox process` loads it into the hub (issue 16: where it can be, else a
subprocess). Real Podman, real `agentenv`."""

from __future__ import annotations

import hashlib
import json

import pytest
from kits.env_deploy import call_tool, on_hub, result_text
from kits.hub import cli
from kits.podman import project_containers
from kits.reference_bundles import copy_reference_bundle

from agentenv_local.artifacts import read_folder


def _containers_of(project) -> list[str]:
    return project_containers(hashlib.sha256(str((project / ".agentenv").resolve()).encode()).hexdigest()[:12])


@pytest.fixture
def session(tmp_path, podman_base_image):
    from kits.env_deploy import open_hub_session

    with open_hub_session(tmp_path) as s:
        yield s


def test_the_mail_env_runs_in_a_container_and_answers_through_the_gateway(session, tmp_path):
    from agentenv_local.hosting.envs import load_env_folder
    from agentenv_local.hosting.envs.store import env_body

    folder = copy_reference_bundle("mail-mcp", tmp_path) / "envs" / "mail"
    env, _raw, _declared = load_env_folder(folder)
    session.store.documents.put("envs", "mail", env_body(session.store, "mail", env, read_folder(folder),
                                                         default_name="mail"))
    record = on_hub(session, session.hub.envs.deploy("mail", sandbox_type="podman"), timeout=600)
    try:
        [child] = record["children"]
        assert child["kind"] == "container" and child["sandbox_type"] == "podman"
        assert child["image"].startswith("localhost/agentenv/env-runtime:")
        names, result = call_tool(record["mcp_url"], "search_emails", {"query": "invoice"})
        assert names == ["search_emails"]
        assert "INV-1042" in result_text(result)
        assert _containers_of(tmp_path)
    finally:
        on_hub(session, session.hub.envs.teardown(record["instance_id"]))
    assert _containers_of(tmp_path) == []


def _run(tmp_path, name: str, *flags: str) -> dict:
    done = cli(tmp_path, "run", f"./{name}", "--json", *flags, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    [run] = json.loads(done.stdout)
    assert run["status"] == "passed", run
    [env] = run["context"]["deployed_envs"]
    return env


@pytest.mark.parametrize(("name", "flags", "kind"), [
    ("echo-mcp", (), "container"),  # its deploy_env says sandbox_type "local": podman, for a container
    ("echo-mcp", ("--sandbox", "process"), "in_process"),
    ("mail-mcp", ("--sandbox", "podman"), "container"),
])
def test_the_reference_bundle_runs_unchanged_on_podman_or_not(tmp_path, podman_base_image, name, flags, kind):
    copy_reference_bundle(name, tmp_path)
    env = _run(tmp_path, name, *flags)
    assert [child["kind"] for child in env["children"]] == [kind]
    assert _containers_of(tmp_path) == []
