"""`sandbox.default = "auto"` decides from files alone where Podman is installed but not set up (issue 16
item 6): the process provider with a one-line note naming `agentenv sandbox setup`, no Podman service
started and so no container start tried; an explicit `--sandbox podman` fails saying what to run.

Each run is the console script in a subprocess whose XDG_CONFIG_HOME is a fresh folder (so it sees no
setup record and no probed fixes of this machine) and whose CONTAINERS_CONF is an empty file (a
configuration without this machine's fixes): the real setup other tests use is never touched.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

AGENTENV = Path(sys.executable).with_name("agentenv")


def _project(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    project = tmp_path / "proj"
    (project / ".agentenv").mkdir(parents=True)
    (tmp_path / "empty.conf").write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTENV_")}
    env.update(XDG_CONFIG_HOME=str(tmp_path / "xdg"), CONTAINERS_CONF=str(tmp_path / "empty.conf"))
    return project, env


def _run(project: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(AGENTENV), "run", "hello", *args], cwd=project, env=env, capture_output=True,
                          text=True, timeout=300, check=False)


def _service_started(project: Path) -> bool:
    """Our provider writes its service log before it starts a Podman service (needed for any container)."""
    return (project / ".agentenv" / "podman" / "service.log").exists()


def _setup_notes(proc: subprocess.CompletedProcess) -> list[str]:
    """The run's fallback notes (the note is one line of the run's progress output)."""
    return [line for line in (proc.stdout + proc.stderr).splitlines()
            if "using the process sandbox provider" in line]


def test_auto_without_setup_takes_process_and_says_how(tmp_path, podman_base_image):
    project, env = _project(tmp_path)
    proc = _run(project, env)
    assert proc.returncode == 0, proc.stderr
    notes = _setup_notes(proc)
    assert len(notes) == 1, proc.stderr
    assert "not set up" in notes[0] and "`agentenv sandbox setup`" in notes[0]
    assert not _service_started(project), "auto started a Podman service to decide"
    assert "passed" in proc.stdout


def test_auto_with_a_changed_configuration_takes_process(tmp_path, podman_base_image):
    project, env = _project(tmp_path)
    marker = tmp_path / "xdg" / "agentenv" / "containers.probed"
    marker.parent.mkdir(parents=True)
    # set up once with another configuration than the empty one in force now
    marker.write_text(json.dumps({"at": 0, "conf": "0123456789abcdef"}))
    proc = _run(project, env)
    assert proc.returncode == 0, proc.stderr
    notes = _setup_notes(proc)
    assert len(notes) == 1 and "changed since it was set up" in notes[0], proc.stderr
    assert "`agentenv sandbox setup`" in notes[0]
    assert not _service_started(project)


def test_auto_after_setup_with_the_same_configuration_uses_podman(tmp_path, podman_base_image, monkeypatch):
    """The fingerprint setup records matches the one auto computes, so a set-up machine keeps Podman."""
    from sandboxes.podman import readiness

    project, env = _project(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", env["XDG_CONFIG_HOME"])
    monkeypatch.setenv("CONTAINERS_CONF", env["CONTAINERS_CONF"])
    readiness.mark_set_up({})
    assert readiness.not_ready_reason({}) is None
    (tmp_path / "empty.conf").write_text("[containers]\n")
    assert "changed since" in (readiness.not_ready_reason({}) or "")
    assert readiness.not_ready_reason({"containers_conf": str(tmp_path / "empty.conf")}) is None


def test_explicit_podman_without_the_fixes_fails_naming_setup(tmp_path, podman_base_image):
    from sandboxes.podman.engine import auto_conf_path

    if not auto_conf_path().is_file():
        pytest.skip("this machine's Podman needs no fixes, so a configuration without them works")
    project, env = _project(tmp_path)
    marker = tmp_path / "xdg" / "agentenv" / "containers.probed"
    marker.parent.mkdir(parents=True)
    marker.write_text("{}")  # a record from before fingerprints: trusted, so the container start is tried
    proc = _run(project, env, "--sandbox", "podman")
    assert proc.returncode != 0
    assert "`agentenv sandbox setup`" in proc.stdout + proc.stderr
    assert not _setup_notes(proc), "an explicit podman must not fall back to process"


def test_a_service_started_before_the_fixes_is_restarted_with_them(tmp_path, podman_base_image, monkeypatch,
                                                                     provider_factory):
    """On a machine never set up, the first explicit podman sandbox probes the fixes; a Podman service this
    provider had already started (without them) must not be the one that starts the container."""
    from agentenv_local.sandbox_api import SandboxSpec
    from sandboxes.podman.engine import auto_conf_path
    from sandboxes.podman.readiness import marker_path

    if not auto_conf_path().is_file():
        pytest.skip("this machine's Podman needs no fixes")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("CONTAINERS_CONF", raising=False)
    provider = provider_factory()
    assert "not set up" in (provider.unusable_reason() or "")
    provider.service.client()  # started now, before any fixes exist
    started_before = provider.service._proc

    async def make_and_run() -> tuple[int, str]:
        sandbox = await provider.create(SandboxSpec(name="box"))
        try:
            result = await sandbox.exec("echo ok")
            return result.exit_code, result.stdout
        finally:
            await sandbox.terminate()
            await provider.aclose()

    exit_code, out = asyncio.run(make_and_run())
    assert (exit_code, out.strip()) == (0, "ok")
    assert marker_path().is_file() and auto_conf_path().is_file()  # probed into this test's config folder
    assert started_before is not None and started_before.poll() is not None  # the fix-less service was stopped
