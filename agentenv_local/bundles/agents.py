"""A bundle's `agents/<name>/` folders, read into agent records (agents/registry.py) with ids `<id root>/<name>`.

Two layouts:
- ours: `agent.toml` with exactly one of `spec` (what `deploy_agent` starts: `tool-loop`, `claude-code`,
  `file.py:Class` relative to the folder, ...), `url` (an A2A agent already served), `command` (an argv run in
  the folder that serves A2A and prints `serving on http://HOST:PORT` on stderr) or `image` (a Podman image
  serving A2A on $A2A_PORT), plus `description`, `[config]` (agent-config fields; `env:`/`secret:` refs are
  kept as text and read when the agent deploys) and `[env_vars]` (for `command` agents);
- the reference's: `a2a_server.py` (+ Dockerfile, requirements.txt). Its own coding-CLI agents (claude-code,
  codex, gemini, opencode, pi, openhands) run as our built-in harnesses of those names, never its code; a
  task naming one of them by folder name or alias names the built-in. Its `proxy` (the Episode API's) is
  listed as ignored. Any other such folder is refused: its server needs the reference's agentenv_protocol.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentenv_local.errors import AgentenvError

if TYPE_CHECKING:
    from .loader import Bundle

AGENT_TOML = "agent.toml"
KINDS = ("spec", "url", "command", "image")  # exactly one of them
KEYS = (*KINDS, "description", "config", "env_vars")
# The reference's own agents that our built-in harnesses of the same name replace.
REFERENCE_HARNESSES = ("claude-code", "codex", "gemini", "opencode", "pi", "openhands")
REFERENCE_IGNORED = {"proxy": "the reference's Episode API proxy, not an agent a task picks"}


@dataclass
class AgentEntry:
    name: str
    id: str
    body: dict[str, Any]  # the agent record (registry.validate_body)
    digest_files: dict[str, bytes] = field(default_factory=dict)  # what a new version depends on
    builtin: str | None = None  # the reference's folder that our built-in harness of this name replaces

    @property
    def task_name(self) -> str:
        """What a task's bare name for this agent resolves to: the built-in's name, else the record's id."""
        return self.builtin or self.id


def load_agents(bundle: Bundle, problems: list[str]) -> None:
    from .loader import _folder_files, _read_toml, _subfolders

    for entry, where in _subfolders(bundle, "agents", "agent", "with agent.toml, or a2a_server.py", problems):
        settings: dict = {}
        toml_path = entry / AGENT_TOML
        if toml_path.exists() or toml_path.is_symlink():
            read = _read_toml(toml_path, f"{where}/{AGENT_TOML}", problems)
            if read is None:
                continue
            settings = read
        agent_id = f"{bundle.id_root}/{entry.name}"
        if not any(k in settings for k in KINDS) and (entry / "a2a_server.py").is_file():
            _reference_layout(bundle, entry.name, where, agent_id, problems)
            continue
        if not settings and not toml_path.exists():
            problems.append(f"{where}: no {AGENT_TOML}; add one naming exactly one of spec, url, command or image "
                            f"(e.g. spec = \"tool-loop\"), or lay it out as the reference does (a2a_server.py)")
            continue
        body = _body(settings, f"{where}/{AGENT_TOML}", problems)
        if body is None:
            continue
        files: dict[str, bytes] = {}
        if "command" in body or str(body.get("spec", "")).split(":", 1)[0].endswith(".py"):
            found = _folder_files(bundle, entry, where, problems)  # the code it runs: its changes make new versions
            if found is None:
                continue
            files = found
            body["cwd"] = str(entry)
            if "spec" in body:  # a Python agent of the folder: run from the bundle's copy
                body["spec"] = str(entry / body["spec"])
        body["bundle"] = str(bundle.path)
        bundle.agents[entry.name] = AgentEntry(entry.name, agent_id, body, files)


