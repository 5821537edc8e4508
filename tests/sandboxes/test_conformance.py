"""The provider conformance suite (tests/kits/sandbox_conformance.py) against the two built-in providers: `process`
and `podman` (real Podman; skipped without it as the other Podman tests are, a failure under
AGENTENV_REQUIRE_PODMAN=1)."""

from __future__ import annotations

import asyncio

import pytest
from kits.sandbox_conformance import SandboxConformance, Target

from sandboxes.process import ProcessSandboxProvider


class TestProcessConformance(SandboxConformance):
    @pytest.fixture
    def target(self, tmp_path):
        return Target(lambda: ProcessSandboxProvider(tmp_path / "state"))


@pytest.mark.podman
class TestPodmanConformance(SandboxConformance):
    @pytest.fixture
    def target(self, tmp_path, podman_base_image):
        from sandboxes.podman import PodmanSandboxProvider
        from sandboxes.podman.service import stop_project_service

        made: list[PodmanSandboxProvider] = []

        def make() -> PodmanSandboxProvider:
            provider = PodmanSandboxProvider(tmp_path / ".agentenv", {"pool_size": 0})
            made.append(provider)
            return provider

        yield Target(make, spec_defaults={"memory_mb": 256})
        for provider in made:  # as tests/sandboxes/podman/conftest.py's provider_factory cleans up
            for row in provider.containers():
                provider.remove_sync(row["sandbox_id"])
            provider.wait_removals()
            asyncio.run(provider.aclose())
        stop_project_service(tmp_path / ".agentenv")
