"""Podman tests run against the real Podman of this machine.

Without Podman they are skipped, unless AGENTENV_REQUIRE_PODMAN=1 (set by .ci/run), which turns the
skip into a failure so CI can never pass without having run them (podman_base_image, in tests/conftest.py).
"""

from __future__ import annotations

import asyncio
import os

import pytest


def pytest_collection_modifyitems(config, items):
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.podman)


@pytest.fixture
def provider_factory(tmp_path, podman_base_image):
    """Make PodmanSandboxProviders on a fresh state dir; every container they made is removed after."""
    from sandboxes.podman import PodmanSandboxProvider
    from sandboxes.podman.service import stop_project_service

    made = []

    def make(config=None, state_dir=None):
        provider = PodmanSandboxProvider(state_dir or tmp_path / ".agentenv", {"pool_size": 0, **(config or {})})
        made.append(provider)
        return provider

    yield make
    for provider in made:
        try:
            for row in provider.containers():
                provider.remove_sync(row["sandbox_id"])
        except Exception:
            pass
        provider.wait_removals()
        asyncio.run(provider.aclose())
        stop_project_service(provider.state_dir)  # aclose leaves it running for the next command
