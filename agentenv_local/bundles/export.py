"""Writing a stored task or eval out as a bundle folder (`agentenv bundle init --from-task|--from-eval`).

Each task is written as the store holds it, and each artifact and env it names becomes a folder of the
bundle (artifacts as their files, envs as env.toml and their files), named in the task by that folder's
name, so `agentenv run FOLDER` needs nothing from the store. Fields that say whose setup ran it (the
agent, the sandbox provider, model endpoints) are left out so a run takes its own, as the reference's
`bundle init` does; values that look like secrets are left out too. Nothing is written to the store,
and the folder appears whole or not at all: it is built beside its place and renamed into it.
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentenv_local.artifacts import ARTIFACT_TYPES, BUNDLE, FILE, read_files
from agentenv_local.config.masking import is_secret_key
from agentenv_local.errors import ValidationError
from agentenv_local.nofollow import write_file

# Fields of the user's setup, per step type ("*": every step), left out as the reference's user scope is.
USER_FIELDS: dict[str, tuple[str, ...]] = {
    "*": ("sandbox_type",),
    "deploy_agent": ("a2a_agent_id", "a2a_agent_version", "a2a_url", "env_vars", "litellm_base_url", "model"),
    "deploy_human_agent": ("a2a_url",),
    "deploy_env": ("env_state_type", "env_state_instance_id"),
    "load_artifact": ("urls",),
    "snapshot_env": ("env_instance_id",),
    "prompt_agent": ("model", "model_params", "effort", "max_thinking_tokens", "harness", "user_model",
                     "trajectory_output_prefix"),
}
# Maps of environment variables, where a credential is most often set.
ENV_VAR_MAPS = ("env_vars", "default_env_vars")
CREDENTIALS = (  # what, how to find it, what replaces it
    ("a URL's credentials", re.compile(r"(?P<scheme>\b[a-zA-Z][\w+.-]*://)[^/@\s]+@"), r"\g<scheme>***@"),
    ("an API key", re.compile(r"\bsk[-_](?=[\w-]*\d)[\w-]{20,}"), "***"),
    ("a GitHub token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_\w{22,})"), "***"),
    ("an AWS access key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), "***"),
    ("a private key", re.compile(r"-----BEGIN (?:[A-Z]+ )*PRIVATE KEY-----"
                                 r"(?:.*?-----END (?:[A-Z]+ )*PRIVATE KEY-----|.*)", re.DOTALL), "***"),
)


@dataclass
class Export:
    """What an export wrote and what it left out."""

    what: str
    folder: Path
    files: list[str] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)  # "tasks/t.json: step 'a': sandbox_type: why"
    needs_store: list[str] = field(default_factory=list)


def _name(entity_id: str) -> str:
    """A folder or file name from an id: its last segment, made filesystem-safe."""
    tail = entity_id.rstrip("/").rsplit("/", 1)[-1]
    return re.sub(r"[^A-Za-z0-9._-]+", "-", tail).strip("-.") or "entity"


def _credential(text: str) -> str | None:
    return next((what for what, pattern, _ in CREDENTIALS if pattern.search(text)), None)


def _masked(text: str) -> str:
    """`text` with each credential in it replaced by *** (a URL keeps its scheme)."""
    for _, pattern, replacement in CREDENTIALS:
        text = pattern.sub(replacement, text)
    return text


def scrub(value: Any, where: str, left_out: list[str]) -> Any:
    """`value` without secret-named env vars, and with credentials in strings masked (each noted)."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            at = f"{where}.{key}" if where else str(key)
            if key in ENV_VAR_MAPS and isinstance(item, dict):
                kept = {}
                for name, setting in item.items():
                    held = _credential(setting) if isinstance(setting, str) else None
                    if is_secret_key(str(name)) or held:
                        left_out.append(f"{at}.{name}: " + (f"its value holds {held}" if held
                                                           else "its name looks like a secret"))
                    else:
                        kept[name] = setting
                out[key] = kept
                continue
            out[key] = scrub(item, at, left_out)
        return out
    if isinstance(value, list):
        return [scrub(item, f"{where}[{i}]", left_out) for i, item in enumerate(value)]
    if isinstance(value, str) and (held := _credential(value)):
        left_out.append(f"{where}: masked, its value holds {held}")
        return _masked(value)
    return value


def toml_text(table: dict[str, Any]) -> str:
    """A flat TOML document (values as inline arrays and tables) for env.toml, artifact.toml and evals."""
    lines = [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in table.items() if v is not None]
    return "\n".join(lines) + "\n"


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # JSON's escapes are TOML basic-string escapes
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value if v is not None) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_toml_key(str(k))} = {_toml_value(v)}" for k, v in value.items()
                               if v is not None) + "}"
    raise ValidationError(f"cannot write {type(value).__name__} value {value!r} as TOML")


