"""Load the configuration: find the one file, stack four layers, resolve references on read.

Layers, lowest first: built-in default < the config file < `AGENTENV_*` variables < code overrides.
Each layer is checked against the schema as it is read (unknown keys and wrong types are errors
naming where they came from: checking.py); `env:`/`secret:` references are checked for shape only and
resolved when a value is read (`Config.get`; resolving.py), so a missing secret only matters to code that
needs it. The file itself is found and read by files.py.

Inside free-form tables (`[sandbox.providers.<name>]`, `[plugins.<dist>]`, `[model.headers]`) the
layers merge key by key: an override of one provider setting keeps the file's other settings.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentenv_local.config import schema
from agentenv_local.config.checking import (
    LAYER_CODE,
    LAYER_DEFAULT,
    LAYER_FILE,
    Entry,
    Path_,
    check_tree,
    dotted,
    env_layer,
)
from agentenv_local.config.files import discover, read_toml
from agentenv_local.config.masking import mask_value
from agentenv_local.config.refs import parse_ref
from agentenv_local.config.resolving import ReferenceResolution
from agentenv_local.errors import ConfigError
from agentenv_local.paths import ProjectPaths, find_state_dir

NO_FILE = "(none: every value is a built-in default)"


def _state_dir(start: Path | None, environ: Mapping[str, str] | None) -> Path:
    return find_state_dir(start, environ)


def _nest(flat: Mapping) -> dict:
    """`{"runner.concurrency": 8, "model": {...}}` -> nested dicts (top-level keys may be dotted)."""
    out: dict = {}
    for key, value in flat.items():
        if value is None:  # "not overridden": lets callers pass optional CLI flags straight through
            continue
        parts = str(key).split(".")
        cur = out
        for part in parts[:-1]:
            nxt = cur.get(part)
            if not isinstance(nxt, dict):
                nxt = cur[part] = {}
            cur = nxt
        last = parts[-1]
        if isinstance(value, Mapping) and isinstance(cur.get(last), dict):
            _merge(cur[last], value)
        else:
            cur[last] = _copy(value)
    return out


def _copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _copy(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_copy(v) for v in value]
    return value


def _merge(into: dict, value: Mapping) -> None:
    for k, v in value.items():
        if isinstance(v, Mapping) and isinstance(into.get(k), dict):
            _merge(into[k], v)
        else:
            into[str(k)] = _copy(v)


# --- the Config object -----------------------------------------------------------------------


def _unknown_path(path: str, node: schema.Node, part: str) -> ConfigError:
    section = f"[{node.dotted}]" if node.path else "the top level (sections)"
    if node.kind == "leaf":
        return ConfigError(f"unknown config key '{path}': '{node.dotted}' is a single value, not a table",
                           hint=f"use '{node.dotted}'")
    valid = [c.dotted for c in node.children.values()]
    every = [n.dotted for n in schema.all_nodes()]
    close = difflib.get_close_matches(path, every, n=1, cutoff=0.6)
    if not close:
        close = [n.dotted for n in schema.all_nodes() if n.path[-1] == part][:1]
    hint = f"did you mean '{close[0]}'?" if close else "run `agentenv config show` to list every key"
    return ConfigError(f"unknown config key '{path}'", problems=[f"valid keys in {section}: {', '.join(valid)}"],
                       hint=hint)


class Config(ReferenceResolution):
    """The resolved configuration of one project. Build it with `load_config()`.

    Values are read by dotted path (`get("runner.concurrency")`); references are resolved on each
    read, so `env:`/`secret:` values follow the environment and the secrets file.
    """

    def __init__(self, *, state_dir: Path, file_path: Path | None, entries: dict[Path_, list[Entry]],
                 warnings: list[str], environ: Mapping[str, str] | None, secret_store: Any = None) -> None:
        self._state_dir = state_dir
        self._file_path = file_path
        self._entries = entries
        self._warnings = list(warnings)
        self._environ = environ
        self._secret_store = secret_store
        self._store_building = False
        self._live = self._compute_live()

    def __repr__(self) -> str:
        return f"Config(file_path={str(self._file_path)!r}, state_dir={str(self._state_dir)!r})"

    # -- basic properties ---------------------------------------------------------------------

    @property
    def file_path(self) -> Path | None:
        return self._file_path

    @property
    def state_dir(self) -> Path:
        return self._state_dir

    @property
    def paths(self) -> ProjectPaths:
        return ProjectPaths(self._state_dir)

    @property
    def warnings(self) -> list[str]:
        return list(self._warnings)

    @property
    def environ(self) -> Mapping[str, str]:
        return os.environ if self._environ is None else self._environ

    @staticmethod
    def keys() -> list[str]:
        """Every key path the schema knows (free-form tables listed by their own path)."""
        return [n.dotted for n in schema.all_nodes() if n.kind != "section"]

    # -- layering -------------------------------------------------------------------------------

    def _compute_live(self) -> dict[Path_, Entry]:
        """The winning entry of every path, minus those a higher layer replaced wholesale."""
        winners = {p: stack[-1] for p, stack in self._entries.items() if stack}
        live: dict[Path_, Entry] = {}
        for path, entry in winners.items():
            hidden = False
            for other, o in winners.items():
                if o.layer <= entry.layer or other == path:
                    continue
                n = len(other)
                if n < len(path) and path[:n] == other and o.value != {}:
                    hidden = True  # a higher layer set a single value where this table was
                elif len(path) < n and other[:len(path)] == path and entry.value != {}:
                    hidden = True  # a higher layer made a table where this single value was
                if hidden:
                    break
            if not hidden:
                live[path] = entry
        return live

    def _locate(self, path: str) -> tuple[schema.Node, Path_]:
        parts = tuple(p for p in path.split(".")) if path else ()
        if any(p == "" for p in parts):
            raise ConfigError(f"malformed config path {path!r}", hint="write dotted keys like runner.concurrency")
        node = schema.root()
        for i, part in enumerate(parts):
            if node.kind == "table":
                return node, parts[i:]
            child = node.children.get(part) if node.kind == "section" else None
            if child is None:
                raise _unknown_path(path, node, part)
            node = child
        return node, ()

    def _under(self, prefix: Path_) -> list[Path_]:
        n = len(prefix)
        return sorted(p for p in self._live if len(p) > n and p[:n] == prefix)

    def _tree(self, prefix: Path_, *, resolve: bool) -> dict:
        """The live entries under a free-form path, nested (resolved, or raw as written)."""
        out: dict = {}
        for path in sorted(self._under(prefix), key=len):
            value = self._live[path].value
            if resolve:
                value = self._resolve(path, value, None)[0]
            _set_nested(out, path[len(prefix):], value)
        return out

    def _value(self, node: schema.Node, rest: Path_, *, resolve: bool) -> tuple[bool, Any]:
        """(found, value) for a located path."""
        if node.kind == "leaf":
            entry = self._live.get(node.path)
            if entry is None:
                return False, None
            return True, self._resolve(node.path, entry.value, node)[0] if resolve else entry.value
        if node.kind == "section":
            out = {}
            for name, child in node.children.items():
                out[name] = self._value(child, (), resolve=resolve)[1]
            return True, out
        full = node.path + rest
        entry = self._live.get(full)
        if entry is not None and entry.value != {}:
            return True, self._resolve(full, entry.value, None)[0] if resolve else entry.value
        if entry is not None or self._under(full):
            return True, self._tree(full, resolve=resolve)
        if not rest or (len(rest) == 1 and node.items_are_tables):
            return True, {}
        return False, None

    # -- public reading API -------------------------------------------------------------------

    def get(self, path: str, default: Any = None) -> Any:
        """The resolved value at a dotted path; a table path gives a plain dict ({} if absent).

        `default` is returned when the value is unset (None) or absent from a free-form table.
        An unknown path (a typo in code) raises ConfigError listing the valid keys.
        """
        node, rest = self._locate(path)
        found, value = self._value(node, rest, resolve=True)
        if not found or value is None:
            return default
        return value

    def raw(self, path: str, default: Any = None) -> Any:
        """Like `get`, but references are returned as written (`secret:OPENAI_KEY`)."""
        node, rest = self._locate(path)
        found, value = self._value(node, rest, resolve=False)
        if not found or value is None:
            return default
        return value

    def section(self, name: str) -> dict:
        """A table (`"runner"`, `"model.roles"`, `"sandbox.providers.podman"`) as a resolved dict."""
        node, rest = self._locate(name)
        if node.kind == "leaf":
            raise ConfigError(f"'{name}' is a single value, not a section", hint=f"use get({name!r})")
        value = self.get(name)
        if not isinstance(value, dict):
            raise ConfigError(f"'{name}' is a single value, not a section", hint=f"use get({name!r})")
        return value

    def settings(self) -> schema.Settings:
        """Every value resolved into a `Settings` object (raises if a reference is missing)."""
        return schema.Settings.from_values(self.get(""))

    # -- provenance -----------------------------------------------------------------------------

    def _explain_leaf(self, path: Path_, node: schema.Node | None) -> dict:
        stack = self._entries.get(path, [])
        entry = self._live.get(path)
        out: dict[str, Any] = {"path": dotted(path), "value": None, "source": "default", "shadowed": [],
                               "ref": None}
        lower = stack
        if entry is not None:
            ref = parse_ref(entry.value)
            out["source"] = entry.source
            out["ref"] = ref.text if ref else None
            try:
                out["value"] = self._resolve(path, entry.value, node)[1]
            except ConfigError as exc:
                out["error"] = exc.message + (f" ({exc.hint})" if exc.hint else "")
            lower = stack[:-1]
        out["shadowed"] = [_shadow(path, e) for e in reversed(lower) if e.value is not None]
        if node is not None:
            out.update(type=node.expects, default=mask_value(path, node.default), description=node.description,
                       env_var=node.env_var)
        return out

    def _display_paths(self, node: schema.Node | None = None) -> list[tuple[Path_, schema.Node | None]]:
        """Every leaf path to show under a node (free-form tables: their live keys, or the table)."""
        nodes = schema.all_nodes() if node is None else [node] + [
            n for n in schema.all_nodes() if n.path[:len(node.path)] == node.path and n is not node]
        out: list[tuple[Path_, schema.Node | None]] = []
        for n in nodes:
            if n.kind == "leaf":
                out.append((n.path, n))
            elif n.kind == "table":
                inside = [p for p in self._under(n.path)
                          if not (self._live[p].value == {} and self._under(p))]
                if inside:
                    out.extend((p, None) for p in inside)
                else:
                    out.append((n.path, n))
        return out

    def explain(self, path: str) -> dict:
        """Where the value at `path` came from: value (masked), source, shadowed lower layers, ref."""
        node, rest = self._locate(path)
        if node.kind == "leaf":
            return self._explain_leaf(node.path, node)
        full = node.path + rest
        if node.kind == "table" and rest:
            entry = self._live.get(full)
            if (entry is not None and entry.value != {}) or (entry is None and not self._under(full)):
                out = self._explain_leaf(full, None)
                if entry is None and len(rest) == 1 and node.items_are_tables:
                    out["value"] = {}
                return out
            targets: list[tuple[Path_, schema.Node | None]] = [
                (p, None) for p in self._under(full) if not (self._live[p].value == {} and self._under(p))]
        else:
            targets = self._display_paths(node)
        value: dict = {}
        children = []
        for p, n in targets:
            if n is not None and n.kind == "table":  # an empty free-form table
                _set_nested(value, p[len(full):], {})
                continue
            child = self._explain_leaf(p, n)
            children.append(child)
            _set_nested(value, p[len(full):], child["value"])
        sources = sorted({c["source"] for c in children if c["source"] != "default"})
        source = sources[0] if len(sources) == 1 else ("mixed" if sources else "default")
        return {"path": dotted(full), "value": value, "source": source, "shadowed": [], "ref": None,
                "children": children, "description": "" if rest else node.description}

    def show(self) -> dict:
        """Every key: resolved value (masked) and source; plus the file, the state dir and warnings."""
        keys: dict[str, dict] = {}
        warnings = list(self._warnings)
        for path, node in self._display_paths():
            if node is not None and node.kind == "table":
                keys[dotted(path)] = {"value": {}, "source": "default"}
                continue
            info = self._explain_leaf(path, node)
            row = {"value": info["value"], "source": info["source"]}
            if info["ref"]:
                row["ref"] = info["ref"]
            if "error" in info:
                row["error"] = info["error"]
                warnings.append(f"{info['path']}: {info['error']}")
            keys[dotted(path)] = row
        return {"file": str(self._file_path) if self._file_path else None, "state_dir": str(self._state_dir),
                "warnings": warnings, "keys": keys}


def _set_nested(target: dict, rel: Path_, value: Any) -> None:
    if not rel:
        return
    cur = target
    for part in rel[:-1]:
        nxt = cur.get(part)
        if not isinstance(nxt, dict):
            nxt = cur[part] = {}
        cur = nxt
    if value == {} and isinstance(cur.get(rel[-1]), dict):
        return
    cur[rel[-1]] = value


def _show_raw(path: Path_, value: Any) -> Any:
    """A stored value as it may be shown without resolving: refs as written, secrets masked."""
    if parse_ref(value) is not None:
        return value
    if isinstance(value, dict):
        return {k: _show_raw(path + (str(k),), v) for k, v in value.items()}
    if isinstance(value, list):
        return [_show_raw(path, v) for v in value]
    return mask_value(path, value)


def _shadow(path: Path_, entry: Entry) -> dict:
    out = {"source": entry.source, "value": _show_raw(path, entry.value)}
    ref = parse_ref(entry.value)
    if ref is not None:
        out["ref"] = ref.text
    return out


# --- load_config -----------------------------------------------------------------------------


def load_config(start: Path | None = None, overrides: Mapping[str, Any] | None = None,
                environ: Mapping[str, str] | None = None, *, secret_store: Any = None) -> Config:
    """Load the project's configuration.

    `start`: where to look for `.agentenv/` (default: the current directory). `overrides`: code
    values, highest precedence, as dotted keys (`{"runner.concurrency": 8}`) or nested dicts; a
    None value means "not overridden". `environ`: the environment to read (default os.environ).
    `secret_store`: anything with `get(name) -> str | None`, instead of the `[secrets]` one.
    """
    env = os.environ if environ is None else environ
    state_dir = _state_dir(Path(start) if start is not None else None, environ)
    file_path = discover(state_dir, env)

    entries: dict[Path_, list[Entry]] = {}

    def add(path: Path_, entry: Entry) -> None:
        entries.setdefault(path, []).append(entry)

    for node in schema.leaves():
        add(node.path, Entry(node.default, "default", LAYER_DEFAULT))
    if file_path is not None:
        for path, value in check_tree(read_toml(file_path), str(file_path)).items():
            add(path, Entry(value, f"file:{file_path}", LAYER_FILE))
    env_entries, warnings = env_layer(env)
    for path, entry in env_entries.items():
        add(path, entry)
    if overrides:
        for path, value in check_tree(_nest(overrides), "the overrides passed in code").items():
            add(path, Entry(value, "code", LAYER_CODE))
    return Config(state_dir=state_dir, file_path=file_path, entries=entries, warnings=warnings,
                  environ=environ, secret_store=secret_store)
