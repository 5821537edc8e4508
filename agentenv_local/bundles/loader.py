"""Read a bundle folder into entities with ids, validating everything before anything is written.

Ids: `@local/<folder path, home as ~>/<name>`; installed bundles use `@local/<distribution>/<bundle>`.
Bare names in task steps resolve to the bundle's own entities first, at every place a step type declares
(tasks/entity_refs.py): artifact fields to `artifacts/<name>/`, env fields to `envs/<name>/` (or an alias of
aliases.toml), agent fields to `agents/<name>/` (or an alias: bundles/agents.py), entries of a step's `skills`
list to `skills/<name>/`.

What the bundle holds that means nothing here is listed in `Bundle.ignored`, one line each (`agentenv run`
prints them): unknown top-level entries (README-like files excepted), README-like files loose in envs/ or
artifacts/ (any other loose file there is a problem), a reference env folder's Dockerfile (never built here).
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentenv_local import typed_artifacts
from agentenv_local.artifacts import read_folder
from agentenv_local.errors import ValidationError
from agentenv_local.inputs import (
    MAX_TASK_FILE_BYTES,
    id_problem,
    json_value,
    refused,
    shorten,
)
from agentenv_local.untrusted import UntrustedInputError, parse_toml, read_file

from .agents import AgentEntry, load_agents
from .discovery import KINDS, describe

if TYPE_CHECKING:
    from agentenv_local.hosting.envs import McpServerEnv, MultiEnv

NOT_YET: dict[str, str] = {}  # bundle folder kinds read but not used yet by this version (none now)
# Top-level files for people, never bundle entries: not listed as ignored (compared case-insensitively, by stem).
README_LIKE = ("readme", "license", "licence", "copying", "notice", "changelog", "authors", "contributing")


@dataclass
class EnvEntry:
    name: str
    id: str
    env: McpServerEnv | MultiEnv
    files: dict[str, bytes]  # the folder's files (for module and command envs)


@dataclass
class ArtifactEntry:
    name: str
    id: str
    files: dict[str, bytes]
    artifact_type: str | None = None
    description: str = ""
    settings: dict = field(default_factory=dict)  # a typed kind's artifact.toml keys (typed_artifacts.BUNDLE_KEYS)


@dataclass
class SkillEntry:
    name: str
    id: str
    files: dict[str, bytes]
    skill: object  # agentenv_local.skills.Skill


@dataclass
class TaskEntry:
    name: str
    id: str
    source: Path
    steps: list[dict]
    description: str = ""


@dataclass
class EvalEntry:
    name: str
    id: str
    source: Path
    task_names: list[str]


@dataclass
class Bundle:
    path: Path
    name: str
    id_root: str
    description: str
    artifacts: dict[str, ArtifactEntry] = field(default_factory=dict)
    skills: dict[str, SkillEntry] = field(default_factory=dict)
    tasks: dict[str, TaskEntry] = field(default_factory=dict)
    evals: dict[str, EvalEntry] = field(default_factory=dict)
    envs: dict[str, EnvEntry] = field(default_factory=dict)
    agents: dict[str, AgentEntry] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)  # one line each: "<entry>: ignored (<why>)"
    deferred: list[str] = field(default_factory=list)  # kinds present but not handled yet
    follow_external_links: bool = False  # read symlinks that lead out of the bundle (the user said so)
    env_aliases: dict[str, str] = field(default_factory=dict)  # aliases.toml [envs]: alias -> folder name
    # (task file, step index, field, alias) of each step field an alias resolved: a store env of that id wins
    alias_uses: list[tuple[str, int, str, str]] = field(default_factory=list)
    agent_aliases: dict[str, str] = field(default_factory=dict)  # aliases.toml [agents]: alias -> folder name
    agent_alias_uses: list[tuple[str, int, str, str]] = field(default_factory=list)  # as alias_uses, for agents
    config: Any = None  # the project's configuration: its `[task_steps] impls` are step types of the tasks


def _readme_like(name: str) -> bool:
    return name.split(".", 1)[0].lower() in README_LIKE


def id_root_for(path: Path, package: str | None = None) -> str:
    if package:
        return f"@local/{package}/{path.name}"
    text = str(path.resolve())
    home = os.path.expanduser("~")
    if home not in ("", "/") and (text == home or text.startswith(home + os.sep)):
        text = "~" + text[len(home):]
    return "@local/" + text.lstrip("/")


def load_bundle(path: Path, package: str | None = None, *, follow_external_links: bool = False,
                config: Any = None) -> Bundle:
    path = Path(path).resolve()
    shown = str(path).encode("utf-8", "backslashreplace").decode()
    if shown != str(path):
        raise ValidationError(f"{shown}: the folder's path is not valid UTF-8 (it becomes the bundle's ids)",
                              hint="rename the folder, or copy the bundle to a folder with a UTF-8 name")
    if not path.is_dir():
        raise ValidationError(f"{path}: not a folder")
    problems: list[str] = _bad_names(path)
    if problems:
        raise ValidationError(f"bundle {path}: {len(problems)} problem(s); nothing was written or run",
                              problems=problems[:20] + ([f"... and {len(problems) - 20} more"]
                                                        if len(problems) > 20 else []))
    present = [k for k in KINDS if (path / k).is_dir()]
    stray = []
    for entry in sorted(path.iterdir()):
        if entry.name.startswith(".") or entry.name == "__pycache__" or entry.name in KINDS or (
                entry.name == "aliases.toml" and entry.is_file()):  # read after the envs
            continue
        if entry.is_dir():
            near = difflib.get_close_matches(entry.name, KINDS, n=1, cutoff=0.75)
            if near:
                problems.append(f"{entry.name}/: not a bundle folder kind; did you mean {near[0]}/?")
                continue
        if entry.name == "bundle.toml":
            problems.append("bundle.toml: reserved; a bundle's name is its folder name and its description "
                            "the first line of README.md")
            continue
        if not (entry.is_file() and _readme_like(entry.name)):
            stray.append(f"{entry.name}{'/' if entry.is_dir() else ''}: ignored (not a bundle folder kind: "
                         f"{', '.join(k + '/' for k in KINDS)})")
    if not present:
        raise ValidationError(f"{path}: not a bundle: it has none of {', '.join(k + '/' for k in KINDS)}",
                              problems=problems)
    bundle = Bundle(path=path, name=path.name, id_root=id_root_for(path, package), description=describe(path),
                    ignored=stray, follow_external_links=follow_external_links, config=config)
    for kind in NOT_YET:
        if (path / kind).is_dir() and any(not p.name.startswith(".") for p in (path / kind).iterdir()):
            bundle.deferred.append(kind)
    _load_artifacts(bundle, problems)
    _load_skills(bundle, problems)
    _load_envs(bundle, problems)
    load_agents(bundle, problems)
    _load_aliases(bundle, problems)
    _load_tasks(bundle, problems)
    _load_evals(bundle, problems)
    if problems:
        raise ValidationError(f"bundle {path}: {len(problems)} problem(s); nothing was written or run",
                              problems=problems)
    return bundle


MAX_TOML_BYTES = 1 << 20  # artifact.toml and evals/*.toml hold a few keys
MAX_EVAL_TASKS = 10_000  # an eval names each task once; more is a generated mistake


def _read_text(path: Path, where: str, problems: list[str], max_bytes: int = MAX_TOML_BYTES) -> str | None:
    """A file's UTF-8 text, or None with the reason added to `problems`."""
    try:
        return read_file(path, what=where, max_bytes=max_bytes).decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        problems.append(f"{where}: not UTF-8 text (byte {exc.start}: {exc.reason}); save it as UTF-8")
    except UntrustedInputError as exc:
        problems.append(str(exc))
    return None


