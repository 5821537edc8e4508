"""For every test: no AGENTENV_* setting of the developer's shell leaks in. Tests find their project
from tmp_path (and subprocesses inherit the cleaned environment).

Runs use the `process` sandbox provider unless a test says otherwise: the default (`auto`) would pick
Podman wherever it answers, which the Podman tests under tests/sandboxes/podman ask for explicitly.

This folder is on sys.path, so every test folder imports the kits kept here by name (testkit_servers)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)


@pytest.fixture(autouse=True)
def _no_agentenv_settings(monkeypatch):
    for key in list(os.environ):
        if key.startswith("AGENTENV_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("AGENTENV_SANDBOX_DEFAULT", "process")
