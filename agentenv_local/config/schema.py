"""Every configuration key in one place: section classes plus a catalogue derived from them.

To add a key, add a `key(...)` (with a default and a `description`) to the right section class below.
Everything else (file validation, `AGENTENV_*` variables, `config show/explain`, the docs test)
reads the catalogue built from these classes, so nothing else needs to change.

Field kinds:
- a nested `Section` class is a TOML table with a fixed set of keys;
- a `dict[str, X]` field is a free-form table: any key is allowed, each value must be an X;
- anything else is a leaf key with a type (checked strictly: `"8"` is not an integer).

Checking is our own (`check_value`), not pydantic's: every `agentenv` command loads the configuration, and
importing pydantic to build these models cost a short command 0.13 s of its 0.6 s of CPU.
"""

import json
import math
import re
import types
from functools import lru_cache
from typing import Any, Literal, Self, TypeGuard, Union, get_args, get_origin

ENV_PREFIX = "AGENTENV_"
# Environment variables with the prefix that are not config keys.
# not keys: the state directory, the config file, the event loop (agentenv_local/loops.py), one for tests, and
# the data-plane credential the hub gives the env servers it starts (agentenv_local/env/serve.py)
RESERVED_ENV = frozenset({"AGENTENV_HOME", "AGENTENV_CONFIG", "AGENTENV_LOOP", "AGENTENV_REQUIRE_PODMAN",
                          "AGENTENV_ADMIN_TOKEN"})

_NO_DEFAULT: Any = object()


class Key:
    """One key of a section: its default (or `factory` for a mutable one), description and constraints.

    `ge`/`gt`/`le`/`lt` bound a number, `min_length` a string, `pattern` a string (a full match),
    `item_min_length` each string of a list; `expects` replaces the description of the type in errors.
    """

    __slots__ = ("default", "factory", "description", "ge", "gt", "le", "lt", "min_length", "item_min_length",
                 "pattern", "expects")

    def __init__(self, default: Any = _NO_DEFAULT, *, factory: Any = None, description: str = "",
                 ge: float | None = None, gt: float | None = None, le: float | None = None, lt: float | None = None,
                 min_length: int | None = None, item_min_length: int | None = None, pattern: str | None = None,
                 expects: str = "") -> None:
        self.default, self.factory, self.description = default, factory, description
        self.ge, self.gt, self.le, self.lt = ge, gt, le, lt
        self.min_length, self.item_min_length = min_length, item_min_length
        self.pattern, self.expects = pattern, expects

    def make_default(self) -> Any:
        return self.factory() if self.factory is not None else self.default


def key(default: Any = _NO_DEFAULT, **constraints: Any) -> Any:
    """A section's key, as `concurrency: int = key(4, ge=1, description=...)` (typed `Any` so the class
    attribute type-checks as its annotation, the way dataclasses' `field()` does)."""
    return Key(default, **constraints)


_NO_CONSTRAINTS = Key()


class Section:
    """A TOML table with a fixed set of keys, declared as annotated class attributes.

    An instance holds checked values: `Settings()` is every default, `Settings.from_values(d)` checks `d`
    (unknown keys and wrong types raise ValueError).
    """

    def __init__(self) -> None:
        for name, ann, key in _fields(type(self)):
            setattr(self, name, ann() if _is_section(ann) else key.make_default())

    @classmethod
    def from_values(cls, values: dict[str, Any], prefix: str = "") -> Self:
        unknown = sorted(set(values) - {name for name, _, _ in _fields(cls)})
        if unknown:
            raise ValueError(f"unknown key {prefix}{unknown[0]}")
        out = cls()
        for name, ann, key in _fields(cls):
            if name not in values:
                continue
            value = values[name]
            if _is_section(ann):
                if not isinstance(value, dict):
                    raise ValueError(f"{prefix}{name} must be a table")
                setattr(out, name, ann.from_values(value, f"{prefix}{name}."))
            else:
                setattr(out, name, check_value(ann, key, value, f"{prefix}{name}"))
        return out


