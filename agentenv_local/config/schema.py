"""Every configuration key in one place: pydantic models plus a catalogue derived from them.

To add a key, add a field (with a default and a `description`) to the right section model below.
Everything else (file validation, `AGENTENV_*` variables, `config show/explain`, the docs test)
reads the catalogue built from these models, so nothing else needs to change.

Field kinds:
- a nested `_Section` model is a TOML table with a fixed set of keys;
- a `dict[str, X]` field is a free-form table: any key is allowed, each value must be an X;
- anything else is a leaf key with a type (checked strictly: `"8"` is not an integer).
"""

from __future__ import annotations

import json
import types
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Annotated, Any, Literal, TypeGuard, Union, get_args, get_origin

import annotated_types as at
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

ENV_PREFIX = "AGENTENV_"
# Environment variables with the prefix that are not config keys.
# not keys: the state directory, the config file, the event loop (agentenv_local/loops.py), one for tests, and
# the data-plane credential the hub gives the env servers it starts (agentenv_local/env/serve.py)
RESERVED_ENV = frozenset({"AGENTENV_HOME", "AGENTENV_CONFIG", "AGENTENV_LOOP", "AGENTENV_REQUIRE_PODMAN",
                          "AGENTENV_ADMIN_TOKEN"})


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


# --- sections --------------------------------------------------------------------------------


class StoreSettings(_Section):
    """The project store (`.agentenv/store.duckdb`) and its event log."""

    flush_interval_ms: int = Field(
        200, ge=10, le=5000,
        description="How often buffered events (trajectories, step journal) are flushed to the store, in ms.")
    objects: str = Field(
        "local", min_length=1,
        description="The object store (artifact bytes): `local` (`.agentenv/objects`, the built-in) or an object store "
                    "a plugin adds; its settings are the plugin's `[plugins.<distribution>]` table. Change it with "
                    "`agentenv store migrate-objects --to NAME`, which copies the bytes first.")


class RunnerSettings(_Section):
    """How much work the task runner does at once."""

    concurrency: int = Field(
        4, ge=1, le=1000, description="How many runs a command keeps in flight when --concurrency is not given.")
    step_concurrency: int = Field(8, ge=1, le=1000, description="How many ready steps of one run execute at once.")


class ScriptsSettings(_Section):
    """Python scripts the steps run on this machine (`run_code`, `env_outcome_verifier`)."""

    warm: bool = Field(
        True, description="Run each in a fresh fork of a warm worker with mcp and httpx imported (`false`: start a "
                          "fresh interpreter per script).")


class ExecutorSettings(_Section):
    """Where runs execute: in the hub (`local`), or on a Ray cluster's workers (`ray`; docs/scale-out.md)."""

    kind: Literal["local", "ray"] = Field("local", description="`local` (the hub runs them) or `ray`; --executor wins.")
    ray_address: str = Field(
        "auto", description="The Ray cluster's head, HOST:PORT as `ray start --head` prints it; `auto`: the one "
                            "RAY_ADDRESS or this machine's running cluster names. --ray-address wins.")
    max_attempts: int = Field(
        3, ge=1, le=20, description="How many workers a Ray run may go through: a lost one resumes it on another.")
    cancel_grace_s: float = Field(
        15.0, gt=0, le=600, description="How long a cancelled Ray run's worker has to tear down before it is killed.")


class HubSettings(_Section):
    """The hub: the one process per project that owns the store."""

    start_timeout_s: float = Field(
        5.0, gt=0, le=600, description="How long a client waits for a hub it started to answer.")
    linger_s: float = Field(
        0.0, ge=0, le=86400,
        description="How long a short-lived hub stays up after its own command ends when no client is attached.")


class SandboxSettings(_Section):
    """Where envs and agents run."""

    default: str = Field(
        "auto", min_length=1,
        description="The sandbox provider to use, or a comma-separated fallback chain (`podman,process`); "
                    "`auto` is podman where Podman answers, else process (with a one-line notice).")
    providers: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="`[sandbox.providers.<name>]`: free-form settings handed to that provider.")


