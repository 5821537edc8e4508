"""Configuration: `.agentenv/config.toml`, `AGENTENV_*` variables, code overrides, secrets.

Public facade; the parts live in private modules (schema, loader, files, checking, resolving, refs,
masking, sources)::

    from agentenv_local.config import load_config
    cfg = load_config()                      # or load_config(overrides={"runner.concurrency": 8})
    cfg.get("runner.concurrency")            # 4, or whatever a higher layer says
    cfg.explain("runner.concurrency")        # value, source, shadowed layers
    cfg.get("sandbox.providers.podman")      # a plain dict, {} when absent

Importing this module is cheap (no pydantic, no store, no network). See docs/configuration.md.
"""

from __future__ import annotations

from agentenv_local.config.loader import NO_FILE, Config, load_config
from agentenv_local.config.masking import MASK, is_secret_key, mask_known_secrets, mask_url_userinfo, mask_value
from agentenv_local.config.refs import Ref, parse_ref
from agentenv_local.config.schema import Settings
from agentenv_local.errors import ConfigError

__all__ = [
    "MASK",
    "NO_FILE",
    "Config",
    "ConfigError",
    "Ref",
    "Settings",
    "is_secret_key",
    "load_config",
    "mask_known_secrets",
    "mask_url_userinfo",
    "mask_value",
    "parse_ref",
]
