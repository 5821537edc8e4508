"""A `secret:` reference when no secrets store plugin loads: a ConfigError that says why, with a hint (it was a
bare TypeError from calling None)."""

from __future__ import annotations

import pytest

from agentenv_local.config import ConfigError, load_config
from agentenv_local.plugins import registry


def test_a_secret_ref_without_a_secrets_store_is_a_config_error_with_a_hint(tmp_path, monkeypatch):
    (tmp_path / ".agentenv").mkdir()
    (tmp_path / ".agentenv" / "config.toml").write_text('[model]\napi_key = "secret:OPENAI_KEY"\n')
    # The built-in store plugin as a broken install leaves it: its module failed to import.
    secrets = registry().contributions("stores")["secrets"]
    monkeypatch.setattr(secrets, "status", "failed")
    monkeypatch.setattr(secrets, "reason", "ImportError: cannot import name 'SecretStore'")
    config = load_config(tmp_path, environ={"OPENAI_KEY": "sk-not-read"})
    with pytest.raises(ConfigError) as raised:
        config.get("model.api_key")
    assert "no secrets store to read `secret:` references" in str(raised.value)
    assert "ImportError: cannot import name 'SecretStore'" in str(raised.value)
    assert raised.value.hint and "agentenv plugin check" in raised.value.hint
    assert "sk-not-read" not in str(raised.value) + raised.value.hint