class _Writer:
    """Builds the bundle in a staging folder; each stored entity is written once, under a unique name."""

    def __init__(self, store: Any, config: Any, staging: Path, export: Export, keep_user_fields: bool) -> None:
        from agentenv_local.tasks.model import step_types

        self.keep_user_fields = keep_user_fields
        self.store = store
        self.types = step_types(config)
        self.staging = staging
        self.export = export
        self.names: dict[tuple[str, str, int], str] = {}  # (kind, id, version) -> folder name
        self.taken: dict[str, set[str]] = {"artifacts": set(), "envs": set(), "tasks": set(), "evals": set()}

    def _unique(self, kind: str, entity_id: str) -> str:
        base = name = _name(entity_id)
        n = 2
        while name in self.taken[kind]:
            name, n = f"{base}-{n}", n + 1
        self.taken[kind].add(name)
        return name

    def write(self, rel: str, data: bytes) -> None:
        write_file(self.staging, rel, data, path=rel, where="the new bundle")
        self.export.files.append(rel)

    def artifact(self, artifact_id: str, version: int | None, where: str) -> str:
        doc = self.store.documents.get("artifacts", artifact_id, version)
        key = ("artifacts", artifact_id, doc["version"])
        if key in self.names:
            return self.names[key]
        kind = doc["body"].get("type")
        if kind not in ARTIFACT_TYPES:
            raise ValidationError(f"{where}: artifact {artifact_id} v{doc['version']} is a {kind} artifact, which "
                                  f"a bundle's artifacts/ cannot hold", hint="export a task that names file artifacts")
        name = self.names[key] = self._unique("artifacts", artifact_id)
        files = read_files(self.store, doc)
        for rel, data in sorted(files.items()):
            self.write(f"artifacts/{name}/{rel}", data)
        settings = {"description": doc["body"].get("description") or None}
        if kind == BUNDLE and len(files) == 1 or kind == FILE and len(files) != 1:
            settings["type"] = kind  # the loader's default type would differ
        if any(v is not None for v in settings.values()) and "artifact.toml" not in files:
            self.write(f"artifacts/{name}/artifact.toml", toml_text(settings).encode())
        return name

    def env(self, env_id: str, version: int | None, where: str) -> str:
        doc = self.store.documents.get("envs", env_id, version)
        key = ("envs", env_id, doc["version"])
        if key in self.names:
            return self.names[key]
        name = self.names[key] = self._unique("envs", env_id)
        body = {k: v for k, v in doc["body"].items() if k not in ("files", "id")}
        if isinstance(body.get("mcp_server_envs"), list):  # a multi env: its servers become folders too
            body["mcp_server_envs"] = [
                self.env(ref, None, where) if isinstance(ref, str)
                else self.env(ref["env"], ref.get("version"), where) if isinstance(ref, dict) and "env" in ref
                else ref
                for ref in body["mcp_server_envs"]]
        body = scrub(body, f"envs/{name}/env.toml", self.export.left_out)
        files_ref = doc["body"].get("files")
        files = {}
        if isinstance(files_ref, dict):
            pin = self.store.documents.get("artifacts", files_ref["id"], files_ref.get("version"))
            files = read_files(self.store, pin)
        files.pop("env.toml", None)  # written from the stored record, which is what the env version is
        for rel, data in sorted(files.items()):
            self.write(f"envs/{name}/{rel}", data)
        self.write(f"envs/{name}/env.toml", toml_text(body).encode())
        return name

    def task(self, task_id: str, version: int | None) -> str:
        doc = self.store.documents.get("tasks", task_id, version)
        key = ("tasks", task_id, doc["version"])
        if key in self.names:
            return self.names[key]
        name = self.names[key] = self._unique("tasks", task_id)
        where = f"tasks/{name}.json"
        steps = doc["body"].get("steps")
        if not isinstance(steps, list):
            raise ValidationError(f"task {task_id} v{doc['version']}: its stored 'steps' is not a list",
                                  hint="store it again with `agentenv task create FILE --id ID`")
        out = [self._step(step, where) for step in steps]
        body: Any = {"description": doc["body"].get("description") or "", "steps": out}
        self.write(where, (json.dumps(body, indent=2, ensure_ascii=False) + "\n").encode())
        return name

    def _step(self, raw: Any, where: str) -> Any:
        if not isinstance(raw, dict):
            return raw
        step = dict(raw)
        label = f"{where}: step {step.get('id')!r}"
        kind = step.get("type")
        for f in () if self.keep_user_fields else USER_FIELDS["*"] + USER_FIELDS.get(str(kind), ()):
            if step.get(f) not in (None, "", [], {}):
                del step[f]
                self.export.left_out.append(f"{label}: {f}: your setup's, so a run takes its own "
                                            "(--include-scope user keeps it)")
        cls = self.types.get(kind) if isinstance(kind, str) else None
        for f in getattr(cls, "artifact_ref_fields", ()):
            if isinstance(step.get(f), str):
                step[f] = self.artifact(step[f], _pinned(step, f), label)
        if isinstance(step.get("artifacts"), list):
            step["artifacts"] = [self._artifact_entry(a, label) for a in step["artifacts"]]
        for f in getattr(cls, "env_ref_fields", ()):
            value = step.get(f)
            if isinstance(value, str):
                step[f] = self.env(value, _pinned(step, f), label)
            elif isinstance(value, list):
                step[f] = [self.env(v, None, label) if isinstance(v, str) else v for v in value]
        skills = [s for s in step.get("skills") or [] if isinstance(s, str) or (isinstance(s, dict) and "id" in s)]
        self.export.needs_store += [f"{label}: skill {s if isinstance(s, str) else s['id']}" for s in skills]
        return scrub(step, label, self.export.left_out)

    def _artifact_entry(self, entry: Any, label: str) -> Any:
        if isinstance(entry, str):
            return self.artifact(entry, None, label)
        if isinstance(entry, dict) and isinstance(entry.get("id"), str):
            out = {k: v for k, v in entry.items() if k != "version"}
            out["id"] = self.artifact(entry["id"], entry.get("version"), label)
            return out
        return entry


