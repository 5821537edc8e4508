"""For every test: no AGENTENV_* setting of the developer's shell leaks in. Tests find their project
from tmp_path (and subprocesses inherit the cleaned environment).

Runs use the `process` sandbox provider unless a test says otherwise: the default (`auto`) would pick
Podman wherever it answers, which the Podman tests under tests/sandboxes/podman ask for explicitly."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def _no_agentenv_settings(monkeypatch):
    for key in list(os.environ):
        if key.startswith("AGENTENV_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("AGENTENV_SANDBOX_DEFAULT", "process")
