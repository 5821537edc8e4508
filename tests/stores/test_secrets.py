"""The secret store: env first, then a private TOML/JSON file; values never in errors."""

from __future__ import annotations

import json

import pytest

from agentenv_local.errors import ConfigError
from stores.secrets import SecretStore


def make(tmp_path, text, name="secrets.toml", mode=0o600):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    path.chmod(mode)
    return path


def test_env_first_then_file(tmp_path):
    path = make(tmp_path, 'A = "from-file"\nB = "b-file"\nPORT = 5432\n')
    store = SecretStore(path, environ={"A": "from-env"})
    assert store.get("A") == "from-env"
    assert store.get("B") == "b-file"
    assert store.get("PORT") == "5432"
    assert store.get("C") is None
    assert store.names() == ["A", "B", "PORT"]


def test_use_env_false_reads_only_the_file(tmp_path):
    path = make(tmp_path, 'A = "from-file"\n')
    store = SecretStore(path, use_env=False, environ={"A": "from-env", "Z": "z"})
    assert store.get("A") == "from-file"
    assert store.get("Z") is None


def test_defaults_to_os_environ(tmp_path, monkeypatch):
    monkeypatch.setenv("SECRET_STORE_TEST_VAR", "v1")
    assert SecretStore(None).get("SECRET_STORE_TEST_VAR") == "v1"


def test_missing_file_means_no_secrets(tmp_path):
    store = SecretStore(tmp_path / "absent.toml", environ={})
    assert store.get("A") is None
    with pytest.raises(ConfigError) as info:
        store.require("A")
    text = info.value.render()
    assert "'A'" in text and "export A=" in text and "absent.toml" in text


def test_json_file(tmp_path):
    path = make(tmp_path, json.dumps({"TOKEN": "tok-json-1"}), name="s.json")
    store = SecretStore(path, environ={})
    assert store.require("TOKEN") == "tok-json-1"


def test_bom_is_tolerated(tmp_path):
    path = tmp_path / "s.toml"
    path.write_bytes('\ufeffA = "x-bom"\n'.encode())
    path.chmod(0o600)
    assert SecretStore(path, environ={}).get("A") == "x-bom"


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_file_readable_by_others_is_refused(tmp_path, mode):
    path = make(tmp_path, 'A = "sk-should-not-leak"\n', mode=mode)
    with pytest.raises(ConfigError) as info:
        SecretStore(path, environ={}).get("A")
    text = info.value.render()
    assert f"chmod 600 {path}" in text
    assert "sk-should-not-leak" not in text


def test_env_value_wins_without_reading_a_bad_file(tmp_path):
    path = make(tmp_path, 'A = "x"\n', mode=0o644)
    assert SecretStore(path, environ={"A": "env"}).get("A") == "env"


def test_nested_values_are_refused(tmp_path):
    path = make(tmp_path, '[group]\nA = "sk-nested-1"\n')
    with pytest.raises(ConfigError) as info:
        SecretStore(path, environ={}).get("A")
    assert "flat" in info.value.message
    assert "sk-nested-1" not in info.value.render()


def test_malformed_files_name_the_position_not_the_text(tmp_path):
    toml = make(tmp_path, 'A = "ok"\nB = sk-unquoted-secret\n')
    with pytest.raises(ConfigError) as info:
        SecretStore(toml, environ={}).get("A")
    text = info.value.render()
    assert "line 2" in text and str(toml) in text
    assert "sk-unquoted-secret" not in text

    js = make(tmp_path, '{"A": "sk-json-secret",}', name="bad.json")
    with pytest.raises(ConfigError) as info:
        SecretStore(js, environ={}).get("A")
    assert "line 1" in info.value.render()
    assert "sk-json-secret" not in info.value.render()


def test_json_file_must_be_an_object(tmp_path):
    path = make(tmp_path, '["a"]', name="s.json")
    with pytest.raises(ConfigError, match="mapping"):
        SecretStore(path, environ={}).get("a")


def test_repr_never_shows_values(tmp_path):
    path = make(tmp_path, 'A = "sk-repr-secret"\n')
    store = SecretStore(path, environ={})
    store.get("A")
    assert "sk-repr-secret" not in repr(store)