_FIELDS: dict[type, tuple[tuple[str, Any, Key], ...]] = {}


def _fields(cls: type[Section]) -> tuple[tuple[str, Any, Key], ...]:
    """(name, type, Key) of each key a section class declares, in declaration order."""
    if cls not in _FIELDS:
        _FIELDS[cls] = tuple((name, ann, cls.__dict__.get(name, _NO_CONSTRAINTS))
                             for name, ann in cls.__dict__.get("__annotations__", {}).items())
    return _FIELDS[cls]


# --- checking values ---------------------------------------------------------------------------


def check_value(annotation: Any, key: Key, value: Any, where: str = "value") -> Any:
    """`value` checked against a key's type and constraints, strictly (no `"8"` for 8); ValueError if it fails.

    Returns the value as stored: an integer given for a number becomes a float."""
    ann = annotation
    if get_origin(ann) in (Union, types.UnionType):
        args = get_args(ann)
        if value is None and type(None) in args:
            return None
        ann = _strip_optional(ann)
    if ann is Any:
        return value
    if get_origin(ann) is Literal:
        if isinstance(value, str) and value in get_args(ann):
            return value
    elif ann is bool:
        if isinstance(value, bool):
            return value
    elif ann is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return _bounded(value, key, where)
    elif ann is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return _bounded(float(value), key, where)
    elif ann is str:
        if isinstance(value, str):
            if key.min_length is not None and len(value) < key.min_length:
                raise ValueError(f"{where} must have at least {key.min_length} characters")
            if key.pattern is not None and re.fullmatch(key.pattern, value) is None:
                raise ValueError(f"{where} must match {key.pattern}")
            return value
    elif get_origin(ann) is list:
        if isinstance(value, list):
            (item_type,) = get_args(ann) or (Any,)
            item_key = Key(min_length=key.item_min_length)
            return [check_value(item_type, item_key, item, f"{where}[{i}]") for i, item in enumerate(value)]
    elif _is_dict(ann):
        if isinstance(value, dict):
            _, item_type = get_args(ann) or (str, Any)
            return {k: check_value(item_type, _NO_CONSTRAINTS, v, f"{where}.{k}") for k, v in value.items()}
    else:
        raise TypeError(f"{where}: the schema uses a type check_value does not know: {ann!r}")
    raise ValueError(f"{where} must be {describe_type(annotation, key)}")


def _bounded(number: float, key: Key, where: str) -> Any:
    if math.isnan(number) and any(b is not None for b in (key.ge, key.gt, key.le, key.lt)):
        raise ValueError(f"{where} must be a number, not NaN")
    ok = ((key.ge is None or number >= key.ge) and (key.gt is None or number > key.gt)
          and (key.le is None or number <= key.le) and (key.lt is None or number < key.lt))
    if not ok:
        raise ValueError(f"{where} must be {describe_type(type(number), key)}")
    return number


# --- sections --------------------------------------------------------------------------------


class StoreSettings(Section):
    """The project store (`.agentenv/store.duckdb`) and its event log."""

    flush_interval_ms: int = key(
        200, ge=10, le=5000,
        description="How often buffered events (trajectories, step journal) are flushed to the store, in ms.")
    objects: str = key(
        "local", min_length=1,
        description="The object store (artifact bytes): `local` (`.agentenv/objects`, the built-in) or an object store "
                    "a plugin adds; its settings are the plugin's `[plugins.<distribution>]` table. Change it with "
                    "`agentenv store migrate-objects --to NAME`, which copies the bytes first.")


class RunnerSettings(Section):
    """How much work the task runner does at once."""

    concurrency: int = key(
        4, ge=1, le=1000, description="How many runs a command keeps in flight when --concurrency is not given.")
    step_concurrency: int = key(8, ge=1, le=1000, description="How many ready steps of one run execute at once.")


class ScriptsSettings(Section):
    """Python scripts the steps run on this machine (`run_code`, `env_outcome_verifier`)."""

    warm: bool = key(
        True, description="Run each in a fresh fork of a warm worker with mcp and httpx imported (`false`: start a "
                          "fresh interpreter per script).")