def _read_toml(path: Path, where: str, problems: list[str]) -> dict | None:
    """A bundle TOML file's table, or None with the reason added to `problems`."""
    text = _read_text(path, where, problems)
    if text is None:
        return None
    try:
        return parse_toml(text, what=where)
    except UntrustedInputError as exc:
        problems.append(refused(where, exc))
        return None


def _bad_names(root: Path) -> list[str]:
    """Files or folders under `root` whose names are not valid UTF-8 (ids, messages and the store need text)."""
    out = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d != "__pycache__"]
        for name in dirs + files:
            try:
                name.encode("utf-8")
            except UnicodeEncodeError:
                rel = os.fsencode(os.path.relpath(os.path.join(folder, name), root))  # the bytes on disk
                out.append(f"{rel.decode('utf-8', 'backslashreplace')}: the name is not valid UTF-8; rename it")
    return out


def _folder_files(bundle: Bundle, folder: Path, where: str, problems: list[str]) -> dict[str, bytes] | None:
    """A folder's files (links that leave the bundle, special files refused), or None with the problems added."""
    try:
        return read_folder(folder, within=bundle.path, follow_external_links=bundle.follow_external_links,
                           where=where)
    except ValidationError as exc:
        problems += exc.problems or [exc.message]
    except OSError as exc:
        problems.append(f"{where}: cannot read it: {exc.strerror or exc}")
    return None


