"""env:/secret: references, masking, and secret_values()."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kits.config import write_config

from agentenv_local.config import (
    ConfigError,
    is_secret_key,
    load_config,
    mask_known_secrets,
    mask_url_userinfo,
    mask_value,
    parse_ref,
)


def write_secrets(root: Path, text: str, name: str = "secrets.toml", mode: int = 0o600) -> Path:
    state = root / ".agentenv"
    state.mkdir(parents=True, exist_ok=True)
    path = state / name
    path.write_text(text, encoding="utf-8")
    path.chmod(mode)
    return path


def test_parse_ref():
    ref = parse_ref("env:OLLAMA_URL?http://127.0.0.1:11434?x=1")
    assert (ref.kind, ref.name, ref.default) == ("env", "OLLAMA_URL", "http://127.0.0.1:11434?x=1")
    assert parse_ref("secret:KEY") .default is None
    assert parse_ref("secret:KEY?").default == ""
    assert parse_ref("http://x") is None
    assert parse_ref(5) is None


def test_env_ref_with_default_and_set(tmp_path, monkeypatch):
    write_config(tmp_path, '[model]\nbase_url = "env:OLLAMA_URL?http://127.0.0.1:11434"\n')
    monkeypatch.delenv("OLLAMA_URL", raising=False)
    cfg = load_config(tmp_path)
    assert cfg.get("model.base_url") == "http://127.0.0.1:11434"
    assert cfg.raw("model.base_url") == "env:OLLAMA_URL?http://127.0.0.1:11434"
    monkeypatch.setenv("OLLAMA_URL", "http://10.0.0.5:11434")
    assert cfg.get("model.base_url") == "http://10.0.0.5:11434"  # lazy: read when asked
    info = cfg.explain("model.base_url")
    assert info["ref"] == "env:OLLAMA_URL?http://127.0.0.1:11434"
    assert info["value"] == "http://10.0.0.5:11434"


def test_missing_env_ref_without_default_errors_on_read_only(tmp_path, monkeypatch):
    write_config(tmp_path, '[model]\nbase_url = "env:NO_SUCH_VAR_XYZ"\n')
    monkeypatch.delenv("NO_SUCH_VAR_XYZ", raising=False)
    cfg = load_config(tmp_path)  # loading does not resolve
    assert cfg.get("runner.concurrency") == 4
    with pytest.raises(ConfigError) as info:
        cfg.get("model.base_url")
    text = info.value.render()
    assert "model.base_url" in text and "env:NO_SUCH_VAR_XYZ" in text
    assert "export NO_SUCH_VAR_XYZ=" in text
    shown = cfg.show()
    assert shown["keys"]["model.base_url"]["value"] is None
    assert "NO_SUCH_VAR_XYZ" in shown["keys"]["model.base_url"]["error"]
    assert any("model.base_url" in w for w in shown["warnings"])


def test_ref_into_a_typed_key_is_parsed(tmp_path, monkeypatch):
    write_config(tmp_path, '[runner]\nconcurrency = "env:WORKERS?3"\n')
    monkeypatch.delenv("WORKERS", raising=False)
    cfg = load_config(tmp_path)
    assert cfg.get("runner.concurrency") == 3
    monkeypatch.setenv("WORKERS", "12")
    assert cfg.get("runner.concurrency") == 12
    monkeypatch.setenv("WORKERS", "many")
    with pytest.raises(ConfigError, match="not an integer from 1 to 1000"):
        cfg.get("runner.concurrency")


def test_secret_ref_from_file_and_env(tmp_path, monkeypatch):
    write_config(tmp_path, '[model]\napi_key = "secret:OPENAI_KEY"\n')
    write_secrets(tmp_path, 'OPENAI_KEY = "sk-from-file-123"\n')
    monkeypatch.delenv("OPENAI_KEY", raising=False)
    cfg = load_config(tmp_path)
    assert cfg.get("model.api_key") == "sk-from-file-123"
    assert cfg.raw("model.api_key") == "secret:OPENAI_KEY"
    monkeypatch.setenv("OPENAI_KEY", "sk-from-env-456")
    assert cfg.get("model.api_key") == "sk-from-env-456"  # env vars come first


def test_secret_ref_ignores_env_when_use_env_is_false(tmp_path, monkeypatch):
    write_config(tmp_path, '[secrets]\nuse_env = false\n[model]\napi_key = "secret:OPENAI_KEY"\n')
    write_secrets(tmp_path, 'OPENAI_KEY = "sk-from-file-123"\n')
    monkeypatch.setenv("OPENAI_KEY", "sk-from-env-456")
    assert load_config(tmp_path).get("model.api_key") == "sk-from-file-123"


def test_secret_ref_with_default_and_missing(tmp_path, monkeypatch):
    write_config(tmp_path, '[model]\napi_key = "secret:NOPE_KEY?none"\nbase_url = "secret:NOPE_URL"\n')
    monkeypatch.delenv("NOPE_KEY", raising=False)
    monkeypatch.delenv("NOPE_URL", raising=False)
    cfg = load_config(tmp_path)
    assert cfg.get("model.api_key") == "none"
    with pytest.raises(ConfigError) as info:
        cfg.get("model.base_url")
    text = info.value.render()
    assert "model.base_url" in text and "secret:NOPE_URL" in text
    assert "secrets.toml" in text and "NOPE_URL" in text


def test_json_secrets_file_named_in_config(tmp_path, monkeypatch):
    write_config(tmp_path, '[secrets]\nfile = "keys.json"\n[model]\napi_key = "secret:OPENAI_KEY"\n')
    write_secrets(tmp_path, json.dumps({"OPENAI_KEY": "sk-json-789"}), name="keys.json")
    monkeypatch.delenv("OPENAI_KEY", raising=False)
    assert load_config(tmp_path).get("model.api_key") == "sk-json-789"


def test_secrets_file_with_open_mode_is_refused(tmp_path, monkeypatch):
    write_config(tmp_path, '[model]\napi_key = "secret:OPENAI_KEY"\n')
    path = write_secrets(tmp_path, 'OPENAI_KEY = "sk-open-000"\n', mode=0o644)
    monkeypatch.delenv("OPENAI_KEY", raising=False)
    cfg = load_config(tmp_path)
    with pytest.raises(ConfigError) as info:
        cfg.get("model.api_key")
    text = info.value.render()
    assert f"chmod 600 {path}" in text
    assert "sk-open-000" not in text


def test_secrets_file_cannot_itself_be_a_secret_ref(tmp_path):
    write_config(tmp_path, '[secrets]\nfile = "secret:WHERE"\n[model]\napi_key = "secret:K"\n')
    with pytest.raises(ConfigError, match="cannot be a secret"):
        load_config(tmp_path, environ={}).get("model.api_key")


def test_secrets_file_may_come_from_an_env_ref(tmp_path):
    other = tmp_path / "elsewhere.toml"
    other.write_text('K = "sk-elsewhere-1"\n')
    other.chmod(0o600)
    write_config(tmp_path, '[secrets]\nfile = "env:MY_SECRETS"\n[model]\napi_key = "secret:K"\n')
    cfg = load_config(tmp_path, environ={"MY_SECRETS": str(other)})
    assert cfg.get("model.api_key") == "sk-elsewhere-1"


def test_injected_secret_store(tmp_path):
    class Store:
        def get(self, name):
            return {"K": "sk-injected-1"}.get(name)

    write_config(tmp_path, '[model]\napi_key = "secret:K"\n')
    assert load_config(tmp_path, secret_store=Store()).get("model.api_key") == "sk-injected-1"


def test_refs_inside_free_form_tables(tmp_path, monkeypatch):
    write_config(tmp_path, '[model.headers]\nAuthorization = "secret:HDR"\n'
                           '[sandbox.providers.podman]\nsocket = "env:PODSOCK?/run/podman.sock"\n')
    write_secrets(tmp_path, 'HDR = "Bearer tok-abcdef"\n')
    monkeypatch.delenv("HDR", raising=False)
    monkeypatch.delenv("PODSOCK", raising=False)
    cfg = load_config(tmp_path)
    assert cfg.get("model.headers") == {"Authorization": "Bearer tok-abcdef"}
    assert cfg.get("sandbox.providers.podman") == {"socket": "/run/podman.sock"}
    assert cfg.raw("model.headers") == {"Authorization": "secret:HDR"}


# --- masking ---------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["model.api_key", "x.password", "x.db_passwd", "x.passphrase", "x.client_secret",
                                  "x.auth_token", "x.credentials", "x.private_key", "x.auth", "x.bearer",
                                  "model.headers.X-Team", "x.apiKey", "x.X-Api-Key", "x.authorization"])
def test_secret_shaped_keys(path):
    assert is_secret_key(path)


@pytest.mark.parametrize("path", ["model.base_url", "x.max_tokens", "x.author", "secrets.file", "secrets.use_env",
                                  "runner.concurrency", "model.default"])
def test_not_secret_shaped_keys(path):
    assert not is_secret_key(path)


def test_mask_helpers():
    assert mask_url_userinfo("see https://user:pw@host:8080/x?y=1 and ftp://a@b") == \
        "see https://***@host:8080/x?y=1 and ftp://***@b"
    assert mask_url_userinfo("http://127.0.0.1:11434/v1") == "http://127.0.0.1:11434/v1"
    assert mask_value("model.api_key", "sk-1") == "***"
    assert mask_value("model.api_key", None) is None
    assert mask_value("model.headers", {"A": "1"}) == {"A": "***"}
    assert mask_value("x.url", "https://u:p@h") == "https://***@h"
    assert mask_value("x.url", "plain", secret=True) == "***"
    assert mask_known_secrets("key sk-abcdef and sk-abcdef-longer, ab", ["sk-abcdef", "sk-abcdef-longer", "ab"]) \
        == "key *** and ***, ab"


def test_show_and_explain_mask_secrets(tmp_path, monkeypatch):
    planted = "sk-PLANTED-4f9a1c"
    write_config(tmp_path, """
