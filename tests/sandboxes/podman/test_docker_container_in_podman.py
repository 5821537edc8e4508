"""run_docker_container on the real Podman, end to end through `agentenv run --sandbox podman`: a Dockerfile from a
bundle artifact is built (build args, FROM the base image through ARG BASE), run as the task container with env
vars, an exposed port and a command, waited for with ready_command, and checked by
run_container_unit_tests_verifier by container_name; a Dockerfile that names a registry image fails saying why;
every container is gone after the run."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from kits.hub import cli, show_json, write_bundle
from kits.podman import containers_left

DOCKERFILE = """ARG BASE
FROM ${BASE}
ARG FLAVOR=plain
COPY site/ /srv/
RUN echo "$FLAVOR" > /srv/flavor.txt
"""

SERVE: list[dict[str, Any]] = [
    {"id": "vm", "type": "deploy_sandbox", "sandbox_name": "vm"},
    {"id": "box", "type": "run_docker_container", "sandbox_name": "vm", "docker_context_artifact_id": "site",
     "ports": [8080], "env_vars": {"GREETING": "hi"}, "build_args": {"FLAVOR": "mint"},
     "command_override": "exec python3 -m http.server 8080 --bind 0.0.0.0 --directory /srv",
     "ready_command": "python3 -c \"import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/')\""},
    {"id": "tests", "type": "run_container_unit_tests_verifier", "container_name": "task-container",
     "command": "test \"$GREETING\" = hi && grep -q mint /srv/flavor.txt && python3 -c \"import urllib.request; "
                "assert b'hello' in urllib.request.urlopen('http://127.0.0.1:8080/index.html').read()\""},
]
REGISTRY: list[dict[str, Any]] = [
    {"id": "vm", "type": "deploy_sandbox", "sandbox_name": "vm"},
    {"id": "box", "type": "run_docker_container", "sandbox_name": "vm", "docker_context_artifact_id": "pulls",
     "dockerfile_path": "build/Dockerfile"},
]


def test_a_task_container_is_built_run_and_checked(tmp_path, podman_base_image):
    project = tmp_path / "proj"
    project.mkdir()
    write_bundle(project, "harbor", {"serve": SERVE, "registry": REGISTRY}, artifacts={
        "site": {"Dockerfile": DOCKERFILE, "site/index.html": "<p>hello</p>\n"},
        "pulls": {"build/Dockerfile": "FROM docker.io/library/alpine:3.19\n"}})
    try:
        out = cli(project, "run", "./harbor", "--sandbox", "podman", timeout=600)
        runs = {r["task_name"]: r for r in json.loads(cli(project, "runs", "list", "--json", check=True).stdout)}
        serve = show_json(project, runs["serve"]["run_id"])
        assert serve["verifications"]["tests"]["score"] == 1, out.stdout + out.stderr
        [container] = serve["context"]["metadata"]["deployed_docker_containers"]
        assert container["container_name"] == "task-container" and container["sandbox_name"] == "vm"
        assert container["image_tag"].startswith("localhost/agentenv/task/task-container:")
        assert container["tunnel_urls"]["8080"].startswith("http://127.0.0.1:")
        records = {r["sandbox_name"]: r for r in serve["context"]["deployed_sandboxes"]}
        assert records["task-container"]["sandbox_mode"] == "container"
        assert records["task-container"]["sandbox_type"] == "podman"
        registry = show_json(project, runs["registry"]["run_id"])
        assert registry["status"] == "error"
        text = out.stdout + out.stderr
        assert "building 'build/Dockerfile' of artifact" in text and "FROM must name a local image" in text
    finally:
        project_id = hashlib.sha256(str((project / ".agentenv").resolve()).encode()).hexdigest()[:12]
        assert containers_left(project_id) == []
