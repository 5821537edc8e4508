"""Agent control steps beyond deploy/prompt: `add_skills`, `register_agent_triggers`, `peer_agents` (and
`snapshot_agent_state` in agent_snapshot.py); and `resolve_skills`, which turns a step's `skills` list into
skill-config/v1 bodies (deploy_agent uses it too).

A skill entry is a stored skill artifact (its id, a bundle's `skills/<name>/` by bare name, or
`{"id", "version"?}` / `{"skill_artifact_id", "skill_artifact_version"?}`), or an inline skill
`{"name", "description", "skill_md"}` (or `"body"` instead of `skill_md`: the SKILL.md is then made from
name, description and body). Skills are delivered inline (`{name, description, skill_md}`): only SKILL.md
reaches the agent, not the other files of a stored skill's folder.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from agentenv_local.errors import AgentenvError, StepError
from agentenv_local.tasks.step import Step

from .deployed_agents import deployed_agent

if TYPE_CHECKING:
    from agentenv_local.tasks.context import StepContext

EXT = "urn:agentenv:{}/v1"
_REF_KEYS = {"id": "version", "skill_artifact_id": "skill_artifact_version"}
_INLINE_KEYS = {"name", "description", "skill_md", "body"}


def skill_entry_problems(entry: Any, where: str) -> list[str]:
    """What is wrong with one entry of a `skills` list (pure: no store)."""
    if isinstance(entry, str):
        return [] if entry.strip() else [f"{where}: an empty skill id"]
    if not isinstance(entry, dict):
        return [f"{where}: a skill is an artifact id (string), {{'id', 'version'}}, or an inline skill "
                + "{'name', 'description', 'skill_md'}"]
    refs = [k for k in _REF_KEYS if k in entry]
    if refs:
        key = refs[0]
        allowed = {key, _REF_KEYS[key]}
        problems = []
        if len(refs) > 1 or set(entry) - allowed:
            problems.append(f"{where}: unknown field(s) {', '.join(sorted(set(entry) - allowed))} next to {key!r}; "
                            f"a stored skill is {{{key!r}, {_REF_KEYS[key]!r}}}")
        if not isinstance(entry[key], str) or not entry[key]:
            problems.append(f"{where}.{key}: must be a non-empty string")
        version = entry.get(_REF_KEYS[key])
        if version is not None and (isinstance(version, bool) or not isinstance(version, int) or version < 1):
            problems.append(f"{where}.{_REF_KEYS[key]}: must be a positive integer")
        return problems
    from agentenv_local.skills import NAME_RE

    problems = []
    unknown = set(entry) - _INLINE_KEYS
    if unknown:
        problems.append(f"{where}: unknown field(s) {', '.join(sorted(unknown))}; an inline skill has name, "
                        "description, skill_md (or body)")
    name = entry.get("name")
    if not isinstance(name, str) or not NAME_RE.match(name):
        problems.append(f"{where}.name: {name!r} is not a valid skill name (1-64 lowercase letters, digits and "
                        "hyphens, not starting or ending with '-', no '--')")
    if not isinstance(entry.get("description"), str) or not entry["description"].strip():
        problems.append(f"{where}.description: required (a non-empty string)")
    texts = [k for k in ("skill_md", "body") if k in entry]
    if len(texts) != 1:
        problems.append(f"{where}: give one of skill_md (the whole SKILL.md) or body (its instructions)")
    elif not isinstance(entry[texts[0]], str) or not entry[texts[0]].strip():
        problems.append(f"{where}.{texts[0]}: must be a non-empty string")
    return problems


def _inline_skill_md(entry: dict) -> str:
    if "skill_md" in entry:
        return entry["skill_md"]
    description = entry["description"].replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")
    return f"---\nname: {entry['name']}\ndescription: \"{description}\"\n---\n\n{entry['body']}"


def resolve_skills(ctx: StepContext, skills: list[Any]) -> list[dict[str, Any]]:
    """The skill-config/v1 inline bodies `{name, description, skill_md}` (plus `source`, dropped before sending)
    for a step's `skills` list: stored skills are read from the store (pinned version, else the latest)."""
    from agentenv_local.skills import skill_payload

    step_id = ctx.step.id
    out = []
    for i, entry in enumerate(skills):
        problems = skill_entry_problems(entry, f"skills[{i}]")
        if problems:
            raise StepError(f"step {step_id!r}: {problems[0]}")
        if isinstance(entry, str):
            ref, version = entry, None
        elif isinstance(entry, dict) and any(k in entry for k in _REF_KEYS):
            key = next(k for k in _REF_KEYS if k in entry)
            ref, version = entry[key], entry.get(_REF_KEYS[key])
        else:
            out.append({"name": entry["name"], "description": entry["description"].strip(),
                        "skill_md": _inline_skill_md(entry), "source": {"inline": True}})
            continue
        doc = ctx.artifact(ref, version)
        try:
            payload = skill_payload(ctx.store, doc)
        except AgentenvError as exc:
            raise StepError(f"step {step_id!r}: skills[{i}]: {exc.message}", hint=exc.hint) from exc
        out.append({**payload, "source": {"id": doc["id"], "version": doc["version"]}})
    names = [s["name"] for s in out]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise StepError(f"step {step_id!r}: skill(s) {', '.join(dupes)} listed twice; an agent takes each name once")
    return out


