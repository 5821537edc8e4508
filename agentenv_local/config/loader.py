"""Load the configuration: find the one file, stack four layers, resolve references on read.

Layers, lowest first: built-in default < the config file < `AGENTENV_*` variables < code overrides.
Each layer is checked against the schema as it is read (unknown keys and wrong types are errors
naming where they came from); `env:`/`secret:` references are checked for shape only and resolved
when a value is read (`Config.get`), so a missing secret only matters to code that needs it.

Inside free-form tables (`[sandbox.providers.<name>]`, `[plugins.<dist>]`, `[model.headers]`) the
layers merge key by key: an override of one provider setting keeps the file's other settings.
"""

from __future__ import annotations

import difflib
import json
import math
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError as PydanticValidationError

from agentenv_local.config import schema
from agentenv_local.config.masking import MASK, is_secret_key, mask_value, url_userinfo
from agentenv_local.config.refs import Ref, parse_ref
from agentenv_local.errors import ConfigError
from agentenv_local.nofollow import file_kind
from agentenv_local.paths import ProjectPaths, find_state_dir
from agentenv_local.untrusted import UntrustedInputError, parse_toml

Path_ = tuple[str, ...]

NO_FILE = "(none: every value is a built-in default)"
_LAYER_DEFAULT, _LAYER_FILE, _LAYER_ENV, _LAYER_CODE = range(4)


@dataclass(frozen=True)
class Entry:
    value: Any
    source: str  # "default" | "file:<path>" | "env:<VAR>" | "code"
    layer: int


@dataclass
class _Problem:
    message: str
    detail: list[str]
    hint: str | None = None


def _dotted(path: Path_) -> str:
    return ".".join(path)


def _fmt(path: Path_, value: Any) -> str:
    """A value for an error message: secrets masked, TOML-ish spelling."""
    shown = mask_value(path, value)
    if isinstance(shown, float) and not math.isfinite(shown):
        return str(shown)  # TOML spells them inf and nan (JSON's Infinity would confuse)
    try:
        text = json.dumps(shown, default=str, ensure_ascii=False)
        text.encode("utf-8")
    except (TypeError, ValueError):  # a lone surrogate, or an integer past Python's digit limit
        text = repr(type(shown).__name__)
    return text if len(text) <= 80 else f"{text[:60]}... ({len(text)} characters)"


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a table"
    return f"a {type(value).__name__}"


def _raise(problems: list[_Problem], where: str) -> None:
    if not problems:
        return
    if len(problems) == 1:
        p = problems[0]
        raise ConfigError(f"{p.message} in {where}", problems=p.detail,
                          hint=p.hint or f"fix it in {where}, then check with `agentenv config show`")
    lines = []
    for p in problems:
        line = p.message
        if p.detail:
            line += " (" + "; ".join(p.detail) + ")"
        if p.hint:
            line += f": {p.hint}"
        lines.append(line)
    raise ConfigError(f"{len(problems)} problems in {where}", problems=lines,
                      hint=f"fix them in {where}, then check with `agentenv config show`")


# --- discovery and reading ---------------------------------------------------------------------


def _state_dir(start: Path | None, environ: Mapping[str, str] | None) -> Path:
    return find_state_dir(start, environ)


def discover(state_dir: Path, environ: Mapping[str, str]) -> Path | None:
    """The one config file: $AGENTENV_CONFIG (must exist), else `<state dir>/config.toml` if present."""
    named = environ.get("AGENTENV_CONFIG")
    if named:
        path = Path(named).expanduser()
        path = path if path.is_absolute() else Path.cwd() / path
        if str(path) == os.devnull:  # the usual way to say "no config file at all"
            return None
        problem = _not_a_config_file(path)
        if problem:
            raise ConfigError(f"AGENTENV_CONFIG points to {problem}: {path}",
                              hint="fix the path in AGENTENV_CONFIG, or unset it to use .agentenv/config.toml")
        return path.resolve()
    candidate = state_dir / "config.toml"
    problem = _not_a_config_file(candidate)
    if problem == "a missing file":
        return None
    if problem:
        raise ConfigError(f"the config file {candidate} is {problem}",
                          hint=f"replace it with a TOML file, or move it aside: mv {candidate} {candidate}.bak")
    return candidate


MAX_CONFIG_BYTES = 1 << 20  # a config file is a few KB; more is a mistake (or /dev/zero)


