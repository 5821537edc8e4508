"""A docker_image artifact (a stored build context) built into the real Podman's local image store by
typed_artifacts.build_docker_image: the image runs with the artifact's files in it, an unchanged artifact is not
rebuilt, and another kind of artifact is refused."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from kits.env_deploy import hub_session

from agentenv_local import typed_artifacts as typed
from agentenv_local.errors import ValidationError
from agentenv_local.sandbox_api import SandboxSpec

DOCKERFILE = "ARG BASE\nFROM ${BASE}\nCOPY greeting.txt /opt/greeting.txt\n"


def test_a_docker_image_artifact_builds_into_podmans_store(tmp_path, provider_factory):
    provider = provider_factory()
    (tmp_path / ".agentenv").mkdir(exist_ok=True)  # this test's own store, whatever lies above tmp_path
    session = hub_session(tmp_path)
    try:
        image_id = f"@local/demo/img-{uuid.uuid4().hex[:8]}"  # Podman's image store outlives the test's state
        doc = typed.put_docker_image(session.store, image_id, {"Dockerfile": DOCKERFILE.encode(),
                                                               "greeting.txt": b"built from an artifact\n"})
        assert doc["body"]["type"] == "docker_image" and doc["body"]["image_name"].startswith("artifact-local-demo")
        first = typed.build_docker_image(session.store, doc, provider)
        assert first["built"] is True and first["ref"].endswith(f"/{doc['body']['image_name']}:v1")
        again = typed.build_docker_image(session.store, doc, provider)
        assert again["built"] is False and again["ref"] == first["ref"]  # same sources: not rebuilt
        assert asyncio.run(_read_in_a_container(provider, first["ref"])) == b"built from an artifact\n"
        plain = session.store.documents.put("artifacts", "not-an-image", {"type": "file", "files": {}})
        with pytest.raises(ValidationError, match="is a 'file' artifact, not a docker_image"):
            typed.build_docker_image(session.store, plain, provider)
    finally:
        session.close()


async def _read_in_a_container(provider, ref: str) -> bytes:
    sandbox = await provider.create(SandboxSpec(name="img", mode="container", image=ref, memory_mb=256,
                                                command=["sleep", "300"]))
    try:
        return await sandbox.read_file("/opt/greeting.txt")
    finally:
        await sandbox.terminate()
