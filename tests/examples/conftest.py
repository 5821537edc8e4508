"""Fixtures for the example env tests; helpers live in tests/kits/example_envs.py."""

from __future__ import annotations

import pytest
from kits.data_plane import rpc
from kits.example_envs import CRM, CRM_SEED, MAIL, MAIL_SEED, load_seed


@pytest.fixture()
def mail_env():
    from agentenv_local.env import load_env

    return load_env(MAIL)


@pytest.fixture()
def crm_env():
    from agentenv_local.env import load_env

    return load_env(CRM)


@pytest.fixture()
def seeded_mail(mail_env):
    assert rpc(mail_env, "data/add", {"parts": [{"kind": "data", "data": load_seed(MAIL_SEED)}]})["result"] == {}
    return mail_env


@pytest.fixture()
def seeded_crm(crm_env):
    assert rpc(crm_env, "data/add", {"parts": [{"kind": "data", "data": load_seed(CRM_SEED)}]})["result"] == {}
    return crm_env


@pytest.fixture
def project(tmp_path):
    """An empty project folder for a bundle's run (the tests' cwd for `agentenv`)."""
    root = tmp_path / "proj"
    root.mkdir()
    return root