def _subfolders(bundle: Bundle, section: str, what: str, layout: str, problems: list[str], *,
                readme_ok: bool = True) -> Iterator[tuple[Path, str]]:
    """(folder, "section/name") of each `section/<name>/` of a bundle, one per artifact, skill, env or agent. Hidden
    entries are skipped; a README-like file is noted as ignored (`readme_ok`, as the reference's bundles have them),
    any other file is a problem that says the layout (`layout`, e.g. "with SKILL.md at its root")."""
    folder = bundle.path / section
    if not folder.is_dir():
        return
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith(".") or entry.name == "__pycache__":
            continue
        where = f"{section}/{entry.name}"
        if not entry.is_dir():
            if readme_ok and _readme_like(entry.name):
                bundle.ignored.append(f"{where}: ignored (each {what} is a folder, {section}/<name>/)")
            else:
                problems.append(f"{where}: each {what} is a folder ({section}/<name>/ {layout})")
            continue
        yield entry, where


def _load_artifacts(bundle: Bundle, problems: list[str]) -> None:
    for entry, where in _subfolders(bundle, "artifacts", "artifact", "holding its files", problems):
        settings: dict = {}
        toml_path = entry / "artifact.toml"
        if toml_path.exists() or toml_path.is_symlink():
            read = _read_toml(toml_path, f"{where}/artifact.toml", problems)
            if read is None:
                continue
            settings = read
            valid = ["type", "id", "description", *_typed_keys(settings.get("type"))]
            unknown = set(settings) - set(valid)
            if unknown:
                problems.append(f"{where}/artifact.toml: unknown key(s) {', '.join(sorted(unknown))}; "
                                f"valid: {', '.join(valid)}")
            wrong = [f"'{k}' must be a string{' starting with @local/' if k == 'id' else ''}, "
                     f"got {type(settings[k]).__name__}"
                     for k in ("type", "id", "description") if k in settings and not isinstance(settings[k], str)]
            if wrong:
                problems += [f"{where}/artifact.toml: {w}" for w in wrong]
                continue
        found = _folder_files(bundle, entry, where, problems)
        if found is None:
            continue
        files = {rel: data for rel, data in found.items() if rel != "artifact.toml"}
        if "SKILL.md" in files:
            problems.append(f"{where}: this looks like a skill (it has SKILL.md); put it under skills/{entry.name}/")
            continue
        if not files:
            problems.append(f"{where}: empty artifact folder")
            continue
        artifact_id = settings.get("id") or f"{bundle.id_root}/{entry.name}"
        why = id_problem(artifact_id)
        if "id" in settings and (not artifact_id.startswith("@local/") or why):
            problems.append(f"{where}/artifact.toml: 'id' must be a string starting with @local/"
                            f"{f' ({why})' if why else ''}, got {shorten(settings['id'])}")
            continue
        kind = typed_artifacts.infer_bundle_type(files, settings.get("type"))  # a root Dockerfile: docker_image
        if kind not in (None, "file", "file_artifact_universe", *typed_artifacts.BUNDLE_KEYS):
            problems.append(f"{where}/artifact.toml: type {settings.get('type')!r} is not supported here; use "
                            f"file, file_artifact_universe or {', '.join(typed_artifacts.BUNDLE_KEYS)}"
                            + (" (store a universe with `agentenv artifact environment-universe put`)"
                               if kind == typed_artifacts.ENVIRONMENT_UNIVERSE else ""))
            continue
        if kind in typed_artifacts.BUNDLE_KEYS:
            wrong = typed_artifacts.bundle_problems(kind, settings, files)
            if wrong:
                problems += [f"{where}: {kind}: {w}" for w in wrong]
                continue
        if kind == "file" and len(files) != 1:  # caught here, not half-way through writing
            problems.append(f"{where}/artifact.toml: type 'file' holds exactly one file; this folder has "
                            f"{len(files)} (use file_artifact_universe, or leave type out)")
            continue
        same = [a.name for a in bundle.artifacts.values() if a.id == artifact_id]
        if same:
            problems.append(f"{where}/artifact.toml: id {artifact_id!r} is also the id of artifacts/{same[0]}; "
                            "each artifact needs its own id")
            continue
        typed_settings = {k: v for k, v in settings.items() if k in _typed_keys(kind)}
        bundle.artifacts[entry.name] = ArtifactEntry(entry.name, artifact_id, files, kind,
                                                     str(settings.get("description", "")), typed_settings)


