"""A bundle's `aliases.toml`, as the reference writes it: other names a task may give the bundle's envs and
agents, by folder name (resolved in bundles/loader.py's resolve_refs; --agent NAME in bundles/agents.py).

    # Ids a task can name this bundle's envs by; a store's env of the id wins over an alias.
    [envs]
    mail = ["mail"]

A name that is a folder of the bundle is that folder's entity, whatever an alias says. What the file holds that
means nothing here (a table the reference does not take, a plain key) is reported as ignored, one line each."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ALIASES_FILE = "aliases.toml"
# The tables the reference takes, and the kind of entity each names.
TABLES = {"envs": "env", "agents": "agent"}
# A plain id (the reference's rule), never a namespaced one.
_ALIAS = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?")
_ALIAS_RULE = "lowercase letters, digits and '-', at most 64 characters, starting and ending with a letter or digit"
MAX_ALIASES_BYTES = 1 << 20


@dataclass
class BundleAliases:
    envs: dict[str, str] = field(default_factory=dict)  # alias -> the env's folder name
    agents: dict[str, str] = field(default_factory=dict)  # alias -> the agent's folder name
    ignored: list[str] = field(default_factory=list)  # what the file holds that is not used, one line each


def read_bundle_aliases(root: Path, folders: dict[str, set[str]], problems: list[str]) -> BundleAliases:
    """The aliases `root/aliases.toml` gives; `folders` holds each table's folder names (`envs/<name>/`, ...).
    Its problems are added to `problems` (and it then gives no aliases)."""
    from agentenv_local.inputs import refused
    from agentenv_local.untrusted import UntrustedInputError, parse_toml, read_file

    path = root / ALIASES_FILE
    found = BundleAliases()
    if not path.exists() and not path.is_symlink():
        return found
    try:
        data = parse_toml(read_file(path, what=ALIASES_FILE, max_bytes=MAX_ALIASES_BYTES).decode("utf-8-sig"),
                          what=ALIASES_FILE)
    except UnicodeDecodeError as exc:
        problems.append(f"{ALIASES_FILE}: not UTF-8 text (byte {exc.start}: {exc.reason}); save it as UTF-8")
        return found
    except UntrustedInputError as exc:
        problems.append(refused(ALIASES_FILE, exc))
        return found
    mine: list[str] = []
    for key, value in data.items():
        if key not in TABLES:
            what = f"[{key}]" if isinstance(value, dict) else f"{key!r}"
            found.ignored.append(f"{ALIASES_FILE} {what}: ignored (an aliases.toml takes [envs] and [agents])")
            continue
        if not isinstance(value, dict):
            mine.append(f"{ALIASES_FILE}: {key} must be a table ([{key}]) of folder names to lists of aliases")
            continue
        taken = getattr(found, key)
        names = folders.get(key, set())
        for name, aliases in value.items():
            if not (isinstance(aliases, list) and aliases and all(isinstance(a, str) for a in aliases)):
                mine.append(f"{ALIASES_FILE}: {key}.{name} must be a list of aliases, not {aliases!r}")
                continue
            if name not in names:
                mine.append(f"{ALIASES_FILE}: {key}.{name}: this bundle has no {TABLES[key]} {name!r} "
                            f"({key}/{name}/)")
                continue
            for alias in aliases:
                if not _ALIAS.fullmatch(alias):
                    mine.append(f"{ALIASES_FILE}: {key}.{name}: {alias!r} is not an alias: {_ALIAS_RULE}")
                elif alias in names and alias != name:
                    mine.append(f"{ALIASES_FILE}: {key}.{name}: {alias!r} is the {TABLES[key]} {alias!r}'s name")
                elif taken.get(alias, name) != name:
                    mine.append(f"{ALIASES_FILE}: {key}.{name}: {alias!r} is also given to {key}.{taken[alias]}; "
                                f"an alias names one {TABLES[key]}")
                else:
                    taken[alias] = name
    problems += mine
    return BundleAliases(ignored=found.ignored) if mine else found


def prefer_store_envs(store: Any, bundle: Any) -> None:
    """Give back to each step field an alias resolved the alias itself when the store has an env (or an agent)
    of that id: a store's entity of the id wins over an alias, as the reference's aliases.toml says."""
    for collection, uses in (("envs", bundle.alias_uses), ("agents", bundle.agent_alias_uses)):
        for where, index, field_name, alias in uses:
            if store.documents.find(collection, alias) is None:
                continue
            for task in bundle.tasks.values():
                if f"tasks/{task.source.name}" == where and index < len(task.steps):
                    task.steps[index][field_name] = alias
