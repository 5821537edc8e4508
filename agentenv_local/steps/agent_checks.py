"""The agent release checks as task steps: `verify_a2a_*`, one check each against an agent deployed in the run.

Each step names the agent the way the reference does (`a2a_agent_id`, optional `a2a_agent_version`) and checks
the agent a deploy_agent step of the run started from that id (or, as the reference does, the run's
`default-agent`; `agent_name` picks one explicitly). The probes that `agentenv agent validate` also runs come
from agents/conformance.py (one implementation); the rest read what earlier steps recorded (prompt responses,
rubric verdicts, agent snapshots), as the reference's do.

Each records verification rows under `metadata.verifications[<a2a_key>]` (with `passed` and the reference's
fields) and stamps its verdict on the agent's record metadata (`agent_metadata` records, see `stamp_agent`)
under the reference's keys (`validated_agent_card`, `validated_a2a_extensions[<uri>]`, ...). A failed check is
a failed row, not a step error; an agent that cannot be reached at all is a step error.
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from agentenv_local.agents import conformance
from agentenv_local.errors import AgentenvError, StepError
from agentenv_local.tasks.step import Step

from .deployed_agents import deployed_agent
from .env_checks import row

if TYPE_CHECKING:
    from agentenv_local.agents.client import A2AClient
    from agentenv_local.tasks.context import StepContext

AGENT_METADATA = "agent_metadata"
DEFAULT_AGENT = "default-agent"
REQUIRED_CARD_FIELDS = ("name", "description", "url", "version", "capabilities", "defaultInputModes",
                        "defaultOutputModes", "skills")
OPTIONAL_CARD_FIELDS = ("authentication", "provider", "documentationUrl")
NEEDS_MODEL = ("the probe needs an agent that follows its system prompt (a model-backed agent, e.g. tool-loop "
               "with a [model] endpoint); a scripted agent only follows its plan")


def ext_uri(name: str) -> str:
    return f"urn:agentenv:{name}/v1"


def find_extension(card: dict | None, name: str) -> dict | None:
    for ext in ((card or {}).get("capabilities") or {}).get("extensions") or []:
        if isinstance(ext, dict) and str(ext.get("uri", "")).startswith(f"urn:agentenv:{name}/"):
            return ext
    return None


def agent_metadata_id(agent_id: str, version: Any) -> str:
    return f"{agent_id}@v{version}" if version is not None else agent_id


def stamp_agent(ctx: StepContext, record: dict, updates: dict[str, Any],
                extension: tuple[str, dict] | None = None) -> None:
    """Merge `updates` (and `validated_a2a_extensions[uri] = entry`) into the agent's record metadata: a mutable
    record, id `<a2a_agent_id>@v<version>` (a built-in agent's bare name), since agent documents are versions."""
    agent_id, version = record.get("a2a_agent_id") or record["agent_name"], record.get("a2a_agent_version")
    rid = agent_metadata_id(agent_id, version)
    found = ctx.store.records.find(AGENT_METADATA, rid)
    body = dict(found["body"]) if found else {"a2a_agent_id": agent_id, "a2a_agent_version": version}
    body.update(updates)
    if extension is not None:
        body["validated_a2a_extensions"] = {**(body.get("validated_a2a_extensions") or {}),
                                            extension[0]: extension[1]}
    body["updated_at"] = time.time()
    ctx.store.records.save(AGENT_METADATA, rid, body)


def _rubric_rows(ctx: StepContext, verifier_id: str) -> list[dict]:
    entry = (ctx.metadata.get("verifications") or {}).get(verifier_id)
    if entry is None:
        raise StepError(f"step {ctx.step.id!r}: no verifier {verifier_id!r} has run before it",
                        hint="list the rubrics_verifier step that grades the probe in depends_on")
    return list(entry.get("results") or [])


def _criterion_passed(rows: list[dict], criterion_id: str) -> bool:
    return any(r.get("id") == criterion_id and (r.get("result") or r.get("score") == 1) for r in rows)


def _prompt_response(ctx: StepContext, prompt_id: str) -> dict | None:
    return next((r for r in reversed(ctx.state.get("prompt_responses", [])) if r.get("prompt_id") == prompt_id),
                None)


class AgentCheckStep(Step):
    """One check of an agent deployed in the run; subclasses set `key` and implement `check`."""

    records_only: ClassVar[bool] = True
    agent_ref_fields: ClassVar[tuple[str, ...]] = ("a2a_agent_id",)
    key: ClassVar[str] = ""  # verifications[<key>], the reference's name

    a2a_agent_id: str = Field(min_length=1)
    a2a_agent_version: int | None = None
    agent_name: str | None = None  # ours: which deployed agent (default: the one deployed from a2a_agent_id)
    timeout_seconds: float = Field(default=60, gt=0)

    def target(self, ctx: StepContext) -> dict:
        """The deployed agent to check: `agent_name`'s, else the one started from `a2a_agent_id` (a bundle may
        have qualified that id), else the run's default-agent."""
        if self.agent_name:
            return deployed_agent(ctx, self.agent_name)
        live = [r for r in ctx.state.get("deployed_agents", []) if not r.get("torn_down")]
        for record in reversed(live):
            agent_id = str(record.get("a2a_agent_id") or "")
            if (agent_id == self.a2a_agent_id or agent_id.endswith("/" + self.a2a_agent_id)) and (
                    self.a2a_agent_version is None or record.get("a2a_agent_version") == self.a2a_agent_version):
                return record
        if any(r.get("agent_name") == DEFAULT_AGENT for r in live):
            return deployed_agent(ctx, DEFAULT_AGENT)
        raise StepError(f"step {self.id!r}: no agent deployed from {self.a2a_agent_id!r} in this run"
                        + (f" (deployed: {', '.join(str(r.get('a2a_agent_id')) for r in live)})" if live else ""),
                        hint="add a deploy_agent step with that a2a_agent_id and list it in depends_on, or name "
                             "the agent with agent_name")

    def client(self, record: dict) -> A2AClient:
        from agentenv_local.agents.client import A2AClient

        return A2AClient(record["a2a_url"], timeout=self.timeout_seconds)

    async def execute(self, ctx: StepContext) -> None:
        record = self.target(ctx)
        try:
            rows, entry, updates, extension = await self.check(ctx, record)
        except AgentenvError as exc:
            if isinstance(exc, StepError):
                raise
            raise StepError(f"step {self.id!r}: agent {record['agent_name']!r} at {record['a2a_url']} could not "
                            f"be checked: {exc.message}", hint=exc.hint) from exc
        passed = bool(rows) and all(r["result"] or r.get("skipped") for r in rows)
        ctx.record_verification(self.key, rows)
        ctx.metadata["verifications"][self.key].update(
            {**entry, "passed": passed, "agent_name": record["agent_name"], "a2a_agent_id": record.get("a2a_agent_id")})
        if extension is not None:
            extension = (extension[0], {**extension[1], "supported": passed})
        # each verdict carries `passed`; the raw card (`agent_card`) is stored as served
        stamp_agent(ctx, record, {k: ({**v, "passed": passed} if isinstance(v, dict) and k != "agent_card" else v)
                                  for k, v in updates.items()}, extension)
        failed = [r for r in rows if not r["result"] and not r.get("skipped")]
        ctx.log(f"{self.key} for agent {record['agent_name']!r}: {'passed' if passed else 'FAILED'} "
                f"({len(rows) - len(failed)}/{len(rows)} checks)"
                + (": " + "; ".join(r["justification"] for r in failed[:3]) if failed else ""))

    async def check(self, ctx: StepContext, record: dict
                    ) -> tuple[list[dict], dict[str, Any], dict[str, Any], tuple[str, dict] | None]:
        """(rows, fields for verifications[key], agent-metadata updates, (extension uri, entry) or None)."""
        raise NotImplementedError


def _from_check(check: conformance.Check, criterion: str) -> dict:
    return row(criterion, check.status == "pass", check.detail, skipped=check.status == "skip")


class VerifyA2AAgentCardStep(AgentCheckStep):
    """The live card has the reference's required fields (non-empty; `skills` may be an empty list)."""

    type: ClassVar[str] = "verify_a2a_agent_card"
    key: ClassVar[str] = "a2a_agent_card"

    async def check(self, ctx: StepContext, record: dict) -> Any:
        async with self.client(record) as client:
            card = await client.card(refresh=True)
        rows, required, optional = [], {}, {}
        for field in REQUIRED_CARD_FIELDS:
            value = card.get(field)
            present = field in card and (bool(value) or (field == "skills" and value == []))
            required[field] = {"present": present}
            rows.append(row(f"card has {field}", present, "present" if present else f"{field} is missing or empty"))
        for field in OPTIONAL_CARD_FIELDS:
            optional[field] = {"present": bool(card.get(field))}
        validated = {"accessible": True, "required_fields": required, "optional_fields": optional}
        return rows, {"agent_card": card, "validated_agent_card": validated}, {
            "agent_card": card, "validated_agent_card": validated}, None


class VerifyA2AAgentConfigIdentityStep(AgentCheckStep):
    """agent-config/v1 takes `name` and `description` and the served card shows them (then they are put back)."""

    type: ClassVar[str] = "verify_a2a_agent_config_identity"
    key: ClassVar[str] = "a2a_agent_config_identity"

    async def check(self, ctx: StepContext, record: dict) -> Any:
        async with self.client(record) as client:
            card, ext = await _agent_config_ext(client)
            supported = _set_fields(ext)
            identity = "name" in supported and "description" in supported
            rows = [_advertised_row(ext),
                    row("agent-config set takes name and description", identity,
                        f"set supports {sorted(supported)}")]
            round_trip = False
            if ext is not None and identity:
                name, description = f"IdentityName-{uuid.uuid4().hex[:12]}", f"IdentityDesc-{uuid.uuid4().hex[:12]}"
                await client.agent_config_set(name=name, description=description)
                try:
                    served = await client.card(refresh=True)
                finally:  # the run's agent keeps its own identity
                    await client.agent_config_set(name=card.get("name"), description=card.get("description"))
                    await client.card(refresh=True)
                round_trip = served.get("name") == name and served.get("description") == description
                rows.append(row("the card shows the identity that was set", round_trip,
                                "name and description round-trip" if round_trip else
                                f"set {name!r}/{description!r}, the card shows "
                                f"{served.get('name')!r}/{served.get('description')!r}"))
        entry = {"extension_advertised": ext is not None, "supports_identity": identity,
                 "identity_round_trip_ok": round_trip}
        return rows, entry, {}, (ext_uri("agent-config"), entry)


async def _agent_config_ext(client: Any) -> tuple[dict, dict | None]:
    """The live card (refreshed) and its agent-config/v1 extension entry, if it lists one."""
    card = await client.card(refresh=True)
    return card, find_extension(card, "agent-config")


def _advertised_row(ext: dict | None) -> dict:
    return row("agent-config/v1 on the card", ext is not None,
               "advertised" if ext else f"the card does not list {ext_uri('agent-config')}")


def _config_methods(ext: dict | None) -> dict:
    """agent-config/v1's advertised methods ({} when the extension or its params are missing)."""
    return ((ext or {}).get("params") or {}).get("methods") or {}


def _set_fields(ext: dict | None) -> set[str]:
    methods = _config_methods(ext)
    return set(((methods.get("set") or {}).get("request") or {}).get("supported") or [])


class VerifyA2ARoleStep(AgentCheckStep):
    """agent-config/v1 takes `role`, offers `get`, and a role set is read back (the old role is put back)."""

    type: ClassVar[str] = "verify_a2a_role"
    key: ClassVar[str] = "a2a_role"

    async def check(self, ctx: StepContext, record: dict) -> Any:
        async with self.client(record) as client:
            _, ext = await _agent_config_ext(client)
            role_ok, get_ok = "role" in _set_fields(ext), "get" in _config_methods(ext)
            rows = [_advertised_row(ext),
                    row("agent-config set takes role and offers get", role_ok and get_ok,
                        f"role in set: {role_ok}; get method: {get_ok}")]
            entry: dict[str, Any] = {"role_in_supported": role_ok, "get_method_advertised": get_ok}
            if ext is not None and role_ok and get_ok:
                before = (await client.agent_config_get()).get("role")
                expected = f"validator-role-{uuid.uuid4().hex[:8]}"
                await client.agent_config_set(role=expected)
                try:
                    observed = (await client.agent_config_get()).get("role")
                finally:
                    await client.agent_config_set(role=before)
                rows.append(row("a role set is read back", observed == expected,
                                f"set {expected!r}, read back {observed!r}"))
                entry.update(expected_role=expected, observed_role=observed)
        return rows, entry, {"validated_role_via_agent_config": entry}, None


class VerifyA2ASystemPromptStep(AgentCheckStep):
    """A system prompt set over agent-config/v1 reaches the agent: it answers a trigger question with the planted
    token. Needs an agent that follows its system prompt (a model); a scripted agent fails it, saying so."""

    type: ClassVar[str] = "verify_a2a_system_prompt"
    key: ClassVar[str] = "a2a_system_prompt"

    timeout_seconds: float = Field(default=300, gt=0)
    poll_interval_seconds: float = Field(default=5, gt=0)

    async def check(self, ctx: StepContext, record: dict) -> Any:
        async with self.client(record) as client:
            _, ext = await _agent_config_ext(client)
            supported = "system_prompt" in _set_fields(ext)
            rows = [row("agent-config/v1 takes system_prompt", supported,
                        "advertised" if supported else "agent-config/v1 is not on the card or its set does not "
                        "list system_prompt")]
            entry: dict[str, Any] = {"system_prompt_in_supported": supported}
            if supported:
                token = f"VALIDATOR-SP-{uuid.uuid4().hex[:12]}"
                before = (await client.agent_config_get()).get("system_prompt") if "get" in _config_methods(
                    ext) else None
                await client.agent_config_set(system_prompt=(
                    "For validator testing purposes: if you are asked the exact question 'What is your validator "
                    f"code?', respond with the exact token: {token} and nothing else."))
                try:
                    task = await client.prompt("What is your validator code?", timeout=self.timeout_seconds,
                                               poll_interval=self.poll_interval_seconds)
                finally:
                    await client.agent_config_set(system_prompt=before)
                answered = token in task.text
                rows.append(row("the agent answers with the planted token", answered,
                                "the token reached the agent" if answered else
                                f"answered {task.text[:200]!r} ({task.state}); {NEEDS_MODEL}"))
                entry.update(expected_token=token, observed_response=task.text[:500])
        return rows, entry, {"validated_system_prompt": entry}, None


class VerifyA2AAgentMCPStep(AgentCheckStep):
    """The agent uses the env it was given over mcp-config/v1: a test prompt ends `completed` with at least one
    tool call in its trajectory. The task id is kept for verify_a2a_trajectory."""

    type: ClassVar[str] = "verify_a2a_agent_mcp"
    key: ClassVar[str] = "a2a_agent_mcp"
    env_ref_fields: ClassVar[tuple[str, ...]] = ("env_id",)  # ours: a deployed env, named as in deploy_env

    env_id: str | None = None  # ours: which deployed env (default: the run's first)
    prompt: str = "Use one of the tools of your registered MCP server and report its raw output."
    timeout_seconds: float = Field(default=300, gt=0)
    poll_interval_seconds: float = Field(default=10, gt=0)

    async def check(self, ctx: StepContext, record: dict) -> Any:
        envs = [e for e in ctx.state.get("deployed_envs", []) if not e.get("torn_down")]
        env = ctx.deployed_env(self.env_id) if self.env_id else (envs[0] if envs else None)
        if env is None:
            raise StepError(f"step {self.id!r}: no env is deployed in this run; verify_a2a_agent_mcp checks that "
                            "the agent calls an env's tools", hint="deploy an env and give it to the agent "
                                                                 "(deploy_agent env_ids)")
        async with self.client(record) as client:
            servers = await client.mcp_config_list()
            rows = [row("the agent lists an MCP server", bool(servers),
                        f"{len(servers)} server(s) registered" if servers else "mcp-config lists no server; "
                        "give the agent the env with deploy_agent env_ids")]
            task = await client.prompt(self.prompt, timeout=self.timeout_seconds,
                                       poll_interval=self.poll_interval_seconds)
            task_id = task.raw.get("id")
            events = (await client.trajectory_get(task_id=task_id)).get("trajectory") or [] if task_id else []
        calls = sum(1 for e in events if isinstance(e, dict) and e.get("type") == "tool_call")
        rows.append(row("the test prompt completed", task.state == "completed", f"ended {task.state!r}"))
        rows.append(row("the agent called a tool", calls > 0, f"{calls} tool call(s) in the task's trajectory"))
        entry = {"tools_invoked": calls, "task_status": task.state, "task_id": task_id,
                 "agent_response": task.text[:500], "env_id": env.get("env_id")}
        return rows, entry, {}, (ext_uri("mcp-config"), {"tools_invoked": calls})


class VerifyCoreA2AProtocolStep(AgentCheckStep):
    """message/send and tasks/get worked for `prompt_id` (its prompt response has no error), and an unknown
    JSON-RPC method is refused with -32601 (the conformance probe)."""

    type: ClassVar[str] = "verify_a2a_core_protocol"
    key: ClassVar[str] = "a2a_core_protocol"

    prompt_id: str = Field(min_length=1)

    async def check(self, ctx: StepContext, record: dict) -> Any:
        response = _prompt_response(ctx, self.prompt_id)
        send_ok = response is not None
        get_ok = send_ok and response is not None and response.get("error_type") is None
        rows = [row("message/send", send_ok, "a prompt response was recorded" if send_ok else
                    f"no prompt response {self.prompt_id!r}: did its prompt_agent step run?"),
                row("tasks/get", get_ok, "no error" if get_ok else "no task to read" if response is None else
                    f"error {response.get('error_type')!r}: {response.get('error_message')}")]
        async with self.client(record) as client:
            await client.card()
            rows.append(_from_check(await conformance.check_unknown_method(client, record["a2a_url"],
                                                                          self.timeout_seconds),
                                    "an unknown method is refused"))
        protocol = {"message/send": {"supported": send_ok}, "tasks/get": {"supported": get_ok},
                    "unknown_method_refused": rows[-1]["result"]}
        return rows, {"protocol": protocol}, {"validated_a2a_protocol": protocol}, None


class VerifyA2ATrajectoryStep(AgentCheckStep):
    """trajectory/v1 returns the events of a finished task inline (the task of verify_a2a_agent_mcp, else the
    agent's latest prompt); the object-store variant is cloud-only and reported skipped."""

    type: ClassVar[str] = "verify_a2a_trajectory"
    key: ClassVar[str] = "a2a_trajectory"

    async def check(self, ctx: StepContext, record: dict) -> Any:
        ext = find_extension(record.get("a2a_card"), "trajectory")
        if ext is None:
            rows = [row("trajectory/v1 on the card", False, f"the card does not list {ext_uri('trajectory')}")]
            return rows, {"inline": False, "objects": False}, {}, (ext_uri("trajectory"), {})
        task_id = ((ctx.metadata.get("verifications") or {}).get("a2a_agent_mcp") or {}).get("task_id")
        if not task_id:
            mine = [r for r in ctx.state.get("prompt_responses", []) if r.get("agent_name") == record["agent_name"]]
            task_id = mine[-1].get("a2a_task_id") if mine else None
        if not task_id:
            raise StepError(f"step {self.id!r}: no finished task of agent {record['agent_name']!r} to read the "
                            "trajectory of", hint="run verify_a2a_agent_mcp or a prompt_agent step before it")
        async with self.client(record) as client:
            await client.card()
            check = await conformance.check_trajectory(client, task_id=task_id, require_events=True)
        rows = [_from_check(check, "an inline trajectory of the task"),
                row("an object-store trajectory", False, "object-store uploads need a cloud object store; "
                    "not checked offline", skipped=True)]
        inline = rows[0]["result"]
        entry = {"inline": inline, "objects": False, "task_id": task_id}
        return rows, entry, {}, (ext_uri("trajectory"), {"methods": {"get": {"supported": inline, "options": {
            "task_id": {"supported": inline}, "objects": {"supported": False}}}}})


class VerifyA2AInstallStep(AgentCheckStep):
    """The agent an install step put in place (`agent_name`) is deployed, offers install/v1, and a rubric says
    it responded to a prompt (criterion `responded`)."""

    type: ClassVar[str] = "verify_a2a_install"
    key: ClassVar[str] = "a2a_install"

    agent_name: str | None = "install-test-agent"
    rubric_verifier_id: str | None = None

    def target(self, ctx: StepContext) -> dict:
        found = [r for r in ctx.state.get("deployed_agents", [])
                 if r.get("agent_name") == self.agent_name and not r.get("torn_down")]
        return found[-1] if found else {"agent_name": self.agent_name, "a2a_agent_id": self.a2a_agent_id,
                                        "a2a_agent_version": self.a2a_agent_version, "a2a_url": None}

    async def check(self, ctx: StepContext, record: dict) -> Any:
        installed = record.get("a2a_url") is not None
        advertised = installed and find_extension(record.get("a2a_card"), "install") is not None
        put = [r for r in ctx.state.get("installed_agents", []) if r.get("agent_name") == self.agent_name]
        why = (f"install_agent put its CLI into sandbox {put[-1].get('sandbox_name')!r}, and starts no A2A server "
               "there (deploy_agent starts agents)" if put else "no install_agent or deploy_agent step made it")
        rows = [row("the installed agent is deployed", installed, "deployed" if installed else
                    f"no agent named {self.agent_name!r} was deployed: {why}"),
                row("install/v1 on the card", advertised, "advertised" if advertised else
                    f"the card does not list {ext_uri('install')}")]
        responded = False
        if self.rubric_verifier_id:
            responded = _criterion_passed(_rubric_rows(ctx, self.rubric_verifier_id), "responded")
            rows.append(row("the installed agent responded", responded,
                            f"rubric {self.rubric_verifier_id!r} criterion 'responded'"))
        entry = {"advertised": advertised, "installed_successfully": installed, "responded_to_prompt": responded}
        return rows, entry, {}, (ext_uri("install"), entry)


class VerifyA2ASkillConfigStep(AgentCheckStep):
    """skill-config/v1 adds an inline skill and lists it (the conformance probe); with `rubric_verifier_id`, its
    criterion `secret_code_inline` says the agent used an inline skill. Object-store bundles are cloud-only."""

    type: ClassVar[str] = "verify_a2a_skill_config"
    key: ClassVar[str] = "a2a_skill_config"

    rubric_verifier_id: str | None = None
    skill_bundle_object_url: str | None = None

    async def check(self, ctx: StepContext, record: dict) -> Any:
        ext = find_extension(record.get("a2a_card"), "skill-config")
        rows = [row("skill-config/v1 on the card", ext is not None,
                    "advertised" if ext else f"the card does not list {ext_uri('skill-config')}")]
        if ext is not None:
            async with self.client(record) as client:
                await client.card()
                rows.append(_from_check(await conformance.check_skills(client), "an inline skill is added and listed"))
        if self.rubric_verifier_id:
            rows.append(row("the agent used an inline skill",
                            _criterion_passed(_rubric_rows(ctx, self.rubric_verifier_id), "secret_code_inline"),
                            f"rubric {self.rubric_verifier_id!r} criterion 'secret_code_inline'"))
        if self.skill_bundle_object_url:
            rows.append(row("a skill bundle from the object store", False,
                            "skill_bundle_object_url needs a cloud object store; not checked offline", skipped=True))
        inline = all(r["result"] for r in rows if not r.get("skipped"))
        entry = {"inline": inline, "bundle": False}
        return rows, entry, {}, (ext_uri("skill-config"), {"methods": {"add": {"variants": {
            "inline": {"supported": inline}, "bundle": {"supported": False}}}}})


class VerifyA2ASnapshotStep(AgentCheckStep):
    """snapshot/v1 is on a deployed agent's card, a snapshot_agent_state step saved one, and the rubric's
    `rubric_criterion_id` says an agent restored from it recalled what was planted (load worked)."""

    type: ClassVar[str] = "verify_a2a_snapshot"
    key: ClassVar[str] = "a2a_snapshot"

    rubric_verifier_id: str = Field(min_length=1)
    rubric_criterion_id: str = "recall"

    def target(self, ctx: StepContext) -> dict:
        if self.agent_name:
            return deployed_agent(ctx, self.agent_name)
        try:
            return super().target(ctx)
        except StepError:  # as the reference: the verdict is about the id, read from the run's records
            return {"agent_name": self.a2a_agent_id, "a2a_agent_id": self.a2a_agent_id,
                    "a2a_agent_version": self.a2a_agent_version, "a2a_url": None}

    async def check(self, ctx: StepContext, record: dict) -> Any:
        advertised = any(find_extension(a.get("a2a_card"), "snapshot") is not None
                         for a in ctx.state.get("deployed_agents", []))
        saved = bool(ctx.metadata.get("agent_snapshots"))
        recall = _criterion_passed(_rubric_rows(ctx, self.rubric_verifier_id), self.rubric_criterion_id)
        rows = [row("snapshot/v1 on a deployed agent's card", advertised,
                    "advertised" if advertised else f"no deployed agent lists {ext_uri('snapshot')}"),
                row("a snapshot was saved", saved, "metadata.agent_snapshots" if saved else
                    "no snapshot_agent_state step saved one"),
                row("the restored agent recalled the planted fact", recall,
                    f"rubric {self.rubric_verifier_id!r} criterion {self.rubric_criterion_id!r}")]
        entry = {"extension_advertised": advertised, "save": saved, "load": recall, "recall": recall}
        return rows, entry, {}, (ext_uri("snapshot"), {"extension_advertised": advertised, "methods": {
            "save": {"supported": saved}, "load": {"supported": recall}}, "recall_after_load": recall})


class VerifyA2APeerAgentsStep(AgentCheckStep):
    """peer-agents/v1 sets and lists a peer and its peer tools answer `peer_list` (the conformance probe; the
    table is emptied after, as the reference does), and `peer_prompt_id`'s reply holds `expected_token`."""

    type: ClassVar[str] = "verify_a2a_peer_agents"
    key: ClassVar[str] = "a2a_peer_agents"

    peer_prompt_id: str | None = None
    expected_token: str | None = None

    def config_problems(self) -> list[str]:
        if (self.peer_prompt_id is None) != (self.expected_token is None):
            return ["peer_prompt_id and expected_token go together: the peer call is checked by finding the "
                    "token in that prompt's reply"]
        return []

    async def check(self, ctx: StepContext, record: dict) -> Any:
        async with self.client(record) as client:
            card = await client.card(refresh=True)
            ext = find_extension(card, "peer-agents")
            rows = [row("peer-agents/v1 on the card", ext is not None,
                        "advertised" if ext else f"the card does not list {ext_uri('peer-agents')}")]
            if ext is not None:
                rows.append(_from_check(await conformance.check_peer_agents(client, card),
                                        "a peer is set, listed and seen by the peer tools"))
        excerpt = ""
        if self.peer_prompt_id:
            response = _prompt_response(ctx, self.peer_prompt_id)
            excerpt = str((response or {}).get("response") or "")[:200]
            ok = response is not None and str(self.expected_token) in str(response.get("response") or "")
            rows.append(row("the peer call answered with the expected token", ok,
                            f"{self.peer_prompt_id!r} replied {excerpt!r}" if response else
                            f"no prompt response {self.peer_prompt_id!r}"))
        entry = {"extension_advertised": ext is not None, "peer_call_response_excerpt": excerpt}
        return rows, entry, {}, (ext_uri("peer-agents"), entry)


class ModalityProbe(BaseModel):
    model_config = ConfigDict(extra="forbid")

    modality: str = Field(min_length=1)
    prompt_id: str = Field(min_length=1)
    expected: str = Field(min_length=1)


class VerifyA2AModalitiesStep(AgentCheckStep):
    """Grade modality probes: each probe's prompt response (a prompt_agent step that sent the media) holds its
    `expected` text (case-insensitive); the card's declared modes are recorded next to the results."""

    type: ClassVar[str] = "verify_a2a_modalities"
    key: ClassVar[str] = "a2a_modalities"

    probes: list[ModalityProbe] = Field(min_length=1)

    def target(self, ctx: StepContext) -> dict:
        try:
            return super().target(ctx)
        except StepError:  # graded from prompt responses alone, as the reference does
            return {"agent_name": self.a2a_agent_id, "a2a_agent_id": self.a2a_agent_id,
                    "a2a_agent_version": self.a2a_agent_version, "a2a_url": None}

    async def check(self, ctx: StepContext, record: dict) -> Any:
        rows: list[dict] = []
        results: dict[str, dict[str, Any]] = {}
        for probe in self.probes:
            response = _prompt_response(ctx, probe.prompt_id)
            text = str((response or {}).get("response") or "")
            result: dict[str, Any]
            if response is None:
                result = {"supported": False, "reason": "probe_step_did_not_run"}
            elif response.get("error_type"):
                result = {"supported": False, "reason": "protocol_reject", "error_type": response["error_type"],
                          "probe_response": text[:200]}
            else:
                ok = probe.expected.lower() in text.lower()
                result = {"supported": ok, "reason": "passed" if ok else "no_ingestion_evidence",
                          "probe_response": text[:200]}
            results[probe.modality] = result
            rows.append(row(f"modality {probe.modality}", bool(result["supported"]),
                            f"{result['reason']} ({probe.prompt_id!r})"))
        card = record.get("a2a_card") or {}
        declared = {"default_input_modes": card.get("defaultInputModes"),
                    "default_output_modes": card.get("defaultOutputModes")}
        entry = {"input": results, "declared": declared}
        return rows, entry, {"validated_modalities": entry}, None