def _typed_keys(kind: object) -> tuple[str, ...]:
    """The artifact.toml keys a typed kind takes besides type, id, description (and the reference's aliases)."""
    keys = typed_artifacts.BUNDLE_KEYS.get(str(typed_artifacts.canonical_type(kind)), ())
    return (*keys, *(alias for alias, key in typed_artifacts.BUNDLE_KEY_ALIASES.items() if key in keys))


def _load_skills(bundle: Bundle, problems: list[str]) -> None:
    """`skills/<name>/` folders (Agent Skills: SKILL.md at the root) -> skill artifacts `<id root>/<name>`."""
    from agentenv_local.skills import SkillError, skill_from_files

    taken = {a.id: f"artifacts/{a.name}" for a in bundle.artifacts.values()}
    for entry, where in _subfolders(bundle, "skills", "skill", "with SKILL.md at its root", problems,
                                    readme_ok=False):
        found = _folder_files(bundle, entry, where, problems)
        if found is None:
            continue
        files = found
        if not files:
            problems.append(f"{where}: empty skill folder (it needs SKILL.md at its root)")
            continue
        try:
            skill = skill_from_files(files, where, expected_name=entry.name)
        except SkillError as exc:
            problems += exc.problems or [exc.message]
            continue
        skill_id = f"{bundle.id_root}/{entry.name}"
        for clash in (skill_id, f"{skill_id}__files"):
            if clash in taken:
                problems.append(f"{where}: its id {clash!r} is also the id of {taken[clash]}; rename one of them")
                break
        else:
            bundle.skills[entry.name] = SkillEntry(entry.name, skill_id, files, skill)


def _load_envs(bundle: Bundle, problems: list[str]) -> None:
    if not (bundle.path / "envs").is_dir():
        return
    from agentenv_local.hosting.envs import (  # pydantic models: only when needed
        MultiEnv,
        load_env_folder,
    )
    for entry, _where in _subfolders(bundle, "envs", "env", "with env.toml and its files", problems):
        try:
            env, _raw, declared = load_env_folder(entry)
        except ValidationError as exc:
            problems += exc.problems or [exc.message]
            continue
        found = {} if isinstance(env, MultiEnv) or env.url or env.image else _folder_files(
            bundle, entry, f"envs/{entry.name}", problems)
        if found is None:
            continue
        files = found
        if (entry / "Dockerfile").is_file() and not (entry / "env.toml").exists():  # the reference's env folder
            bundle.ignored.append(f"envs/{entry.name}/Dockerfile: ignored (never built here: server.py runs as a "
                                  "subprocess, or in agentenv's runtime image with a container sandbox)")
        bundle.envs[entry.name] = EnvEntry(entry.name, declared or f"{bundle.id_root}/{entry.name}", env, files)
    for env_entry in bundle.envs.values():  # a multi env names the bundle's other envs by folder name
        if isinstance(env_entry.env, MultiEnv):
            for ref in env_entry.env.refs():
                if ref.env == env_entry.name:
                    problems.append(f"envs/{env_entry.name}/env.toml: mcp_server_envs: a multi env cannot contain "
                                    "itself")
                elif ref.env in bundle.envs and isinstance(bundle.envs[ref.env].env, MultiEnv):
                    problems.append(f"envs/{env_entry.name}/env.toml: mcp_server_envs: {ref.env!r} is a multi env; "
                                    "list its servers instead")


