"""Checking a layer against the schema: a nested mapping (the file, code overrides) or the `AGENTENV_*`
variables, into checked leaf entries. Unknown keys and wrong types are errors naming where they came from;
`env:`/`secret:` references are checked for shape only (they are resolved when read)."""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentenv_local.config import schema
from agentenv_local.config.masking import mask_value
from agentenv_local.config.refs import parse_ref
from agentenv_local.errors import ConfigError

Path_ = tuple[str, ...]

LAYER_DEFAULT, LAYER_FILE, LAYER_ENV, LAYER_CODE = range(4)


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


def dotted(path: Path_) -> str:
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


def _unknown(node: schema.Node, key: str) -> _Problem:
    path = node.path + (key,)
    valid = list(node.children)
    section = f"[{node.dotted}]" if node.path else "the top level (sections)"
    close = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
    if close:
        hint: str | None = f"did you mean '{dotted(node.path + (close[0],))}'?"
    else:
        same = [n.dotted for n in schema.all_nodes() if n.path[-1] == key]
        hint = f"did you mean '{same[0]}'?" if same else None
    what = "section" if not node.path else "key"
    return _Problem(f"unknown {what} '{dotted(path)}'", [f"valid keys in {section}: {', '.join(valid)}"], hint)


def _bad_type(path: Path_, expects: str, value: Any) -> _Problem:
    return _Problem(f"'{dotted(path)}' must be {expects}, got {_fmt(path, value)} ({_kind(value)})", [])


def _bad_refs(path: Path_, value: Any) -> list[_Problem]:
    ref = parse_ref(value)
    if ref is not None:
        if not ref.valid_name:
            return [_Problem(f"'{dotted(path)}' has a malformed reference {value!r}",
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
        checked = node.check(value)
    except ValueError:
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
                problems.append(_bad_type(path, f"a table ([{dotted(path)}])", item))
                continue
            item = dict(item)
        elif parse_ref(item) is None:
            try:
                item = node.check_item(item)
            except ValueError:
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
                value = node.check(schema.parse_text(node.annotation, text))
            except ValueError:
                problems.append(_Problem(
                    f"{var}={_fmt(node.path, text)}: '{node.dotted}' must be {node.expects}", [],
                    f"fix or unset {var}" + (" (lists are comma-separated)" if "list" in node.expects else "")))
                continue
        entries[node.path] = Entry(value, f"env:{var}", LAYER_ENV)
    _raise(problems, "the environment")
    return entries, warnings