class EnvPoolSettings(_Section):
    """Env pools: in-hub envs reset from a clean snapshot for the next deploy (docs/environments/deploying.md)."""

    size: int = Field(
        4, ge=0, le=1000,
        description="How many idle instances the hub keeps per env version and deploy options; 0 turns pools off.")
    idle_seconds: float = Field(
        300.0, gt=0, le=86400, description="How long an idle pooled instance is kept before it is stopped.")


class EnvsSettings(_Section):
    """How the hub runs deployed envs."""

    pool: EnvPoolSettings = Field(default_factory=EnvPoolSettings, description="Env pools with snapshot reset.")


class AgentsSettings(_Section):
    """Which agent runs where a task does not say."""

    default: str = Field(
        "scripted", min_length=1,
        description="The agent `deploy_agent` starts when its step names none (`agentenv run --agent` overrides "
                    "it): a built-in (`scripted`, `tool-loop`, `human`), a stored agent id, or `file.py:Class`.")


class SecretsSettings(_Section):
    """Where `secret:NAME` references are looked up."""

    file: str = Field(
        "secrets.toml", min_length=1,
        description="The secrets file (flat TOML, or JSON if it ends in .json); relative to the state dir. "
                    "Must be mode 0600.")
    use_env: bool = Field(True, description="Look secrets up in environment variables first (`secret:X` reads $X).")


class ModelRoles(_Section):
    """Which model each role uses; unset roles use `model.default`."""

    agent: str | None = Field(None, description="Model of the agent being evaluated (the solver).")
    user: str | None = Field(None, description="Model of the simulated user.")
    judge: str | None = Field(None, description="Model of the rubric judge.")


class ModelSettings(_Section):
    """The model endpoint (OpenAI-compatible: Ollama, vLLM, llama.cpp, LiteLLM; or Anthropic) and per-role models."""

    base_url: str | None = Field(None, description="Base URL of the endpoint, e.g. `http://127.0.0.1:11434/v1`.")
    api_key: str | None = Field(None, description="API key sent to `base_url` only. Use `secret:NAME`.")
    api: str = Field(
        "openai", pattern=r"^(openai|anthropic)$",
        description="The API `base_url` speaks: `openai` (Chat Completions) or `anthropic` (Messages).",
        json_schema_extra={"expects": '"openai" or "anthropic"'})
    default: str | None = Field(None, description="Model used by every role that has none of its own.")
    roles: ModelRoles = Field(default_factory=ModelRoles, description="Per-role models.")
    headers: dict[str, str] = Field(
        default_factory=dict,
        description="`[model.headers]`: extra HTTP headers sent to `base_url` only (values may be refs).")
    timeout_s: float = Field(120.0, gt=0, le=86400, description="How long one model request may take, in seconds.")
    max_retries: int = Field(
        3, ge=0, le=20, description="How many times a model request is retried on 429, 5xx or a connection error.")
    endpoints: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="`[model.endpoints.<role>]`: another endpoint for one role (agent, user, judge): "
                    "`base_url`, `api`, `api_key`, `headers`, `timeout_s`, `max_retries`.")


class TaskStepsSettings(_Section):
    """Extra task step types."""

    impls: list[Annotated[str, at.MinLen(1)]] = Field(
        default_factory=list,
        description='Extra step types as `"module:Class"` strings, added to the installed ones.',
        json_schema_extra={"expects": 'a list of "module:Class" strings'})


class SecuritySettings(_Section):
    """What the HTTP servers agentenv starts (gateways, env and agent servers) accept."""

    allowed_hosts: list[Annotated[str, at.MinLen(1)]] = Field(
        default_factory=list,
        description="Host names (no port) accepted in the `Host` and `Origin` headers besides loopback "
                    "(127.0.0.1, localhost, [::1]), Podman's host alias 10.0.2.2 and the server's own address.")
    max_body_bytes: int = Field(
        4 * 1024 * 1024, ge=1024, le=1 << 30,
        description="The largest request body (MCP, REST, A2A) a server reads; larger ones get 413.")
    max_data_body_bytes: int = Field(
        128 * 1024 * 1024, ge=1024, le=1 << 34,
        description="The largest data-plane body (`POST /agentenv`: data/add with files); larger ones get 413.")


