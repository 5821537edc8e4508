"""The model endpoint part of an agent's config, shared by tool-loop and the coding-CLI agents: ``base_url``,
a write-only ``api_key``, write-only ``model_headers`` (the endpoint's [model.headers]), ``max_retries`` and
``request_timeout_s`` (each agent adds its own ``api`` default).

agent-config/v1 stores what a set validated, dumped as JSON, and a get dumps the same way: a plain "***" would lose
the key on the way in. So the key dumps as "***" plus an opaque handle that only this process can turn back into
the key (the handle says nothing about the key). Sending the handle back keeps the key.
"""

from __future__ import annotations

import json
import os
import secrets
import threading
from typing import Any

from pydantic import Field, SecretStr, field_serializer, field_validator

from .types import AgentConfig


class KeyVault:
    """Handles for keys: ``handle(key)`` is stable per key, ``key(handle)`` only answers handles it issued."""

    def __init__(self) -> None:
        self._by_handle: dict[str, str] = {}
        self._by_key: dict[str, str] = {}
        self._lock = threading.Lock()

    def handle(self, key: str) -> str:
        with self._lock:
            handle = self._by_key.get(key)
            if handle is None:
                handle = "***" + secrets.token_hex(8)
                self._by_key[key] = handle
                self._by_handle[handle] = key
            return handle

    def key(self, handle: str) -> str | None:
        with self._lock:
            return self._by_handle.get(handle)


VAULT = KeyVault()  # one per process: every agent's masked keys read back through it


class ModelEndpointConfig(AgentConfig):
    """AgentConfig plus the model endpoint; ``api_key`` reads back masked and is never logged."""

    base_url: str | None = None
    api_key: SecretStr | None = None
    max_retries: int = Field(default=3, ge=0, le=20)
    request_timeout_s: float = Field(default=120.0, gt=0)
    # [model.headers] of the endpoint (deploy_agent sends them): sent with each model request and nowhere else
    # (never a CLI's environment); each value is write-only like api_key, as it may be a credential
    model_headers: dict[str, SecretStr] = Field(default_factory=dict)

    @field_validator("api_key", mode="before")
    @classmethod
    def _unmask(cls, value: Any) -> Any:
        if isinstance(value, str) and value.startswith("***"):
            key = VAULT.key(value)
            if key is None:
                raise ValueError("a masked value this agent did not issue; send the key itself")
            return key
        return value

    @field_serializer("api_key", when_used="json")
    def _mask(self, value: SecretStr | None) -> str | None:
        return None if value is None else VAULT.handle(value.get_secret_value())

    @field_validator("model_headers", mode="before")
    @classmethod
    def _unmask_headers(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        out = {}
        for name, given in value.items():
            if isinstance(given, str) and given.startswith("***"):
                known = VAULT.key(given)
                if known is None:
                    raise ValueError(f"model_headers.{name}: a masked value this agent did not issue; send the value")
                given = known
            out[name] = given
        return out

    @field_serializer("model_headers", when_used="json")
    def _mask_headers(self, value: dict[str, SecretStr]) -> dict[str, str]:
        return {name: VAULT.handle(v.get_secret_value()) for name, v in value.items()}


def request_headers(cfg: ModelEndpointConfig) -> dict[str, str]:
    """The extra headers of each model request: ``model_headers`` over, for the env's endpoint (no base_url
    set), $LITELLM_EXTRA_HEADERS (a JSON object, as the reference hands them). ValueError saying what is wrong."""
    from agentenv_local.models.base import ModelError, check_headers

    own = {name: value.get_secret_value() for name, value in cfg.model_headers.items()}
    raw = os.environ.get("LITELLM_EXTRA_HEADERS") if not cfg.base_url else None
    headers: Any = {}
    if raw:
        try:
            headers = json.loads(raw)
        except ValueError:
            headers = None
        if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
            raise ValueError("LITELLM_EXTRA_HEADERS is not a JSON object of string values")
    try:
        return check_headers({**{str(k): v for k, v in headers.items()}, **own}, "model_headers")
    except ModelError as exc:
        raise ValueError(str(exc)) from None