class ExecutorSettings(Section):
    """Where runs execute: in the hub (`local`), in the hub's worker processes (`workers`), or on a Ray cluster's
    workers (`ray`; docs/scale-out.md)."""

    kind: Literal["auto", "local", "workers", "ray"] = key(
        "auto", description="`auto` (the worker processes of a hub that stays, `agentenv up`; the hub itself in a "
                            "one-shot command's hub), `local` (the hub runs them), `workers` (the hub's worker "
                            "processes, one per core) or `ray`; --executor wins.")
    workers: int = key(
        0, ge=0, le=256, description="How many worker processes `workers` starts; 0: one per core.")
    ray_address: str = key(
        "auto", description="The Ray cluster's head, HOST:PORT as `ray start --head` prints it; `auto`: the one "
                            "RAY_ADDRESS or this machine's running cluster names. --ray-address wins.")
    max_attempts: int = key(
        3, ge=1, le=20, description="How many workers a run may go through (worker processes and Ray): a lost one "
                                    "resumes it on another.")
    cancel_grace_s: float = key(
        15.0, gt=0, le=600, description="How long a cancelled Ray run's worker has to tear down before it is killed.")


class HubSettings(Section):
    """The hub: the one process per project that owns the store."""

    start_timeout_s: float = key(
        5.0, gt=0, le=600, description="How long a client waits for a hub it started to answer.")
    linger_s: float = key(
        0.0, ge=0, le=86400,
        description="How long a short-lived hub stays up after its own command ends when no client is attached.")


class SandboxSettings(Section):
    """Where envs and agents run."""

    default: str = key(
        "auto", min_length=1,
        description="The sandbox provider to use, or a comma-separated fallback chain (`podman,process`); "
                    "`auto` is podman where Podman answers, else process (with a one-line notice).")
    providers: dict[str, dict[str, Any]] = key(
        factory=dict,
        description="`[sandbox.providers.<name>]`: free-form settings handed to that provider.")


class EnvPoolSettings(Section):
    """Env pools: in-hub envs reset from a clean snapshot for the next deploy (docs/environments/deploying.md)."""

    size: int = key(
        4, ge=0, le=1000,
        description="How many idle instances the hub keeps per env version and deploy options; 0 turns pools off.")
    idle_seconds: float = key(
        300.0, gt=0, le=86400, description="How long an idle pooled instance is kept before it is stopped.")


class EnvsSettings(Section):
    """How the hub runs deployed envs."""

    pool: EnvPoolSettings = key(description="Env pools with snapshot reset.")


class AgentsSettings(Section):
    """Which agent runs where a task does not say."""

    default: str = key(
        "scripted", min_length=1,
        description="The agent `deploy_agent` starts when its step names none (`agentenv run --agent` overrides "
                    "it): a built-in (`scripted`, `tool-loop`, `human`), a stored agent id, or `file.py:Class`.")


class SecretsSettings(Section):
    """Where `secret:NAME` references are looked up."""

    file: str = key(
        "secrets.toml", min_length=1,
        description="The secrets file (flat TOML, or JSON if it ends in .json); relative to the state dir. "
                    "Must be mode 0600.")
    use_env: bool = key(True, description="Look secrets up in environment variables first (`secret:X` reads $X).")


class ModelRoles(Section):
    """Which model each role uses; unset roles use `model.default`."""

    agent: str | None = key(None, description="Model of the agent being evaluated (the solver).")
    user: str | None = key(None, description="Model of the simulated user.")
    judge: str | None = key(None, description="Model of the rubric judge.")