def _not_a_config_file(path: Path) -> str | None:
    """Why `path` cannot be the config file (None if it is a regular file)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return "a missing file"
    except OSError as exc:
        return f"a path that cannot be checked ({exc.strerror or exc})"
    if stat.S_ISDIR(st.st_mode):
        return "a directory"
    if not stat.S_ISREG(st.st_mode):
        return f"{file_kind(st.st_mode)}, not a regular file"
    if st.st_size > MAX_CONFIG_BYTES:
        return f"a file of {st.st_size} bytes, over the limit of {MAX_CONFIG_BYTES} for a config file"
    return None


def read_toml(path: Path) -> dict:
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read the config file {path}: {exc.strerror or exc}",
                          hint="check that the file exists and that you may read it") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"the config file {path} is over the limit of {MAX_CONFIG_BYTES} bytes",
                          hint="a config file is a few lines of TOML; check that it is the right file")
    try:
        text = raw.decode("utf-8-sig")  # a UTF-8 BOM is tolerated
    except UnicodeDecodeError as exc:
        raise ConfigError(f"the config file {path} is not UTF-8 text (bad byte at offset {exc.start})",
                          hint="save it as UTF-8") from None
    try:
        return parse_toml(text, what=f"the config file {path}")
    except UntrustedInputError as exc:
        msg = str(exc)
        m = re.search(r"\(at line (\d+), column (\d+)\)", msg)
        if m or "not valid TOML" in msg:  # a syntax error: say where, as tomllib does
            where = f"line {m.group(1)}, column {m.group(2)}" if m else "at the end of the file"
            reason = msg.split(" is not valid TOML: ", 1)[-1]
            reason = re.sub(r"\s*\(at (line \d+, column \d+|end of document)\)\s*$", "", reason)
            raise ConfigError(f"cannot parse {path}: {where}: {reason}",
                              hint="fix the TOML syntax there (https://toml.io), then run `agentenv config show`",
                              ) from None
        raise ConfigError(msg,
                          hint="fix that value, then run `agentenv config show`") from None


# --- checking one layer against the schema ---------------------------------------------------


def _unknown(node: schema.Node, key: str) -> _Problem:
    path = node.path + (key,)
    valid = list(node.children)
    section = f"[{node.dotted}]" if node.path else "the top level (sections)"
    close = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
    if close:
        hint: str | None = f"did you mean '{_dotted(node.path + (close[0],))}'?"
    else:
        same = [n.dotted for n in schema.all_nodes() if n.path[-1] == key]
        hint = f"did you mean '{same[0]}'?" if same else None
    what = "section" if not node.path else "key"
    return _Problem(f"unknown {what} '{_dotted(path)}'", [f"valid keys in {section}: {', '.join(valid)}"], hint)


def _bad_type(path: Path_, expects: str, value: Any) -> _Problem:
    return _Problem(f"'{_dotted(path)}' must be {expects}, got {_fmt(path, value)} ({_kind(value)})", [])


def _bad_refs(path: Path_, value: Any) -> list[_Problem]:
    ref = parse_ref(value)
    if ref is not None:
        if not ref.valid_name:
            return [_Problem(f"'{_dotted(path)}' has a malformed reference {value!r}",
                             [f"write {ref.kind}:NAME or {ref.kind}:NAME?default (NAME: letters, digits, _ . - /)"])]
        return []
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _bad_refs(path + (str(k),), v)]
    if isinstance(value, list):
        return [p for v in value for p in _bad_refs(path, v)]
    return []


def _check_leaf(node: schema.Node, value: Any, problems: list[_Problem]) -> tuple[bool, Any]:
    if parse_ref(value) is not None:  # checked for its type when it is resolved
        bad = _bad_refs(node.path, value)
        problems.extend(bad)
        return not bad, value
    try:
        checked = node.adapter().validate_python(value, strict=True)
    except PydanticValidationError:
        problems.append(_bad_type(node.path, node.expects, value))
        return False, None
    bad = _bad_refs(node.path, checked)
    problems.extend(bad)
    return not bad, checked


def _flatten(path: Path_, value: Any, out: dict[Path_, Any]) -> None:
    if isinstance(value, dict) and value:
        for k, v in value.items():
            _flatten(path + (str(k),), v, out)
    else:
        out[path] = value


def _walk(node: schema.Node, data: Mapping, out: dict[Path_, Any], problems: list[_Problem]) -> None:
    for key, value in data.items():
        key = str(key)
        child = node.children.get(key)
        if child is None:
            problems.append(_unknown(node, key))
            continue
        if child.kind == "section":
            if isinstance(value, Mapping):
                _walk(child, value, out, problems)
            else:
                problems.append(_bad_type(child.path, f"a table ([{child.dotted}])", value))
        elif child.kind == "leaf":
            ok, checked = _check_leaf(child, value, problems)
            if ok:
                out[child.path] = checked
        else:
            _walk_table(child, value, out, problems)


def _walk_table(node: schema.Node, value: Any, out: dict[Path_, Any], problems: list[_Problem]) -> None:
    if not isinstance(value, Mapping):
        problems.append(_bad_type(node.path, f"a table ([{node.dotted}])", value))
        return
    for key, item in value.items():
        path = node.path + (str(key),)
        if node.items_are_tables:
            if not isinstance(item, Mapping):
                problems.append(_bad_type(path, f"a table ([{_dotted(path)}])", item))
                continue
            item = dict(item)
        elif parse_ref(item) is None:
            try:
                item = node.item_adapter().validate_python(item, strict=True)
            except PydanticValidationError:
                problems.append(_bad_type(path, schema.describe_type(node.item_annotation), item))
                continue
        bad = _bad_refs(path, item)
        if bad:
            problems.extend(bad)
            continue
        _flatten(path, item, out)


def check_tree(data: Mapping, where: str) -> dict[Path_, Any]:
    """Every leaf of a nested mapping (a file, or code overrides), checked; raise on any problem."""
    out: dict[Path_, Any] = {}
    problems: list[_Problem] = []
    _walk(schema.root(), data, out, problems)
    _raise(problems, where)
    return out


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


def env_layer(environ: Mapping[str, str]) -> tuple[dict[Path_, Entry], list[str]]:
    """Entries from `AGENTENV_*` variables that name a key, and warnings for those that do not."""
    known = schema.env_vars()
    entries: dict[Path_, Entry] = {}
    warnings: list[str] = []
    problems: list[_Problem] = []
    for var in sorted(environ):
        if not var.startswith(schema.ENV_PREFIX) or var in schema.RESERVED_ENV:
            continue
        node = known.get(var)
        if node is None:
            close = difflib.get_close_matches(var, list(known), n=1, cutoff=0.8)
            warnings.append(f"{var} is set but matches no config key (ignored)"
                            + (f"; did you mean {close[0]}?" if close else ""))
            continue
        text = environ[var]
        if text == "":  # `AGENTENV_X= cmd` means "not set"
            continue
        if parse_ref(text) is not None:
            bad = _bad_refs(node.path, text)
            if bad:
                problems.extend(_Problem(f"{var}: {p.message}", p.detail) for p in bad)
                continue
            value = text
        else:
            try:
                value = node.adapter().validate_python(schema.parse_text(node.annotation, text), strict=True)
            except (ValueError, PydanticValidationError):
                problems.append(_Problem(
                    f"{var}={_fmt(node.path, text)}: '{node.dotted}' must be {node.expects}", [],
                    f"fix or unset {var}" + (" (lists are comma-separated)" if "list" in node.expects else "")))
                continue
        entries[node.path] = Entry(value, f"env:{var}", _LAYER_ENV)
    _raise(problems, "the environment")
    return entries, warnings


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


class Config:
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

    # -- references -----------------------------------------------------------------------------

    def secret_store(self):
        """The secret store `secret:` refs read ([secrets] file, use_env)."""
        if self._secret_store is None:
            from agentenv_local.plugins import registry

            # Stores register as plugins (the core never imports the stores package directly).
            SecretStore: Any = registry().get("stores", "secrets")
            if SecretStore is None:
                why = registry().failure("stores", "secrets") or "nothing is registered under that name"
                raise ConfigError(f"no secrets store to read `secret:` references with: the 'secrets' store "
                                  f"plugin (entry point group agentenv_local.stores) is not available ({why})",
                                  hint="reinstall agentenv-local (pip install -e .), and see what failed to load "
                                       "with `agentenv plugin check`")

            self._store_building = True
            try:
                file_value = self.get("secrets.file")
                use_env = self.get("secrets.use_env")
            finally:
                self._store_building = False
            path = Path(str(file_value)).expanduser()
            if not path.is_absolute():
                path = self._state_dir / path
            self._secret_store = SecretStore(path, use_env=bool(use_env), environ=self._environ)
        return self._secret_store

    def _resolve_ref(self, path: Path_, ref: Ref) -> str:
        dotted = _dotted(path)
        if ref.kind == "env":
            value = self.environ.get(ref.name)
            if value is not None:
                return value
            if ref.default is not None:
                return ref.default
            raise ConfigError(f"'{dotted}' is {ref.text}, but the environment variable {ref.name} is not set",
                              hint=f"export {ref.name}=..., or give a default: env:{ref.name}?VALUE")
        if self._store_building:
            raise ConfigError(f"'{dotted}' cannot be a secret: reference (it says where secrets are)",
                              hint="use a plain path or an env: reference")
        store = self.secret_store()
        value = store.get(ref.name)
        if value is not None:
            return value
        if ref.default is not None:
            return ref.default
        hint = store.how_to_set(ref.name) if hasattr(store, "how_to_set") else f"set the secret {ref.name}"
        where = store.where() if hasattr(store, "where") else "the secret store"
        raise ConfigError(f"'{dotted}' is {ref.text}, but no secret named {ref.name} was found (looked in {where})",
                          hint=f"{hint}; or give a default: secret:{ref.name}?VALUE")

    def _coerce(self, node: schema.Node, path: Path_, ref: Ref, text: str) -> Any:
        try:
            return node.adapter().validate_python(schema.parse_text(node.annotation, text), strict=True)
        except (ValueError, PydanticValidationError):
            raise ConfigError(f"'{_dotted(path)}' is {ref.text}, which resolves to something that is not "
                              f"{node.expects}", hint=f"set {ref.name} to {node.expects}") from None

    def _resolve(self, path: Path_, value: Any, node: schema.Node | None) -> tuple[Any, Any]:
        """(resolved value, the same value as it may be shown)."""
        ref = parse_ref(value)
        if ref is not None:
            text = self._resolve_ref(path, ref)
            out = self._coerce(node, path, ref, text) if node is not None and node.kind == "leaf" else text
            return out, (MASK if ref.kind == "secret" else mask_value(path, out))
        if isinstance(value, dict):
            res, shown = {}, {}
            for k, v in value.items():
                res[k], shown[k] = self._resolve(path + (str(k),), v, None)
            return res, shown
        if isinstance(value, list):
            pairs = [self._resolve(path, v, None) for v in value]
            return [p[0] for p in pairs], [p[1] for p in pairs]
        return value, mask_value(path, value)

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

    def settings(self):
        """Every value resolved into the typed `Settings` model (raises if a reference is missing)."""
        return schema.Settings.model_validate(self.get(""))

    # -- provenance -----------------------------------------------------------------------------

    def _explain_leaf(self, path: Path_, node: schema.Node | None) -> dict:
        stack = self._entries.get(path, [])
        entry = self._live.get(path)
        out: dict[str, Any] = {"path": _dotted(path), "value": None, "source": "default", "shadowed": [],
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
        return {"path": _dotted(full), "value": value, "source": source, "shadowed": [], "ref": None,
                "children": children, "description": "" if rest else node.description}

    def show(self) -> dict:
        """Every key: resolved value (masked) and source; plus the file, the state dir and warnings."""
        keys: dict[str, dict] = {}
        warnings = list(self._warnings)
        for path, node in self._display_paths():
            if node is not None and node.kind == "table":
                keys[_dotted(path)] = {"value": {}, "source": "default"}
                continue
            info = self._explain_leaf(path, node)
            row = {"value": info["value"], "source": info["source"]}
            if info["ref"]:
                row["ref"] = info["ref"]
            if "error" in info:
                row["error"] = info["error"]
                warnings.append(f"{info['path']}: {info['error']}")
            keys[_dotted(path)] = row
        return {"file": str(self._file_path) if self._file_path else None, "state_dir": str(self._state_dir),
                "warnings": warnings, "keys": keys}

    def secret_values(self) -> list[str]:
        """Every secret value the config currently holds, resolved (to scrub from text).

        Values of `secret:` references, values under secret-shaped keys (however they were given)
        and the userinfo of URLs. References that cannot be resolved are skipped.
        """
        found: set[str] = set()

        def collect(path: Path_, value: Any, node: schema.Node | None) -> None:
            ref = parse_ref(value)
            if ref is not None:
                try:
                    resolved = self._resolve(path, value, node)[0]
                except ConfigError:
                    return
                if ref.kind == "secret" or is_secret_key(path):
                    found.add(str(resolved))
                elif isinstance(resolved, str):
                    found.update(url_userinfo(resolved))
                return
            if isinstance(value, dict):
                for k, v in value.items():
                    collect(path + (str(k),), v, None)
            elif isinstance(value, list):
                for v in value:
                    collect(path, v, None)
            elif isinstance(value, str):
                if is_secret_key(path):
                    found.add(value)
                found.update(url_userinfo(value))

        leaf_nodes = {n.path: n for n in schema.leaves()}
        for path, entry in self._live.items():
            collect(path, entry.value, leaf_nodes.get(path))
        return sorted(v for v in found if v)


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
        add(node.path, Entry(node.default, "default", _LAYER_DEFAULT))
    if file_path is not None:
        for path, value in check_tree(read_toml(file_path), str(file_path)).items():
            add(path, Entry(value, f"file:{file_path}", _LAYER_FILE))
    env_entries, warnings = env_layer(env)
    for path, entry in env_entries.items():
        add(path, entry)
    if overrides:
        for path, value in check_tree(_nest(overrides), "the overrides passed in code").items():
            add(path, Entry(value, "code", _LAYER_CODE))
    return Config(state_dir=state_dir, file_path=file_path, entries=entries, warnings=warnings,
                  environ=environ, secret_store=secret_store)
