"""resolve_model / resolve_endpoint: per-role endpoints and models, keys from the secret store."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agentenv_local.config import load_config
from agentenv_local.errors import ConfigError
from agentenv_local.models import (
    AnthropicMessagesProvider,
    Message,
    OpenAIChatProvider,
    resolve_endpoint,
    resolve_model,
)
from agentenv_local.testing.fake_models import FakeModelServer

KEY = "sk-from-the-secret-store-4242"
JUDGE_KEY = "ant-judge-key-0099"


def project(root: Path, config: str, secrets: str | None = None) -> Path:
    state = root / ".agentenv"
    state.mkdir(parents=True, exist_ok=True)
    (state / "config.toml").write_text(config, encoding="utf-8")
    if secrets is not None:
        path = state / "secrets.toml"
        path.write_text(secrets, encoding="utf-8")
        path.chmod(0o600)
    return root


def cfg(root: Path, config: str, secrets: str | None = None, environ: dict | None = None):
    return load_config(project(root, config, secrets), environ=environ or {})


def test_every_role_uses_the_shared_endpoint_and_default_model(tmp_path):
    c = cfg(tmp_path, '[model]\nbase_url = "http://127.0.0.1:11434/v1"\napi_key = "secret:OPENAI_KEY"\n'
                      'default = "qwen3:8b"\n[model.roles]\njudge = "qwen3:32b"\n',
            secrets=f'OPENAI_KEY = "{KEY}"\n')
    for role, model in (("agent", "qwen3:8b"), ("user", "qwen3:8b"), ("judge", "qwen3:32b")):
        provider, name = resolve_model(c, role)
        assert isinstance(provider, OpenAIChatProvider) and name == model
        assert provider.base_url == "http://127.0.0.1:11434/v1" and provider.has_api_key
        assert provider.timeout_s == 120.0 and provider.max_retries == 3
    assert resolve_endpoint(c, "judge").api_key == KEY  # from secrets.toml, never from the config file
    assert resolve_model(c, "judge", model="override")[1] == "override"


def test_timeout_and_retries_come_from_config(tmp_path):
    c = cfg(tmp_path, '[model]\nbase_url = "http://h/v1"\ndefault = "m"\ntimeout_s = 30\nmax_retries = 0\n'
                      'api = "anthropic"\n')
    provider, _ = resolve_model(c, "agent")
    assert isinstance(provider, AnthropicMessagesProvider)
    assert (provider.timeout_s, provider.max_retries) == (30.0, 0)


def test_env_variables_set_the_new_keys(tmp_path):
    c = load_config(tmp_path, environ={"AGENTENV_MODEL_BASE_URL": "http://h/v1", "AGENTENV_MODEL_DEFAULT": "m",
                                       "AGENTENV_MODEL_API": "anthropic", "AGENTENV_MODEL_TIMEOUT_S": "9.5",
                                       "AGENTENV_MODEL_MAX_RETRIES": "5"})
    e = resolve_endpoint(c, "user")
    assert (e.api, e.timeout_s, e.max_retries) == ("anthropic", 9.5, 5)


def test_bad_api_value_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="model.api"):
        cfg(tmp_path, '[model]\napi = "gemini"\n')


def test_per_role_endpoint_does_not_inherit_the_shared_key(tmp_path):
    c = cfg(tmp_path, '[model]\nbase_url = "http://127.0.0.1:11434/v1"\napi_key = "secret:OPENAI_KEY"\n'
                      'default = "qwen3:8b"\n[model.headers]\nX-Team = "secret:TEAM"\n'
                      '[model.roles]\njudge = "claude-x"\n'
                      '[model.endpoints.judge]\napi = "anthropic"\nbase_url = "http://127.0.0.1:9999"\n'
                      'timeout_s = 15\n',
            environ={"OPENAI_KEY": KEY, "TEAM": "team-header-1"})
    judge = resolve_endpoint(c, "judge")
    assert (judge.api, judge.base_url, judge.model, judge.source) == (
        "anthropic", "http://127.0.0.1:9999", "claude-x", "model.endpoints.judge")
    assert judge.api_key is None and judge.headers == {}  # a key only goes where it was configured
    assert judge.timeout_s == 15.0 and judge.max_retries == 3
    agent = resolve_endpoint(c, "agent")
    assert agent.api_key == KEY and agent.headers == {"X-Team": "team-header-1"} and agent.source == "model"


def test_per_role_endpoint_with_its_own_secret_key(tmp_path):
    c = cfg(tmp_path, '[model]\nbase_url = "http://127.0.0.1:11434/v1"\ndefault = "m"\n'
                      '[model.endpoints.judge]\napi = "anthropic"\napi_key = "secret:ANTHROPIC_API_KEY"\n',
            secrets=f'ANTHROPIC_API_KEY = "{JUDGE_KEY}"\n')
    judge = resolve_endpoint(c, "judge")
    # no base_url of its own: refines the shared endpoint, with its own key and API
    assert (judge.api, judge.base_url, judge.api_key) == ("anthropic", "http://127.0.0.1:11434/v1", JUDGE_KEY)
    shown = c.show()["keys"]
    assert shown["model.endpoints.judge.api_key"]["value"] == "***"


def test_anthropic_without_base_url_uses_the_public_api(tmp_path):
    c = cfg(tmp_path, '[model]\napi = "anthropic"\ndefault = "claude-sonnet-4-5"\n')
    provider, model = resolve_model(c, "judge")
    assert provider.base_url == "https://api.anthropic.com" and model == "claude-sonnet-4-5"


def test_nothing_configured_names_the_keys_to_set(tmp_path):
    c = load_config(tmp_path, environ={})
    with pytest.raises(ConfigError) as info:
        resolve_model(c, "judge")
    assert info.value.message == ("no model endpoint is set for role 'judge': set [model] base_url and "
                                  "[model] default (or [model.roles] judge)")
    assert "docs/models.md" in info.value.hint


def test_missing_model_or_base_url(tmp_path):
    with pytest.raises(ConfigError, match=r"no model is set for role 'agent': set \[model\] default "
                                          r"\(or \[model.roles\] agent\)"):
        resolve_model(cfg(tmp_path / "a", '[model]\nbase_url = "http://h/v1"\n'), "agent")
    with pytest.raises(ConfigError, match=r"no model endpoint is set for role 'user': set \[model\] base_url"):
        resolve_model(cfg(tmp_path / "b", '[model]\ndefault = "m"\n'), "user")


def test_missing_secret_names_the_config_key(tmp_path):
    c = cfg(tmp_path, '[model]\nbase_url = "http://h/v1"\ndefault = "m"\n'
                      '[model.endpoints.judge]\napi_key = "secret:NOPE"\n')
    with pytest.raises(ConfigError, match="'model.endpoints.judge.api_key' is secret:NOPE"):
        resolve_model(c, "judge")
    with pytest.raises(ConfigError, match="'model.api_key' is secret:GONE"):
        resolve_model(cfg(tmp_path / "x", '[model]\nbase_url = "http://h/v1"\ndefault = "m"\n'
                                          'api_key = "secret:GONE"\n'), "agent")


def test_endpoint_table_mistakes(tmp_path):
    with pytest.raises(ConfigError, match="unknown role 'judg'") as info:
        resolve_model(cfg(tmp_path / "a", '[model]\nbase_url = "http://h/v1"\ndefault = "m"\n'
                                          '[model.endpoints.judg]\nbase_url = "http://x"\n'), "agent")
    assert "judge" in info.value.hint
    with pytest.raises(ConfigError, match="unknown key 'model.endpoints.judge.baseurl'") as info:
        resolve_model(cfg(tmp_path / "b", '[model]\ndefault = "m"\n[model.endpoints.judge]\nbaseurl = "http://x"\n'),
                      "judge")
    assert "base_url" in info.value.hint
    with pytest.raises(ConfigError, match="model.endpoints.judge.timeout_s"):
        resolve_model(cfg(tmp_path / "c", '[model]\ndefault = "m"\n[model.endpoints.judge]\n'
                                          'base_url = "http://x"\ntimeout_s = "soon"\n'), "judge")
    with pytest.raises(ConfigError, match="model.endpoints.judge.api"):
        resolve_model(cfg(tmp_path / "d", '[model]\ndefault = "m"\n[model.endpoints.judge]\n'
                                          'base_url = "http://x"\napi = "cohere"\n'), "judge")
    with pytest.raises(ConfigError, match="unknown model role"):
        resolve_model(cfg(tmp_path / "e", '[model]\ndefault = "m"\n'), "critic")


def test_bad_header_names_the_key(tmp_path):
    c = cfg(tmp_path, '[model]\nbase_url = "http://h/v1"\ndefault = "m"\n[model.headers]\n"Bad Header" = "v"\n')
    with pytest.raises(ConfigError, match="model.headers"):
        resolve_model(c, "agent")


def test_resolved_providers_talk_to_the_fake_server(tmp_path):
    with FakeModelServer(api_key=KEY) as shared, FakeModelServer(api_key=JUDGE_KEY) as judge_srv:
        c = cfg(tmp_path, f'[model]\nbase_url = "{shared.base_url}"\napi_key = "secret:OPENAI_KEY"\n'
                          f'default = "qwen3:8b"\n[model.roles]\njudge = "claude-x"\n'
                          f'[model.endpoints.judge]\napi = "anthropic"\nbase_url = "{judge_srv.root_url}"\n'
                          f'api_key = "secret:ANTHROPIC_API_KEY"\n',
                secrets=f'OPENAI_KEY = "{KEY}"\nANTHROPIC_API_KEY = "{JUDGE_KEY}"\n')
        for role in ("agent", "user", "judge"):
            provider, model = resolve_model(c, role)
            reply = asyncio.run(provider.complete([Message.user(f"hello {role}")], model=model))
            assert reply.text == "done"
        assert [r.model for r in shared.requests] == ["qwen3:8b", "qwen3:8b"]
        assert [r.model for r in judge_srv.requests] == ["claude-x"]
        assert judge_srv.requests[0].headers["x-api-key"] == JUDGE_KEY
        assert "authorization" not in judge_srv.requests[0].headers