def _reference_layout(bundle: Bundle, name: str, where: str, agent_id: str, problems: list[str]) -> None:
    if name in REFERENCE_IGNORED:
        bundle.ignored.append(f"{where}: ignored ({REFERENCE_IGNORED[name]})")
        return
    if name in REFERENCE_HARNESSES:
        bundle.ignored.append(f"{where}/: the reference's {name} agent runs as the built-in {name} harness "
                              "(its a2a_server.py and Dockerfile are not used)")
        body = {"spec": name, "description": f"the reference's {name} agent: our built-in {name} harness",
                "bundle": str(bundle.path)}
        bundle.agents[name] = AgentEntry(name, agent_id, body, builtin=name)
        return
    problems.append(f"{where}: a reference-layout agent (a2a_server.py) runs on the reference's agentenv_protocol "
                    "package, which agentenv-local neither ships nor runs; add agents/"
                    f"{name}/{AGENT_TOML} with `command = [\"/path/to/venv/bin/python\", \"a2a_server.py\"]` (a "
                    "Python with its requirements.txt installed; it must print `serving on http://127.0.0.1:PORT` "
                    "on stderr) or `image = \"...\"` (an image serving A2A on $A2A_PORT)")


def _body(settings: dict, where: str, problems: list[str]) -> dict[str, Any] | None:
    """The agent record agent.toml gives, or None with its problems added."""
    mine: list[str] = []
    unknown = sorted(set(settings) - set(KEYS))
    if unknown:
        mine.append(f"{where}: unknown key(s) {', '.join(unknown)}; valid: {', '.join(KEYS)}")
    kinds = [k for k in KINDS if k in settings]
    if len(kinds) != 1:
        mine.append(f"{where}: name exactly one of {', '.join(KINDS)}"
                    + (f" (it names {', '.join(kinds)})" if kinds else " (it names none)")
                    + "; e.g. spec = \"tool-loop\"")
    for key in ("spec", "url", "image", "description"):
        if key in settings and not (isinstance(settings[key], str) and settings[key].strip()):
            mine.append(f"{where}: '{key}' must be a non-empty string")
    command = settings.get("command")
    if "command" in settings and not (isinstance(command, list) and command
                                      and all(isinstance(a, str) and a for a in command)):
        mine.append(f"{where}: 'command' must be a non-empty list of strings (an argv, e.g. [\"python\", "
                    "\"server.py\"])")
    for key in ("config", "env_vars"):
        if key in settings and not isinstance(settings[key], dict):
            mine.append(f"{where}: '{key}' must be a table ([{key}])")
    env_vars = settings.get("env_vars")
    if isinstance(env_vars, dict) and not all(isinstance(v, str) for v in env_vars.values()):
        mine.append(f"{where}: [env_vars] values must be strings")
    if "env_vars" in settings and "command" not in settings:
        mine.append(f"{where}: [env_vars] is for a `command` agent (the environment of its process)")
    if not mine:
        from agentenv_local.agents.registry import validate_body

        body = {k: settings[k] for k in KEYS if k in settings}
        try:
            return validate_body(body)
        except AgentenvError as exc:
            mine.append(f"{where}: {exc.message}")
    problems += mine
    return None


def agent_names(bundle: Bundle) -> list[str]:
    """The names a task of `bundle` can give an agent beyond built-ins and the store: folders, then aliases."""
    return [*bundle.agents, *bundle.agent_aliases]


def bundle_agent(bundle: Bundle, name: str, store: Any = None) -> str | None:
    """What `name` names among the bundle's agents (a folder name, its full id, or an alias the store does not
    hold an agent of), as a task's field gets it; None when it names none of them."""
    for entry in bundle.agents.values():
        if name in (entry.name, entry.id):
            return entry.task_name
    folder = bundle.agent_aliases.get(name)
    if folder is None:
        return None
    if store is not None and store.documents.find("agents", name) is not None:  # the store wins over an alias
        return None
    return bundle.agents[folder].task_name


def folder_of(path: Path) -> set[str]:
    """The folder names under `path/agents/` (what aliases.toml [agents] may name)."""
    agents = path / "agents"
    return {p.name for p in agents.iterdir() if p.is_dir()} if agents.is_dir() else set()
