"""For every test: no AGENTENV_* setting of the developer's shell leaks in. Tests find their project
from tmp_path (and subprocesses inherit the cleaned environment).

Runs use the `process` sandbox provider unless a test says otherwise: the default (`auto`) would pick
Podman wherever it answers, which the Podman tests under tests/sandboxes/podman ask for explicitly.

This folder is on sys.path, so every test imports the shared kits as `from kits.<area> import ...` (tests/kits/)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

HERE = str(Path(__file__).resolve().parent)
# Read before the autouse fixture below clears AGENTENV_*: .ci/run sets it so Podman tests fail, not skip.
REQUIRE_PODMAN = os.environ.get("AGENTENV_REQUIRE_PODMAN") == "1"
if HERE not in sys.path:
    sys.path.insert(0, HERE)


def _stray_project_above(folder: Path) -> Path | None:
    """A `.agentenv/` in a parent of the tests' temporary folders: every test project without its own would
    find it walking up, and the tests would share one store and hub."""
    for parent in folder.resolve().parents:
        if (parent / ".agentenv").is_dir():
            return parent / ".agentenv"
    return None


@pytest.fixture(scope="session", autouse=True)
def _tests_share_no_project(tmp_path_factory):
    stray = _stray_project_above(tmp_path_factory.getbasetemp())
    if stray is not None:
        pytest.exit(f"{stray} makes every test project share one store: remove it (after `agentenv down` there)",
                    returncode=3)
    yield
    left = _stray_project_above(tmp_path_factory.getbasetemp())
    assert left is None, f"a test left {left} above the temporary folders: it must make its project in tmp_path"


@pytest.fixture(scope="session", autouse=True)
def _podman_left_clean(tmp_path_factory):
    """At the end of the session: stop the Podman services tests' one-shot commands left running (each exits
    by itself after its idle time, but CI's machine is left clean now) and remove their containers."""
    yield
    if shutil.which("podman") is not None:
        from kits.podman import clean_up_podman_under

        clean_up_podman_under(tmp_path_factory.getbasetemp())


@pytest.fixture(autouse=True)
def _no_agentenv_settings(monkeypatch):
    for key in list(os.environ):
        if key.startswith("AGENTENV_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("AGENTENV_SANDBOX_DEFAULT", "process")


@pytest.fixture(scope="session")
def podman_base_image():
    """The base image ref, with Podman set up (base image built once, machine fixes probed)."""
    if shutil.which("podman") is None:
        if REQUIRE_PODMAN:
            pytest.fail("AGENTENV_REQUIRE_PODMAN=1 but podman is not installed (scripts/setup.sh --test installs it)")
        pytest.skip("podman is not installed (scripts/setup.sh --test installs it)")
    from sandboxes.podman import images
    from sandboxes.podman.engine import auto_conf_path, configure

    base = images.ensure_base_image({})
    marker = auto_conf_path().with_suffix(".probed")
    if not marker.exists():
        configure(base, {})
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text("{}")
    return base


@pytest.fixture
def hub(tmp_path):
    """This test process as the hub (an InProcessHub, tests/kits/hub.py) of a
    project in tmp_path/proj: a real DuckDB file and the real runner."""
    from kits.hub import InProcessHub

    project = tmp_path / "proj"
    project.mkdir()
    h = InProcessHub(project)
    yield h
    h.close()
