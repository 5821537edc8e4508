"""run_docker_container's refusals, which need no Podman: fields this machine does not grant and a cloud-only
build context are refused before the run, each with its own line; on a process sandbox the step says it needs
Podman and starts nothing. (The build and run on the real Podman: tests/sandboxes/podman/
test_docker_container_in_podman.py.)"""

from __future__ import annotations

import pytest

from agentenv_local.errors import StepError, ValidationError


def test_fields_this_machine_does_not_grant_are_refused_one_line_each(run):
    step = run.step({"id": "box", "type": "run_docker_container", "sandbox_name": "vm",
                     "docker_context_url": "https://example.com/ctx.zip", "privileged": True,
                     "devices": ["/dev/kvm"], "extra_networks": ["lan"], "cap_add": ["NET_ADMIN"],
                     "volumes": ["/:/host"], "network": "host", "shm_size": "1g",
                     "keep_alive_with_base_command": True, "dockerfile_path": "../Dockerfile", "ports": [0]})
    problems = step.config_problems()
    fields = [p.split(":", 1)[0] for p in problems]
    assert fields == ["docker_context_url", "keep_alive_with_base_command", "privileged", "devices", "cap_add",
                      "volumes", "extra_networks", "network", "shm_size", "dockerfile_path", "ports"]
    assert "cloud-only here; put the context in an artifact" in problems[0]
    assert "not granted on this machine (a privileged container gets every capability" in problems[2]
    with pytest.raises(ValidationError):
        run.execute(step)
    nothing = run.step({"id": "b2", "type": "run_docker_container", "sandbox_name": "vm"})
    assert nothing.config_problems() == ["docker_context_artifact_id: names no build context; set it (the artifact "
                                         "holding the Dockerfile and its context)"]
    same = run.step({"id": "b3", "type": "run_docker_container", "sandbox_name": "x", "container_name": "x",
                     "docker_context_artifact_id": "ctx"})
    assert same.config_problems() == [
        "container_name: must differ from sandbox_name (the container is a sandbox of its own)"]


def test_a_process_sandbox_cannot_build_or_run_images(run):
    run.put_artifact("ctx", {"Dockerfile": b"ARG BASE\nFROM ${BASE}\n", "x.txt": b"x"})
    run.execute(run.step({"id": "vm", "type": "deploy_sandbox", "sandbox_name": "vm"}))
    with pytest.raises(StepError, match="run_docker_container needs Podman: sandbox 'vm' is a 'process' sandbox") \
            as info:
        run.execute(run.step({"id": "box", "type": "run_docker_container", "sandbox_name": "vm",
                              "docker_context_artifact_id": "ctx"}))
    assert "podman" in (info.value.hint or "")
    assert [r["sandbox_name"] for r in run.state["deployed_sandboxes"]] == ["vm"]
    assert "deployed_docker_containers" not in run.metadata
