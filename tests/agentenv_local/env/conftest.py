"""Fixtures for the env SDK tests; helpers live in agentenv_env_testkit.py."""

from __future__ import annotations

import pytest
from agentenv_env_testkit import ECHO, NOTES


@pytest.fixture()
def echo_env():
    from agentenv_local.env import load_env

    return load_env(ECHO)


@pytest.fixture()
def notes_env():
    from agentenv_local.env import load_env

    return load_env(NOTES)
