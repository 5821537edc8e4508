"""One plugin mechanism for built-ins and third parties: Python entry-point groups.

Each group maps a name (a step `type`, a sandbox provider name, ...) to an object. Built-ins
are declared in our own pyproject.toml exactly like a plugin's. Loading is lazy and per group:
`agentenv --help` never imports a plugin. A contribution that fails to import is skipped and its
reason kept for `agentenv plugin list`; two distributions claiming one name disable both unless
one of them is ours (a plugin cannot replace a built-in).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from . import entry_points

CORE_DISTRIBUTION = "agentenv-local"

GROUPS = {
    "task_steps": "agentenv_local.task_steps",
    "env_types": "agentenv_local.env_types",
    "env_providers": "agentenv_local.env_providers",
    "sandbox_providers": "agentenv_local.sandbox_providers",
    "stores": "agentenv_local.stores",
    "agents": "agentenv_local.agents",
    "cli": "agentenv_local.cli",
    "bundles": "agentenv_local.bundles",
}


@dataclass
class Contribution:
    group: str
    name: str
    value: str  # the entry point's "module:attr"
    distribution: str
    version: str
    status: str = "unloaded"  # unloaded | active | failed | conflict | blocked
    reason: str | None = None
    obj: Any = field(default=None, repr=False)

    @property
    def builtin(self) -> bool:
        return self.distribution == CORE_DISTRIBUTION

    def to_dict(self) -> dict:
        return {"group": self.group, "name": self.name, "value": self.value, "distribution": self.distribution,
                "version": self.version, "status": self.status, "reason": self.reason, "builtin": self.builtin}


class PluginRegistry:
    """Discovers contributions per group and loads them on first use."""

    def __init__(self) -> None:
        self._groups: dict[str, dict[str, Contribution]] = {}
        self._extra: dict[str, dict[str, Any]] = {}
        self._lock = threading.RLock()
        self._points: list[entry_points.EntryPoint] | None = None  # sys.path's, read on first use

    def _discover(self, group: str) -> dict[str, Contribution]:
        if group not in GROUPS:
            raise KeyError(f"unknown plugin group {group!r}; known: {', '.join(GROUPS)}")
        found: dict[str, list[Contribution]] = {}
        if self._points is None:
            self._points = entry_points.scan()
        for ep in self._points:
            if ep.group == GROUPS[group]:
                found.setdefault(ep.name, []).append(Contribution(group, ep.name, ep.value, ep.distribution,
                                                                  ep.version))
        result: dict[str, Contribution] = {}
        for name, claims in found.items():
            # The same distribution can appear twice (editable + site-packages); keep one.
            unique = {c.distribution: c for c in claims}
            claims = list(unique.values())
            builtins = [c for c in claims if c.builtin]
            if builtins:
                result[name] = builtins[0]
                for other in claims:
                    if not other.builtin:
                        other.status, other.reason = "blocked", f"'{name}' is a built-in {group} name; rename it"
                        result[f"{other.distribution}:{name}"] = other
            elif len(claims) > 1:
                for c in claims:
                    c.status = "conflict"
                    c.reason = f"'{name}' is also claimed by " + ", ".join(o.distribution for o in claims if o is not c)
                    result[f"{c.distribution}:{name}"] = c
            else:
                result[name] = claims[0]
        return result

    def contributions(self, group: str) -> dict[str, Contribution]:
        with self._lock:
            if group not in self._groups:
                self._groups[group] = self._discover(group)
            return self._groups[group]

    def _load(self, c: Contribution) -> None:
        if c.status != "unloaded":
            return
        module_name, _, attr = c.value.partition(":")
        try:
            import importlib

            obj = importlib.import_module(module_name)
            for part in filter(None, attr.split(".")):
                obj = getattr(obj, part)
        except Exception as exc:  # a broken plugin must never break the CLI
            c.status, c.reason = "failed", f"{type(exc).__name__}: {exc}"
            return
        problem = _invalid(c.group, c.name, obj)
        if problem:
            c.status, c.reason = "failed", f"invalid plugin: {problem}"
        else:
            c.obj, c.status = obj, "active"

    def load_all(self, group: str) -> dict[str, Contribution]:
        contributions = self.contributions(group)
        for c in contributions.values():
            self._load(c)
        return contributions

    def get(self, group: str, name: str) -> Any | None:
        """The loaded object registered as `name` in `group`, or None."""
        if name in self._extra.get(group, {}):
            return self._extra[group][name]
        c = self.contributions(group).get(name)
        if c is None:
            return None
        self._load(c)
        return c.obj if c.status == "active" else None

    def names(self, group: str) -> list[str]:
        """The names in `group` that may work, without loading any: registered in code, or contributed and not
        (yet) known to be broken."""
        found = [name for name, c in self.contributions(group).items() if c.status in ("unloaded", "active")]
        return sorted(set(found) | set(self._extra.get(group, {})))

    def available(self, group: str) -> dict[str, Any]:
        """Every working contribution of `group` by name (loads them all)."""
        loaded = {name: c.obj for name, c in self.load_all(group).items() if c.status == "active"}
        loaded.update(self._extra.get(group, {}))
        return loaded

    def failure(self, group: str, name: str) -> str | None:
        c = self.contributions(group).get(name)
        return c.reason if c is not None and c.status != "active" else None

    def register(self, group: str, name: str, obj: Any) -> None:
        """Register in code (tests, embedding, `impls` from config). Wins over entry points."""
        self._extra.setdefault(group, {})[name] = obj

    def inventory(self) -> list[Contribution]:
        out: list[Contribution] = []
        for group in GROUPS:
            out += self.load_all(group).values()
        return out


# Who checks a contribution of each group: a function "module:attr" of the group's owner, taking
# (name, obj) and returning why obj cannot serve as that name, or None. The owners sit above this module
# (a step is the tasks package's, a provider sandbox_api's, a command the CLI's), so they are named here
# and imported when a contribution of their group is loaded, never at import time.
VALIDATORS = {
    "task_steps": "agentenv_local.tasks.step:plugin_problem",
    "sandbox_providers": "agentenv_local.sandbox_api:plugin_problem",
    "cli": "agentenv_local.cli.commands:plugin_problem",
    "agents": "agentenv_local.agents.base:plugin_problem",
    "env_types": "agentenv_local.hosting.envs.env_types:plugin_problem",
    "env_providers": "agentenv_local.hosting.envs.providers:plugin_problem",
}


def _invalid(group: str, name: str, obj: Any) -> str | None:
    """Why `obj` cannot serve as `name` in `group`, or None when it can."""
    import importlib

    validator = VALIDATORS.get(group)
    if validator is None:  # stores, bundles
        return None if group == "bundles" or callable(obj) else "expected a class or factory"
    module_name, _, attr = validator.partition(":")
    check = getattr(importlib.import_module(module_name), attr)
    return check(name, obj)


_registry = PluginRegistry()


def register_config_impls(config: Any) -> list[str]:
    """Register the step types a config names in `[task_steps] impls` ("module:Class").

    Returns the problems (a bad import path, a class that is not a Step) instead of raising, so
    one bad line does not stop commands that don't need that step; parsing a task that uses it
    reports the type as unknown with this reason.
    """
    import importlib

    problems = []
    for spec in config.get("task_steps.impls") or []:
        module_name, _, attr = str(spec).partition(":")
        try:
            obj = importlib.import_module(module_name)
            for part in filter(None, attr.split(".")):
                obj = getattr(obj, part)
        except Exception as exc:
            problems.append(f"[task_steps] impls: {spec}: {type(exc).__name__}: {exc}")
            continue
        name = getattr(obj, "type", "")
        problem = _invalid("task_steps", name, obj) if name else "the class has no `type`"
        if problem:
            problems.append(f"[task_steps] impls: {spec}: {problem}")
        else:
            _registry.register("task_steps", name, obj)
    return problems


def registry() -> PluginRegistry:
    return _registry