class Settings(_Section):
    """The whole configuration (resolved values; see `Config.settings()`)."""

    store: StoreSettings = Field(default_factory=StoreSettings)
    runner: RunnerSettings = Field(default_factory=RunnerSettings)
    executor: ExecutorSettings = Field(default_factory=ExecutorSettings)
    scripts: ScriptsSettings = Field(default_factory=ScriptsSettings)
    hub: HubSettings = Field(default_factory=HubSettings)
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    envs: EnvsSettings = Field(default_factory=EnvsSettings)
    agents: AgentsSettings = Field(default_factory=AgentsSettings)
    secrets: SecretsSettings = Field(default_factory=SecretsSettings)
    model: ModelSettings = Field(default_factory=ModelSettings)
    task_steps: TaskStepsSettings = Field(default_factory=TaskStepsSettings)
    security: SecuritySettings = Field(default_factory=SecuritySettings)
    plugins: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="`[plugins.<distribution>]`: each plugin's own free-form settings; core never reads them.")


# --- the catalogue ---------------------------------------------------------------------------


@dataclass(eq=False)
class Node:
    """One place in the schema: a section, a leaf key, or a free-form table."""

    path: tuple[str, ...]
    kind: Literal["section", "leaf", "table"]
    description: str = ""
    annotation: Any = None
    metadata: tuple = ()
    default: Any = None
    expects: str = ""
    children: dict[str, "Node"] = field(default_factory=dict)
    item_annotation: Any = None  # tables: the type of each entry

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

    def adapter(self) -> TypeAdapter:
        return _adapter(self.annotation, self.metadata)

    def item_adapter(self) -> TypeAdapter:
        return _adapter(self.item_annotation, ())


@lru_cache(maxsize=None)
def _adapter(annotation: Any, metadata: tuple) -> TypeAdapter:
    return TypeAdapter(Annotated[annotation, *metadata]) if metadata else TypeAdapter(annotation)


def _is_dict(annotation: Any) -> bool:
    return annotation is dict or get_origin(annotation) is dict


def _is_section(annotation: Any) -> TypeGuard[type[_Section]]:
    return isinstance(annotation, type) and issubclass(annotation, _Section)


def _build(model: type[_Section], prefix: tuple[str, ...], description: str) -> Node:
    node = Node(prefix, "section", description=description or (model.__doc__ or "").strip())
    for name, info in model.model_fields.items():
        path = prefix + (name,)
        ann = info.annotation
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        if _is_section(ann):
            node.children[name] = _build(ann, path, info.description or "")
        elif _is_dict(ann):
            args = get_args(ann)
            node.children[name] = Node(path, "table", description=info.description or "",
                                       item_annotation=args[1] if len(args) == 2 else Any, default={})
        else:
            child = Node(path, "leaf", description=info.description or "", annotation=ann,
                         metadata=tuple(info.metadata), default=info.get_default(call_default_factory=True))
            child.expects = str(extra.get("expects") or describe_type(ann, child.metadata))
            node.children[name] = child
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
    if get_origin(annotation) is Annotated:
        return get_args(annotation)[0]
    return annotation


def describe_type(annotation: Any, metadata: tuple = ()) -> str:
    ann = _strip_optional(annotation)
    base = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}.get(ann)
    if base is None:
        if get_origin(ann) is list:
            inner = _strip_optional(get_args(ann)[0]) if get_args(ann) else Any
            base = {int: "a list of integers", float: "a list of numbers", str: "a list of strings"}.get(
                inner, "a list")
        elif _is_dict(ann):
            base = "a table"
        else:
            base = getattr(ann, "__name__", str(ann))
    lo: Any = None
    hi: Any = None
    lo_strict = hi_strict = False
    for m in metadata:
        if isinstance(m, at.Ge):
            lo = m.ge
        elif isinstance(m, at.Gt):
            lo, lo_strict = m.gt, True
        elif isinstance(m, at.Le):
            hi = m.le
        elif isinstance(m, at.Lt):
            hi, hi_strict = m.lt, True
        elif isinstance(m, at.MinLen) and m.min_length == 1 and ann is str:
            base = "a non-empty string"
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
