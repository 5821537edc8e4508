"""Config tests check the built-in defaults themselves: no sandbox setting from the root conftest."""

import pytest


@pytest.fixture(autouse=True)
def _pure_defaults(monkeypatch, _no_agentenv_settings):
    monkeypatch.delenv("AGENTENV_SANDBOX_DEFAULT", raising=False)
