"""Which object store a project uses: `[store] objects = "<name>"`, looked up in the `agentenv_local.stores` group.

The built-in is `local` (bytes in `.agentenv/objects`); a plugin's object store is any entry of the group
whose object says `store_kind = "objects"` (stores/object_api.py: the core never imports it). Its settings
are the plugin's own table, `[plugins.<its distribution>]`, handed to its `open` unread by the core.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentenv_local.errors import ConfigError
from agentenv_local.plugins import registry

DEFAULT = "local"


@dataclass
class ObjectStoreChoice:
    """A resolved `[store] objects`: the class, its distribution and the settings it will be opened with."""

    name: str
    cls: Any
    distribution: str
    settings: dict[str, Any] = field(default_factory=dict)

    def factory(self) -> Any:
        """What `DuckDBStore(objects=...)` and `DuckDBStore.open_objects` take."""
        cls, settings = self.cls, dict(self.settings)

        def build(con: Any, lock: Any, root: Path) -> Any:
            return cls.open(con, lock, root, settings)

        return build


def available() -> dict[str, Any]:
    """Every working object store by name (the group's entries that are object stores)."""
    return {name: obj for name, obj in registry().available("stores").items()
            if getattr(obj, "store_kind", None) == "objects"}


def configured_name(config: Any) -> str:
    return str(config.get("store.objects") or DEFAULT)


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def plugin_settings(config: Any, distribution: str) -> dict[str, Any]:
    """`[plugins.<distribution>]`, the name matched as pip does (`agentenv_cas_store` is `agentenv-cas-store`)."""
    tables = config.get("plugins") or {}
    for name, table in tables.items():
        if _canonical(name) == _canonical(distribution) and isinstance(table, dict):
            return dict(table)
    return {}


def resolve(config: Any, name: str | None = None) -> ObjectStoreChoice:
    """The object store `name` (default: the configured one), ready to open; ConfigError when it cannot be."""
    name = name or configured_name(config)
    stores = available()
    cls = stores.get(name)
    if cls is None:
        why = registry().failure("stores", name)
        known = ", ".join(sorted(stores)) or "none"
        reason = f" ({why})" if why else ""
        raise ConfigError(f"[store] objects = {name!r}: no such object store{reason}; available: {known}",
                          hint="install the plugin that provides it (`agentenv plugin list` shows the stores "
                               "there are), or name one of the available ones")
    contribution = registry().contributions("stores").get(name)
    distribution = contribution.distribution if contribution is not None else ""
    settings = plugin_settings(config, distribution) if contribution is not None and not contribution.builtin else {}
    problems = cls.check_settings(settings)
    if problems:
        raise ConfigError(f"[plugins.{distribution}] cannot configure the {name!r} object store",
                          problems=list(problems),
                          hint=f"fix the table [plugins.{distribution}] in the config file")
    return ObjectStoreChoice(name, cls, distribution, settings)
