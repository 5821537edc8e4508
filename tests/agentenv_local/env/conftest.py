"""Fixtures for the env SDK tests; helpers live in tests/kits/env_sdk.py."""

from __future__ import annotations

import pytest
from kits.env_sdk import ECHO, NOTES


@pytest.fixture()
def echo_env():
    from agentenv_local.env import load_env

    return load_env(ECHO)


@pytest.fixture()
def notes_env():
    from agentenv_local.env import load_env

    return load_env(NOTES)