def _pinned(step: dict, ref_field: str) -> int | None:
    """The version a step pins next to a reference (artifact_id -> artifact_version), taken out of the step:
    in the bundle the folder is the entity, and its versions start again."""
    version_field = ref_field[:-3] + "_version" if ref_field.endswith("_id") else None
    value = step.pop(version_field, None) if version_field else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def check_target(folder: Path) -> None:
    """Refuse a folder that is not new or empty, before anything is read or written."""
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        raise ValidationError(f"{folder} exists and is not a folder", hint="give a new or empty folder")
    if folder.is_dir() and any(folder.iterdir()):
        raise ValidationError(f"{folder} is not empty; nothing was written",
                              hint="give a new or empty folder (bundle init never overwrites files)")
    if not folder.parent.is_dir():
        raise ValidationError(f"{folder.parent} does not exist", hint=f"create it first: mkdir -p {folder.parent}")


def build(folder: Path, fill: Any) -> None:
    """Run `fill(staging)` in a staging folder beside `folder`, then move it into place; on failure remove it."""
    check_target(folder)
    staging = folder.parent / f".{folder.name}.agentenv-partial-{secrets.token_hex(4)}"
    staging.mkdir()
    try:
        fill(staging)
        if folder.is_dir():
            folder.rmdir()  # empty, as checked; fails (and keeps everything) if a file appeared meanwhile
        staging.rename(folder)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def export(store: Any, config: Any, folder: Path, *, task_id: str | None = None, eval_id: str | None = None,
           version: int | None = None, keep_user_fields: bool = False) -> Export:
    """Write the stored task `task_id` (or eval `eval_id` and its tasks) as a bundle at `folder`.

    `keep_user_fields`: keep the fields of the user's setup (USER_FIELDS) as stored; an agent they name
    by id then still needs the store. Secrets are left out all the same."""
    result = Export(what="", folder=folder)

    def fill(staging: Path) -> None:
        writer = _Writer(store, config, staging, result, keep_user_fields)
        if task_id is not None:
            doc = store.documents.get("tasks", task_id, version)
            writer.task(task_id, doc["version"])
            result.what = f"task {task_id} v{doc['version']}"
        else:
            assert eval_id is not None
            doc = store.documents.get("evals", eval_id, version)
            entries = doc["body"].get("tasks")
            if not isinstance(entries, list) or not all(isinstance(e, dict) and isinstance(e.get("task_id"), str)
                                                        for e in entries):
                raise ValidationError(f"eval {eval_id} v{doc['version']}: its stored 'tasks' is malformed")
            names = [writer.task(e["task_id"], e.get("task_version")) for e in entries]
            name = writer._unique("evals", eval_id)
            writer.write(f"evals/{name}.toml", toml_text({"tasks": names}).encode())
            result.what = f"eval {eval_id} v{doc['version']} and its {len(names)} task(s)"
        readme = [f"# {folder.name}", "", f"Written by `agentenv bundle init` from {result.what}.", "",
                  f"Run it with `agentenv run {folder.name}`."]
        if result.left_out:
            readme += ["", "Left out (a run takes its own, or they looked like secrets):", ""]
            readme += [f"- {line}" for line in result.left_out]
        writer.write("README.md", ("\n".join(readme) + "\n").encode())

    build(folder, fill)
    return result