def _advertises(record: dict, name: str) -> bool | None:
    """Whether the agent's card lists extension `urn:agentenv:<name>/v1` (None: no card to tell)."""
    card = record.get("a2a_card")
    if not isinstance(card, dict):
        return None
    uri = EXT.format(name)
    return any(isinstance(e, dict) and e.get("uri") == uri
               for e in (card.get("capabilities") or {}).get("extensions") or [])


def _require(ctx: StepContext, record: dict, name: str) -> None:
    if _advertises(record, name) is False:
        raise StepError(f"step {ctx.step.id!r}: agent {record['agent_name']!r} does not support {name}/v1 "
                        f"(its card does not list {EXT.format(name)})",
                        hint="deploy an agent that implements the extension (the built-in agents do)")


def _client(record: dict, timeout: float = 30):
    from agentenv_local.agents.client import A2AClient

    return A2AClient(record["a2a_url"], timeout=timeout)


class AddSkillsStep(Step):
    """Install skills (stored skill artifacts or inline skills) on a deployed agent over skill-config/v1."""

    type: ClassVar[str] = "add_skills"
    artifact_ref_fields: ClassVar[tuple[str, ...]] = ("cli_artifact_ids[]", "file_artifact_universe_ids[]")

    cloud_only_fields: ClassVar[dict[str, str]] = {
        "cli_artifact_ids": "installing CLI artifacts as an agent's skills is not done locally; list skills instead",
        "file_artifact_universe_ids": "installing file universes as an agent's skills is not done locally; "
                                      "use load_artifact with agent_name",
    }

    agent_name: str = Field(default="default-agent", min_length=1)
    skills: list[str | dict[str, Any]] = Field(min_length=1)
    cli_artifact_ids: list[str] | None = None
    file_artifact_universe_ids: list[str] | None = None

    def config_problems(self) -> list[str]:
        return [p for i, s in enumerate(self.skills) for p in skill_entry_problems(s, f"skills[{i}]")]

    async def execute(self, ctx: StepContext) -> None:
        record = deployed_agent(ctx, self.agent_name)
        _require(ctx, record, "skill-config")
        skills = resolve_skills(ctx, self.skills)
        recorded = ctx.metadata.setdefault("agent_skills", {}).setdefault(self.agent_name, [])
        done_here = {r["name"] for r in recorded if r.get("step_id") == self.id}  # a retry of this step
        try:
            async with _client(record) as client:
                for skill in skills:
                    if skill["name"] in done_here:
                        continue
                    await client.skill_add(skill["name"], skill["description"], skill["skill_md"])
                    recorded.append({"name": skill["name"], **skill["source"], "step_id": self.id})
                listed = await client.skill_list()
                record["a2a_card"] = await client.card(refresh=True)  # the live card lists installed skills
        except AgentenvError as exc:
            raise StepError(f"step {self.id!r}: agent {self.agent_name!r} did not take its skills: {exc.message}",
                            hint=exc.hint) from exc
        missing = [s["name"] for s in skills if s["name"] not in listed]
        if missing:
            raise StepError(f"step {self.id!r}: agent {self.agent_name!r} accepted but does not list skill(s) "
                            f"{', '.join(missing)}")
        ctx.emit("agent.skills_added", {"agent_name": self.agent_name, "skills": [s["name"] for s in skills]})
        ctx.log(f"installed {len(skills)} skill(s) on agent {self.agent_name!r}: "
                + ", ".join(s["name"] for s in skills))