def _load_aliases(bundle: Bundle, problems: list[str]) -> None:
    """The bundle's aliases.toml (the reference's): its [envs] and [agents] aliases name the bundle's envs and
    agents in tasks (an alias of an ignored agent folder, the reference's proxy, names nothing)."""
    from agentenv_local.compat.bundle_aliases import read_bundle_aliases

    from .agents import folder_of

    folders = {"envs": set(bundle.envs), "agents": folder_of(bundle.path)}
    aliases = read_bundle_aliases(bundle.path, folders, problems)
    bundle.env_aliases = aliases.envs
    bundle.agent_aliases = {alias: name for alias, name in aliases.agents.items() if name in bundle.agents}
    for alias, name in bundle.agent_aliases.items():  # shown by `agentenv agent list`
        bundle.agents[name].body.setdefault("aliases", []).append(alias)
    bundle.ignored += aliases.ignored


def _load_tasks(bundle: Bundle, problems: list[str]) -> None:
    from agentenv_local.tasks.model import parse_task

    folder = bundle.path / "tasks"
    if not folder.is_dir():
        return
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith("."):
            continue
        where = f"tasks/{entry.name}"
        if entry.suffix != ".json" or not entry.is_file():
            problems.append(f"{where}: tasks are JSON files (tasks/<name>.json)")
            continue
        text = _read_text(entry, where, problems, MAX_TASK_FILE_BYTES)
        if text is None:
            continue
        try:
            data = json_value(text, where)
        except ValidationError as exc:
            problems.append(exc.message)
            continue
        description = ""
        if isinstance(data, dict) and "steps" in data:
            description, data = str(data.get("description", "")), data["steps"]
        task_id = f"{bundle.id_root}/{entry.stem}"
        try:
            steps = resolve_refs(data, bundle, where)
            parse_task(steps, task_id, source=where, config=bundle.config)
        except ValidationError as exc:
            problems += [f"{where}: {p}" for p in exc.problems] or [exc.message]
            continue
        assert isinstance(steps, list)  # parse_task accepted it
        bundle.tasks[entry.stem] = TaskEntry(entry.stem, task_id, entry, steps, description)


def _load_evals(bundle: Bundle, problems: list[str]) -> None:
    folder = bundle.path / "evals"
    if not folder.is_dir():
        return
    tasks_dir = bundle.path / "tasks"
    task_files = {p.stem for p in tasks_dir.iterdir() if p.suffix == ".json"} if tasks_dir.is_dir() else set()
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith("."):
            continue
        where = f"evals/{entry.name}"
        if entry.suffix != ".toml" or entry.is_dir():
            problems.append(f"{where}: evals are TOML files (evals/<name>.toml with tasks = [...])")
            continue
        data = _read_toml(entry, where, problems)
        if data is None:
            continue
        unknown = set(data) - {"tasks", "type", "id", "description"}
        if unknown:
            problems.append(f"{where}: unknown key(s) {', '.join(sorted(unknown))}; valid: tasks, id, description")
        tasks = data.get("tasks")
        if not isinstance(tasks, list) or not tasks or not all(isinstance(t, str) for t in tasks):
            problems.append(f"{where}: 'tasks' must be a non-empty list of task names")
            continue
        if len(tasks) > MAX_EVAL_TASKS:
            problems.append(f"{where}: 'tasks' lists {len(tasks)} tasks, over the limit of {MAX_EVAL_TASKS}")
            continue
        # Names of tasks/<name>.json only (never paths); a task whose file exists but is broken has its
        # own problem listed already.
        missing = list(dict.fromkeys(t for t in tasks if t not in task_files))
        if missing:
            problems.append(f"{where}: unknown task(s) {_some(missing)} in 'tasks'; tasks here: "
                            f"{_some(sorted(task_files)) or 'none'} (name them as in tasks/<name>.json)")
            continue
        eval_id = data.get("id") or f"{bundle.id_root}/{entry.stem}"
        why = id_problem(eval_id) if isinstance(eval_id, str) else None
        if not isinstance(eval_id, str) or why:
            problems.append(f"{where}: 'id' must be a string{f' ({why})' if why else ''}, got {shorten(eval_id)}")
            continue
        if not isinstance(data.get("description", ""), str):
            problems.append(f"{where}: 'description' must be a string")
            continue
        bundle.evals[entry.stem] = EvalEntry(entry.stem, eval_id, entry, list(dict.fromkeys(tasks)))


