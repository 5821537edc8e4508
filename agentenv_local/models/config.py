"""From the configuration to a provider: which endpoint, key and model a role (agent, user, judge) uses.

    [model]                      # the shared endpoint
    base_url = "http://127.0.0.1:11434/v1"
    api_key = "secret:OPENAI_KEY"
    default = "qwen3:8b"
    [model.roles]
    judge = "claude-sonnet-4-5"
    [model.endpoints.judge]      # the judge talks to another endpoint
    api = "anthropic"
    base_url = "https://api.anthropic.com"
    api_key = "secret:ANTHROPIC_API_KEY"

An endpoint table with its own `base_url` inherits nothing secret from `[model]` (no key, no
headers): a key is only ever sent to the endpoint it was configured for. Without `base_url` it
refines the shared endpoint (its `api_key`/`headers` replace or add to `[model]`'s). `api`,
`timeout_s` and `max_retries` fall back to `[model]`.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any

from agentenv_local.config.masking import MASK
from agentenv_local.errors import ConfigError
from agentenv_local.models.base import ModelProvider, check_headers
from agentenv_local.models.errors import ModelError

ROLES = ("agent", "user", "judge")
APIS = ("openai", "anthropic")
ENDPOINT_KEYS = ("base_url", "api", "api_key", "headers", "timeout_s", "max_retries")
ANTHROPIC_BASE_URL = "https://api.anthropic.com"


@dataclass(frozen=True)
class ModelEndpoint:
    """What one role resolves to. `api_key` is never shown (repr masks it)."""

    role: str
    api: str
    base_url: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    timeout_s: float = 120.0
    max_retries: int = 3
    source: str = "model"  # "model" or "model.endpoints.<role>"

    def __repr__(self) -> str:
        return (f"ModelEndpoint(role={self.role!r}, api={self.api!r}, base_url={self.base_url!r}, "
                f"model={self.model!r}, api_key={MASK if self.api_key else None!r}, source={self.source!r})")

    def provider(self, **options: Any) -> ModelProvider:
        return make_provider(self.api, self.base_url, api_key=self.api_key, headers=self.headers,
                             timeout_s=self.timeout_s, max_retries=self.max_retries, **options)


def make_provider(api: str, base_url: str, **options: Any) -> ModelProvider:
    """`OpenAIChatProvider` for api "openai", `AnthropicMessagesProvider` for "anthropic"."""
    if api == "openai":
        from agentenv_local.models.openai import OpenAIChatProvider

        return OpenAIChatProvider(base_url, **options)
    if api == "anthropic":
        from agentenv_local.models.anthropic import AnthropicMessagesProvider

        return AnthropicMessagesProvider(base_url, **options)
    raise ConfigError(f"unknown model API {api!r}", hint='use "openai" or "anthropic"')


def _load(config: Any) -> Any:
    if config is None:
        from agentenv_local.config import load_config

        return load_config()
    return config


def _number(key: str, value: Any, *, integer: bool, minimum: float, strict_min: bool) -> float | int:
    num: float | int | None = None
    if not isinstance(value, bool) and not (integer and isinstance(value, float)):
        try:
            num = int(value) if integer else float(value)
        except (TypeError, ValueError):
            num = None
    if num is None:
        kind = "an integer" if integer else "a number"
        raise ConfigError(f"'{key}' must be {kind}, got {value!r}", hint=f"fix {key} in the config file")
    if num < minimum or (strict_min and num == minimum):
        raise ConfigError(f"'{key}' must be {'>' if strict_min else '>='} {minimum:g}, got {num!r}",
                          hint=f"fix {key} in the config file")
    return num


def _endpoint_table(config: Any, role: str) -> dict[str, Any]:
    raw = config.raw("model.endpoints") or {}
    unknown = [r for r in raw if r not in ROLES]
    if unknown:
        close = difflib.get_close_matches(unknown[0], ROLES, n=1)
        raise ConfigError(f"unknown role '{unknown[0]}' in [model.endpoints]",
                          problems=[f"valid roles: {', '.join(ROLES)}"],
                          hint=f"did you mean [model.endpoints.{close[0]}]?" if close else
                          "name the table after a role: [model.endpoints.judge]")
    mine = raw.get(role)
    if mine is None:
        return {}
    if not isinstance(mine, dict):
        raise ConfigError(f"'model.endpoints.{role}' must be a table", hint=f"write [model.endpoints.{role}]")
    for key in mine:
        if key not in ENDPOINT_KEYS:
            close = difflib.get_close_matches(key, ENDPOINT_KEYS, n=1)
            raise ConfigError(f"unknown key 'model.endpoints.{role}.{key}'",
                              problems=[f"valid keys in [model.endpoints.{role}]: {', '.join(ENDPOINT_KEYS)}"],
                              hint=f"did you mean 'model.endpoints.{role}.{close[0]}'?" if close else None)
    return config.get(f"model.endpoints.{role}") or {}  # references resolved


def resolve_endpoint(config: Any = None, role: str = "agent", *, model: str | None = None) -> ModelEndpoint:
    """The endpoint, key, headers and model of one role (see the module docstring for the rules).

    `model` overrides the configured model name (a CLI `--judge-model`, say). Raises ConfigError
    naming the key to set when the role has no endpoint or no model, or a reference is missing.
    """
    if role not in ROLES:
        raise ConfigError(f"unknown model role {role!r}", hint=f"use one of: {', '.join(ROLES)}")
    config = _load(config)
    ep = _endpoint_table(config, role)
    prefix = f"model.endpoints.{role}"
    for key in ("base_url", "api", "api_key"):
        if key in ep and ep[key] is not None and not isinstance(ep[key], str):
            raise ConfigError(f"'{prefix}.{key}' must be a string", hint=f"fix {prefix}.{key} in the config file")
    if "headers" in ep and not isinstance(ep["headers"], dict):
        raise ConfigError(f"'{prefix}.headers' must be a table", hint=f"write [{prefix}.headers]")

    own_url = bool(ep.get("base_url"))
    api = ep.get("api") or config.get("model.api") or "openai"
    api_key_where = f"{prefix}.api_key" if "api_key" in ep else "model.api_key"
    if api not in APIS:
        where = f"{prefix}.api" if ep.get("api") else "model.api"
        raise ConfigError(f"'{where}' must be \"openai\" or \"anthropic\", got {api!r}", hint=f"fix {where}")
    if own_url:
        base_url = ep["base_url"]
        api_key = ep.get("api_key") or None
        headers = dict(ep.get("headers") or {})
        headers_where = f"{prefix}.headers"
        source = prefix
    else:
        base_url = config.get("model.base_url")
        api_key = (ep.get("api_key") if "api_key" in ep else config.get("model.api_key")) or None
        headers = {**(config.get("model.headers") or {}), **(ep.get("headers") or {})}
        headers_where = "model.headers" + (f" / {prefix}.headers" if ep.get("headers") else "")
        source = prefix if ep else "model"
    if not base_url and api == "anthropic":
        base_url = ANTHROPIC_BASE_URL
    model_name = model or config.get(f"model.roles.{role}") or config.get("model.default")

    if not base_url and not model_name:
        raise ConfigError(f"no model endpoint is set for role '{role}': set [model] base_url and [model] default "
                          f"(or [model.roles] {role})",
                          hint="e.g. base_url = \"http://127.0.0.1:11434/v1\" for Ollama; see docs/models.md")
    if not base_url:
        raise ConfigError(f"no model endpoint is set for role '{role}': set [model] base_url "
                          f"(or [model.endpoints.{role}] base_url)",
                          hint="e.g. base_url = \"http://127.0.0.1:11434/v1\" for Ollama; see docs/models.md")
    if not model_name:
        raise ConfigError(f"no model is set for role '{role}': set [model] default (or [model.roles] {role})",
                          hint="e.g. default = \"qwen3:8b\"; see docs/models.md")
    if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
        where = f"{prefix}.base_url" if own_url else "model.base_url"
        raise ConfigError(f"'{where}' must be an http:// or https:// URL", hint=f"fix {where}")
    if api_key is not None and not isinstance(api_key, str):
        raise ConfigError(f"'{api_key_where}' must be a string", hint=f"fix {api_key_where}")
    try:
        headers = check_headers(headers, headers_where)
    except ModelError as exc:
        raise ConfigError(exc.message, hint=exc.hint) from None

    timeout_s = _number(f"{prefix}.timeout_s" if "timeout_s" in ep else "model.timeout_s",
                        ep.get("timeout_s", config.get("model.timeout_s", 120.0)),
                        integer=False, minimum=0, strict_min=True)
    max_retries = _number(f"{prefix}.max_retries" if "max_retries" in ep else "model.max_retries",
                          ep.get("max_retries", config.get("model.max_retries", 3)),
                          integer=True, minimum=0, strict_min=False)
    return ModelEndpoint(role=role, api=api, base_url=base_url, model=model_name, api_key=api_key, headers=headers,
                         timeout_s=float(timeout_s), max_retries=int(max_retries), source=source)


def resolve_model(config: Any = None, role: str = "agent", *, model: str | None = None,
                  **provider_options: Any) -> tuple[ModelProvider, str]:
    """(provider, model name) for a role; `config` defaults to `load_config()`.

    `provider_options` go to the provider (e.g. `backoff_s=0.01` in tests).
    """
    endpoint = resolve_endpoint(config, role, model=model)
    return endpoint.provider(**provider_options), endpoint.model