class RegisterAgentTriggersStep(Step):
    """Register scripted user-simulator triggers on a deployed agent over triggers/v1."""

    type: ClassVar[str] = "register_agent_triggers"
    env_ref_fields: ClassVar[tuple[str, ...]] = (  # a condition's env, in all/any ("of") nesting too
        "triggers[].when.env_id", "triggers[].when.of[].env_id", "triggers[].when.of[].of[].env_id")

    agent_name: str = Field(min_length=1)
    triggers: list[dict[str, Any]] = Field(min_length=1)

    def config_problems(self) -> list[str]:
        from agentenv_local.agents.triggers import TriggerEngine, TriggerError

        try:  # the agent's own rules, on a scratch engine: a bad spec fails before anything runs
            TriggerEngine().register({"triggers": self.triggers})
        except TriggerError as exc:
            return [f"triggers: {exc}"]
        return []

    async def execute(self, ctx: StepContext) -> None:
        record = deployed_agent(ctx, self.agent_name)
        _require(ctx, record, "triggers")
        try:
            async with _client(record) as client:
                answer = await client.triggers_register(self.triggers)
        except AgentenvError as exc:
            raise StepError(f"step {self.id!r}: agent {self.agent_name!r} refused its triggers: {exc.message}",
                            hint=exc.hint) from exc
        ctx.metadata.setdefault("agent_triggers", {})[self.agent_name] = {
            "added": answer.get("added", []), "all": answer.get("all", []), "step_id": self.id}
        ctx.log(f"registered {len(answer.get('added', []))} trigger(s) on agent {self.agent_name!r}")


class Peering(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source_agent_name: str = Field(min_length=1)
    peer_agent_names: list[str] = Field(min_length=1)


class PeerAgentsStep(Step):
    """Push each source agent's peer table (`{name, url, card, description}` per peer) over peer-agents/v1."""

    type: ClassVar[str] = "peer_agents"

    peerings: list[Peering] = Field(min_length=1)

    def config_problems(self) -> list[str]:
        problems = []
        seen = set()
        for i, p in enumerate(self.peerings):
            if p.source_agent_name in seen:
                problems.append(f"peerings[{i}].source_agent_name: {p.source_agent_name!r} appears twice; give all "
                                "of its peers in one entry (a set replaces the agent's table)")
            seen.add(p.source_agent_name)
            if p.source_agent_name in p.peer_agent_names:
                problems.append(f"peerings[{i}].peer_agent_names: an agent cannot be its own peer "
                                f"({p.source_agent_name!r})")
            dupes = sorted({n for n in p.peer_agent_names if p.peer_agent_names.count(n) > 1})
            if dupes:
                problems.append(f"peerings[{i}].peer_agent_names: {', '.join(dupes)} listed twice")
        return problems

    async def execute(self, ctx: StepContext) -> None:
        tables: dict[str, list[dict[str, Any]]] = {}
        for p in self.peerings:  # every name is checked before any agent is told anything
            source = deployed_agent(ctx, p.source_agent_name)
            _require(ctx, source, "peer-agents")
            peers = []
            for name in p.peer_agent_names:
                peer = deployed_agent(ctx, name)
                card = peer.get("a2a_card")
                if not isinstance(card, dict):
                    card = {}
                description = card.get("description") or peer.get("agent_description") or f"agent {name}"
                peers.append({"name": name, "url": peer["a2a_url"], "card": card, "description": description})
            tables[p.source_agent_name] = peers
        recorded = ctx.metadata.setdefault("agent_peerings", {})
        for source_name, peers in tables.items():
            source = deployed_agent(ctx, source_name)
            try:
                async with _client(source) as client:
                    await client.peer_agents_set(peers)
                    listed = await client.peer_agents_list()
            except AgentenvError as exc:
                raise StepError(f"step {self.id!r}: agent {source_name!r} refused its peers: {exc.message}",
                                hint=exc.hint) from exc
            recorded[source_name] = [p.get("name") for p in listed]
            ctx.log(f"agent {source_name!r} peers with {', '.join(recorded[source_name])}")