def _some(names: list[str], n: int = 10) -> str:
    """The first `n` names, comma-separated, and how many more (a generated list can be huge)."""
    shown = ", ".join(shorten(x, 60, quote=False) for x in names[:n])
    return shown + (f" and {len(names) - n} more" if len(names) > n else "")


def resolve_refs(steps: object, bundle: Bundle, where: str) -> object:
    """Replace bare names in the fields a step type declares (tasks/entity_refs.py: its artifact and env
    fields, in lists and nested objects too) with the ids of the bundle's own entities."""
    import copy

    from agentenv_local.tasks.entity_refs import ref_sites
    from agentenv_local.tasks.model import step_types

    if not isinstance(steps, list):
        return steps
    types = step_types(bundle.config)
    out = []
    for raw in steps:
        if not isinstance(raw, dict):
            out.append(raw)
            continue
        raw = copy.deepcopy(raw)  # nested places are rewritten in place
        cls = types.get(raw["type"]) if isinstance(raw.get("type"), str) else None
        for site in ref_sites(raw, cls, "artifact"):
            if site.value in bundle.artifacts:
                site.rewrite(bundle.artifacts[site.value].id)
        for site in ref_sites(raw, cls, "env"):
            if site.value in bundle.envs:
                site.rewrite(bundle.envs[site.value].id)
            elif site.value in bundle.env_aliases and site.path == site.field:  # a folder's own name wins
                site.rewrite(bundle.envs[bundle.env_aliases[site.value]].id)
                bundle.alias_uses.append((where, len(out), site.field, site.value))
        for site in ref_sites(raw, cls, "agent"):
            entry = next((a for a in bundle.agents.values() if site.value == a.name), None)
            if entry is not None:
                if entry.task_name != site.value:
                    site.rewrite(entry.task_name)
            elif site.value in bundle.agent_aliases and site.path == site.field:  # a folder's own name wins
                site.rewrite(bundle.agents[bundle.agent_aliases[site.value]].task_name)
                bundle.agent_alias_uses.append((where, len(out), site.field, site.value))
        if isinstance(raw.get("artifacts"), list):  # load_artifact's list form: {"id": ...} or a bare name
            raw["artifacts"] = [_resolve_entry(a, bundle) for a in raw["artifacts"]]
        if isinstance(raw.get("skills"), list):  # deploy_agent / add_skills: skill names, {"id": name}, or inline
            raw["skills"] = [_resolve_skill(s, bundle) for s in raw["skills"]]
        out.append(raw)
    return out


def _resolve_entry(entry: object, bundle: Bundle) -> object:
    if isinstance(entry, str) and entry in bundle.artifacts:
        return bundle.artifacts[entry].id
    if isinstance(entry, dict) and entry.get("id") in bundle.artifacts:
        return {**entry, "id": bundle.artifacts[entry["id"]].id}
    return entry


def _resolve_skill(entry: object, bundle: Bundle) -> object:
    """A bare skill name (or `{"id"|"skill_artifact_id": name}`) -> the bundle's skill id; inline skills stay."""
    if isinstance(entry, str) and entry in bundle.skills:
        return bundle.skills[entry].id
    if isinstance(entry, dict):
        for key in ("id", "skill_artifact_id"):
            if isinstance(entry.get(key), str) and entry[key] in bundle.skills:
                return {**entry, key: bundle.skills[entry[key]].id}
    return entry


def skill_refs(raw: dict) -> list[str]:
    """The stored skill ids a step's `skills` list names (strings, `{"id"}` or `{"skill_artifact_id"}` entries)."""
    entries = raw.get("skills")
    refs = []
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict):
            entry = entry.get("id") or entry.get("skill_artifact_id")
        if isinstance(entry, str):
            refs.append(entry)
    return refs