[model]
api_key = "secret:OPENAI_KEY"
base_url = "https://bob:hunter2xyz@llm.example/v1"
default = "secret:MODEL_NAME"

[model.headers]
X-Custom = "literal-header-value-77"

[sandbox.providers.vault]
token = "literal-token-value-88"
""")
    write_secrets(tmp_path, f'OPENAI_KEY = "{planted}"\nMODEL_NAME = "model-name-secret-99"\n')
    monkeypatch.delenv("OPENAI_KEY", raising=False)
    monkeypatch.delenv("MODEL_NAME", raising=False)
    monkeypatch.setenv("AGENTENV_MODEL_ROLES_JUDGE", "judge-model")
    cfg = load_config(tmp_path, overrides={"model.api_key": "sk-code-override-55"})

    dumped = json.dumps([cfg.show()] + [cfg.explain(p) for p in
                                        ("model.api_key", "model.base_url", "model.default", "model.headers",
                                         "model", "sandbox.providers.vault.token", "")])
    for secret in (planted, "hunter2xyz", "model-name-secret-99", "literal-header-value-77",
                   "literal-token-value-88", "sk-code-override-55"):
        assert secret not in dumped

    key = cfg.explain("model.api_key")
    assert key["value"] == "***" and key["source"] == "code"
    assert key["shadowed"][0] == {"source": f"file:{cfg.file_path}", "value": "secret:OPENAI_KEY",
                                  "ref": "secret:OPENAI_KEY"}
    default = cfg.explain("model.default")
    assert default["value"] == "***" and default["ref"] == "secret:MODEL_NAME"
    assert cfg.explain("model.base_url")["value"] == "https://***@llm.example/v1"
    assert cfg.explain("model.roles.judge")["value"] == "judge-model"  # not secret: shown

    values = cfg.secret_values()
    for secret in ("sk-code-override-55", "model-name-secret-99", "literal-header-value-77",
                   "literal-token-value-88", "hunter2xyz"):
        assert secret in values
    assert "judge-model" not in values
    text = f"calling with {planted}? no: sk-code-override-55 and model-name-secret-99"
    assert "sk-code-override-55" not in mask_known_secrets(text, values)


def test_secret_values_includes_the_secret_behind_a_ref(tmp_path, monkeypatch):
    write_config(tmp_path, '[model]\napi_key = "secret:OPENAI_KEY"\nbase_url = "env:MISSING_URL_Q"\n')
    write_secrets(tmp_path, 'OPENAI_KEY = "sk-behind-ref-1"\n')
    monkeypatch.delenv("OPENAI_KEY", raising=False)
    monkeypatch.delenv("MISSING_URL_Q", raising=False)
    assert load_config(tmp_path).secret_values() == ["sk-behind-ref-1"]  # unresolvable refs are skipped