class ModelSettings(Section):
    """The model endpoint (OpenAI-compatible: Ollama, vLLM, llama.cpp, LiteLLM; or Anthropic) and per-role models."""

    base_url: str | None = key(None, description="Base URL of the endpoint, e.g. `http://127.0.0.1:11434/v1`.")
    api_key: str | None = key(None, description="API key sent to `base_url` only. Use `secret:NAME`.")
    api: str = key(
        "openai", pattern=r"^(openai|anthropic)$",
        description="The API `base_url` speaks: `openai` (Chat Completions) or `anthropic` (Messages).",
        expects='"openai" or "anthropic"')
    default: str | None = key(None, description="Model used by every role that has none of its own.")
    roles: ModelRoles = key(description="Per-role models.")
    headers: dict[str, str] = key(
        factory=dict,
        description="`[model.headers]`: extra HTTP headers sent to `base_url` only (values may be refs).")
    timeout_s: float = key(120.0, gt=0, le=86400, description="How long one model request may take, in seconds.")
    max_retries: int = key(
        3, ge=0, le=20, description="How many times a model request is retried on 429, 5xx or a connection error.")
    endpoints: dict[str, dict[str, Any]] = key(
        factory=dict,
        description="`[model.endpoints.<role>]`: another endpoint for one role (agent, user, judge): "
                    "`base_url`, `api`, `api_key`, `headers`, `timeout_s`, `max_retries`.")


class TaskStepsSettings(Section):
    """Extra task step types."""

    impls: list[str] = key(
        factory=list, item_min_length=1,
        description='Extra step types as `"module:Class"` strings, added to the installed ones.',
        expects='a list of "module:Class" strings')


class SecuritySettings(Section):
    """What the HTTP servers agentenv starts (gateways, env and agent servers) accept."""

    allowed_hosts: list[str] = key(
        factory=list, item_min_length=1,
        description="Host names (no port) accepted in the `Host` and `Origin` headers besides loopback "
                    "(127.0.0.1, localhost, [::1]), Podman's host alias 10.0.2.2 and the server's own address.")
    max_body_bytes: int = key(
        4 * 1024 * 1024, ge=1024, le=1 << 30,
        description="The largest request body (MCP, REST, A2A) a server reads; larger ones get 413.")
    max_data_body_bytes: int = key(
        128 * 1024 * 1024, ge=1024, le=1 << 34,
        description="The largest data-plane body (`POST /agentenv`: data/add with files); larger ones get 413.")


class Settings(Section):
    """The whole configuration (resolved values; see `Config.settings()`)."""

    store: StoreSettings
    runner: RunnerSettings
    executor: ExecutorSettings
    scripts: ScriptsSettings
    hub: HubSettings
    sandbox: SandboxSettings
    envs: EnvsSettings
    agents: AgentsSettings
    secrets: SecretsSettings
    model: ModelSettings
    task_steps: TaskStepsSettings
    security: SecuritySettings
    plugins: dict[str, dict[str, Any]] = key(
        factory=dict,
        description="`[plugins.<distribution>]`: each plugin's own free-form settings; core never reads them.")


# --- the catalogue ---------------------------------------------------------------------------


class Node:
    """One place in the schema: a section, a leaf key, or a free-form table."""

    __slots__ = ("path", "kind", "description", "annotation", "key", "default", "expects", "children",
                 "item_annotation")

    def __init__(self, path: tuple[str, ...], kind: Literal["section", "leaf", "table"], description: str = "",
                 annotation: Any = None, key: Key = _NO_CONSTRAINTS, default: Any = None, expects: str = "",
                 item_annotation: Any = None) -> None:
        self.path, self.kind, self.description = path, kind, description
        self.annotation, self.key, self.default, self.expects = annotation, key, default, expects
        self.children: dict[str, Node] = {}
        self.item_annotation = item_annotation  # tables: the type of each entry

    def __repr__(self) -> str:
        return f"Node({self.dotted or '<root>'}, {self.kind})"

    @property
    def dotted(self) -> str:
        return ".".join(self.path)

    @property
    def env_var(self) -> str | None:
        if self.kind != "leaf":
            return None
        return ENV_PREFIX + "_".join(self.path).upper()

    @property
    def items_are_tables(self) -> bool:
        return self.kind == "table" and _is_dict(self.item_annotation)

    def check(self, value: Any) -> Any:
        """The value checked against this leaf's type and constraints (ValueError if it fails)."""
        return check_value(self.annotation, self.key, value, self.dotted)

    def check_item(self, value: Any) -> Any:
        """One entry of this free-form table checked against the table's item type."""
        return check_value(self.item_annotation, _NO_CONSTRAINTS, value, self.dotted)


def _is_dict(annotation: Any) -> bool:
    return annotation is dict or get_origin(annotation) is dict


def _is_section(annotation: Any) -> TypeGuard[type[Section]]:
    return isinstance(annotation, type) and issubclass(annotation, Section)


def _build(section: type[Section], prefix: tuple[str, ...], description: str) -> Node:
    node = Node(prefix, "section", description=description or (section.__doc__ or "").strip())
    for name, ann, key in _fields(section):
        path = prefix + (name,)
        if _is_section(ann):
            node.children[name] = _build(ann, path, key.description)
        elif _is_dict(ann):
            args = get_args(ann)
            node.children[name] = Node(path, "table", description=key.description,
                                       item_annotation=args[1] if len(args) == 2 else Any, default={})
        else:
            node.children[name] = Node(path, "leaf", description=key.description, annotation=ann, key=key,
                                       default=key.make_default(), expects=key.expects or describe_type(ann, key))
    return node


@lru_cache(maxsize=1)
def root() -> Node:
    return _build(Settings, (), "")


@lru_cache(maxsize=1)
def all_nodes() -> tuple[Node, ...]:
    """Every section, leaf and table, depth first in declaration order (the order `show` uses)."""
    out: list[Node] = []

    def walk(node: Node) -> None:
        for child in node.children.values():
            out.append(child)
            walk(child)

    walk(root())
    return tuple(out)


def leaves() -> list[Node]:
    return [n for n in all_nodes() if n.kind == "leaf"]


@lru_cache(maxsize=1)
def env_vars() -> dict[str, Node]:
    """`AGENTENV_RUNNER_CONCURRENCY` -> the `runner.concurrency` node (matched by known paths)."""
    return {n.env_var: n for n in leaves() if n.env_var}


# --- types: describe, parse from text ---------------------------------------------------------


def _strip_optional(annotation: Any) -> Any:
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def describe_type(annotation: Any, key: Key = _NO_CONSTRAINTS) -> str:
    ann = _strip_optional(annotation)
    base = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}.get(ann)
    if base is None:
        if get_origin(ann) is list:
            inner = _strip_optional(get_args(ann)[0]) if get_args(ann) else Any
            base = {int: "a list of integers", float: "a list of numbers", str: "a list of strings"}.get(
                inner, "a list")
        elif _is_dict(ann):
            base = "a table"
        elif get_origin(ann) is Literal:
            base = " or ".join(json.dumps(choice) for choice in get_args(ann))
        else:
            base = getattr(ann, "__name__", str(ann))
    if key.min_length == 1 and ann is str:
        base = "a non-empty string"
    lo, lo_strict = (key.gt, True) if key.gt is not None else (key.ge, False)
    hi, hi_strict = (key.lt, True) if key.lt is not None else (key.le, False)
    if lo is not None and hi is not None and not lo_strict and not hi_strict:
        return f"{base} from {lo} to {hi}"
    parts = []
    if lo is not None:
        parts.append(f"{'>' if lo_strict else '>='} {lo}")
    if hi is not None:
        parts.append(f"{'<' if hi_strict else '<='} {hi}")
    return " ".join([base, " and ".join(parts)]) if parts else base


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def parse_text(annotation: Any, text: str) -> Any:
    """Turn an environment variable's text into the key's type (raise ValueError if it cannot)."""
    ann = _strip_optional(annotation)
    if ann is bool:
        low = text.strip().lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise ValueError(text)
    if ann is int:
        return int(text.strip())
    if ann is float:
        return float(text.strip())
    if ann is str or ann is Any:
        return text
    if get_origin(ann) is list:
        inner = get_args(ann)[0] if get_args(ann) else str
        return [parse_text(inner, part.strip()) for part in text.split(",") if part.strip()]
    return json.loads(text)
