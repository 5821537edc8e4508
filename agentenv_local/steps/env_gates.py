"""The env release gate: steps that check a deployed env and record a verdict per gate.

- `verify_env_card`: the Environment Card (the gateway's and each service's) is well-formed.
- `verify_env_core_protocol`: each service's data plane round-trips (get, reset, add it back, get the same),
  and the gateway's card and state answer.
- `verify_mcp_tool_schema`: every tool's input schema is a valid, portable JSON Schema (gate `mcp_tool_schema`).
- `verify_spec_conformance`: the MCP surface (initialize, tools/list and its pagination, an unknown tool's error).
- `verify_mcp_env_assessment`: gate `mcp_tool_correctness` from an agent's structured assessment (JSON reply).
- `validation_gate_aggregator`: rolls `required_gates` into `validation_gate`.

Each records verification rows under `metadata.verifications[<gate>]` (the reference's keys, with `passed`)
and stamps the verdict on the env version's record metadata (`env_metadata` records, id `<env>@v<version>`,
see `stamp_env`), where `agentenv env validate` and a publisher read it. A failed check is a failed row, not
a step error; an env that cannot be reached at all is a step error.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field

from agentenv_local.errors import StepError

from . import env_checks as checks
from .env_control import EnvStep
from .env_gateway import EnvGateway, RpcError, message_of

if TYPE_CHECKING:
    from agentenv_local.tasks.context import StepContext

ENV_METADATA = "env_metadata"
MCP_TIMEOUT_S = 30.0


def env_metadata_id(env_id: str, version: Any) -> str:
    return f"{env_id}@v{version}"


def stamp_env(ctx: StepContext, env_id: str, key: str, value: Any) -> None:
    """Merge `{key: value}` into the deployed env version's record metadata (a mutable record: env
    documents are immutable versions)."""
    record = ctx.deployed_env(env_id)
    rid = env_metadata_id(record.get("env_id") or env_id, record.get("env_version"))
    found = ctx.store.records.find(ENV_METADATA, rid)
    body = dict(found["body"]) if found else {"env_id": record.get("env_id") or env_id,
                                              "env_version": record.get("env_version"), "gates": {}}
    if key == "validation_gate":
        body["validation_gate"] = value
    else:
        body.setdefault("gates", {})[key] = value
    body["updated_at"] = time.time()
    ctx.store.records.save(ENV_METADATA, rid, body)


def record_gate(ctx: StepContext, env_id: str, gate: str, rows: list[dict], **extra: Any) -> bool:
    """Record the rows under verifications[gate] with `passed`, stamp the verdict on the env; True if passed."""
    passed = bool(rows) and all(r["result"] or r.get("skipped") for r in rows)
    ctx.record_verification(gate, rows)
    entry = ctx.metadata["verifications"][gate]
    entry.update(passed=passed, env_id=env_id, **extra)
    failed = [r for r in rows if not r["result"] and not r.get("skipped")]
    stamp_env(ctx, env_id, gate, {"passed": passed, "run_id": ctx.run_id, "step_id": ctx.step.id,
                                  "failed": [r["justification"] for r in failed][:20], **extra})
    ctx.log(f"{gate} for env {env_id}: {'passed' if passed else 'FAILED'} "
            f"({len(rows) - len(failed)}/{len(rows)} checks)"
            + (": " + "; ".join(r["justification"] for r in failed[:3]) if failed else ""))
    return passed


async def list_all_tools(mcp_url: str, *, max_pages: int = 100) -> tuple[list[dict], int]:
    """Every tool the MCP endpoint lists, following nextCursor; (tools in wire form, pages read)."""
    from mcp import Client

    tools: list[dict] = []
    cursor: str | None = None
    pages = 0
    async with Client(mcp_url, read_timeout_seconds=MCP_TIMEOUT_S) as client:
        while True:
            pages += 1
            result = await client.list_tools(cursor=cursor)
            tools.extend(t.model_dump(by_alias=True, exclude_none=True) for t in result.tools)
            cursor = getattr(result, "next_cursor", None) or getattr(result, "nextCursor", None)
            if not cursor or pages >= max_pages:
                return tools, pages


def _unreachable(step: Any, what: str, exc: BaseException) -> StepError:
    return StepError(f"step {step.id!r}: {what} of env {step.env_id!r} failed: {type(exc).__name__}: {exc}",
                     hint="is the env deployed in this run? (a deploy_env step listed in depends_on)")


# --- verify_env_card ------------------------------------------------------------------------------------

class VerifyEnvCardStep(EnvStep):
    type: ClassVar[str] = "verify_env_card"
    records_only: ClassVar[bool] = True

    async def execute(self, ctx: StepContext) -> None:
        rows: list[dict] = []
        async with EnvGateway(ctx, self.env_id) as gw:
            status, card = await gw.request("GET", "/.well-known/agent-env.json")
            if status >= 300:
                rows.append(checks.row("the env serves its card", False, f"HTTP {status}: {message_of(card)}"))
                card = None
            else:
                rows.extend(checks.card_rows(card))
            children = [c.get("name") for c in (card or {}).get("children_environments") or []
                        if isinstance(c, dict) and c.get("name")]
            for child in children:
                status, ccard = await gw.request("GET", f"/svc/mcp-{child}/.well-known/agent-env.json", child=child)
                if status >= 300:
                    rows.append(checks.row(f"service {child!r} serves its card", False,
                                           f"HTTP {status}: {message_of(ccard)}"))
                    continue
                for r in checks.card_rows(ccard):
                    rows.append({**r, "criterion": f"service {child!r}: {r['criterion']}"})
        summary = {"name": (card or {}).get("name"), "children": children,
                   "extensions": [e.get("uri") for e in ((card or {}).get("capabilities") or {}).get("extensions")
                                  or [] if isinstance(e, dict)]}
        record_gate(ctx, self.env_id, checks.GATE_CARD, rows, card=summary)


# --- verify_env_core_protocol ---------------------------------------------------------------------------

class VerifyEnvCoreProtocolStep(EnvStep):
    type: ClassVar[str] = "verify_env_core_protocol"
    records_only: ClassVar[bool] = True

    async def execute(self, ctx: StepContext) -> None:
        rows: list[dict] = []
        async with EnvGateway(ctx, self.env_id) as gw:
            status, state = await gw.request("GET", "/state")
            rows.append(checks.row("the gateway answers /state (health)", status < 300 and isinstance(state, dict),
                                   f"HTTP {status}" + ("" if status < 300 else f": {message_of(state)}")))
            for child in await gw.children():
                rows.extend(await self._round_trip(gw, child))
        record_gate(ctx, self.env_id, checks.GATE_CORE, rows)

    @staticmethod
    async def _round_trip(gw: EnvGateway, child: str) -> list[dict]:
        """data/get, data/reset, data/add of what was exported, data/get again: the same data comes back
        (the service ends as it began)."""
        ops = await gw.operations(child)
        missing = [op for op in ("data/reset", "data/add", "data/get") if op not in ops]
        if missing:
            return [checks.row(f"service {child!r} has the data plane", False,
                               f"its card lacks {', '.join(missing)} (operations: {', '.join(ops) or 'none'})")]
        rows = []
        try:
            before = await gw.rpc(child, "data/get")
        except RpcError as exc:
            return [checks.row(f"service {child!r}: data/get", False, exc.message)]
        parts = before.get("parts") if isinstance(before, dict) else None
        if not isinstance(parts, list):
            return [checks.row(f"service {child!r}: data/get returns parts", False, f"it returned {before!r:.200}")]
        try:
            await gw.rpc(child, "data/reset")
            await gw.rpc(child, "data/add", {"parts": parts})
            after = await gw.rpc(child, "data/get")
        except RpcError as exc:
            return [checks.row(f"service {child!r}: data/reset, data/add, data/get", False, exc.message)]
        diffs = checks.export_differences(parts, (after or {}).get("parts"), "parts")
        rows.append(checks.row(f"service {child!r}: reset, add and get round-trip the data", not diffs,
                               "the export loads back to the same export" if not diffs
                               else "data lost or changed: " + "; ".join(diffs)))
        return rows


# --- verify_mcp_tool_schema -----------------------------------------------------------------------------

class VerifyMcpToolSchemaStep(EnvStep):
    type: ClassVar[str] = "verify_mcp_tool_schema"
    records_only: ClassVar[bool] = True

    async def execute(self, ctx: StepContext) -> None:
        record = ctx.deployed_env(self.env_id)
        try:
            tools, _pages = await list_all_tools(record["mcp_url"])
        except Exception as exc:
            raise _unreachable(self, "tools/list", exc) from exc
        rows = checks.tool_schema_rows(tools) or [checks.row("the env lists at least one tool", False,
                                                             "tools/list is empty")]
        record_gate(ctx, self.env_id, checks.GATE_SCHEMA, rows, total_tools=len(tools))


# --- verify_spec_conformance ----------------------------------------------------------------------------

class VerifySpecConformanceStep(EnvStep):
    type: ClassVar[str] = "verify_spec_conformance"
    records_only: ClassVar[bool] = True

    async def execute(self, ctx: StepContext) -> None:
        from mcp import Client

        record = ctx.deployed_env(self.env_id)
        rows: list[dict] = []
        try:
            async with Client(record["mcp_url"], read_timeout_seconds=MCP_TIMEOUT_S) as client:
                info = client.server_info
                rows.append(checks.row("initialize names the server and a protocol version",
                                       bool(getattr(info, "name", None)) and bool(client.protocol_version),
                                       f"server {getattr(info, 'name', None)!r}, protocol {client.protocol_version}"))
                caps = client.server_capabilities
                rows.append(checks.row("the server declares the tools capability",
                                       getattr(caps, "tools", None) is not None, f"capabilities: {caps}"))
                rows.append(await self._unknown_tool(client))
        except Exception as exc:
            raise _unreachable(self, "the MCP handshake", exc) from exc
        try:
            tools, pages = await list_all_tools(record["mcp_url"])
        except Exception as exc:
            rows.append(checks.row("tools/list (with pagination) answers", False, f"{type(exc).__name__}: {exc}"))
        else:
            names = [t.get("name") for t in tools]
            dupes = sorted({n for n in names if names.count(n) > 1}, key=str)
            rows.append(checks.row("tools/list pages list each tool once", not dupes,
                                   f"{len(tools)} tool(s) in {pages} page(s)"
                                   + (f"; listed twice: {', '.join(map(str, dupes))}" if dupes else "")))
            unnamed = [i for i, n in enumerate(names) if not isinstance(n, str) or not n]
            rows.append(checks.row("every listed tool has a name and an inputSchema",
                                   not unnamed and all(isinstance(t.get("inputSchema"), dict) for t in tools),
                                   "ok" if not unnamed else f"tools without a name at {unnamed}"))
        record_gate(ctx, self.env_id, checks.GATE_SPEC, rows)

    @staticmethod
    async def _unknown_tool(client: Any) -> dict:
        """A call of a tool that does not exist must fail: a JSON-RPC error or an isError result."""
        name = "agentenv_conformance_no_such_tool"
        criterion = "tools/call of an unknown tool is an error"
        try:
            result = await client.call_tool(name, {})
        except Exception as exc:  # the protocol error the spec asks for (-32602)
            return checks.row(criterion, True, f"JSON-RPC error: {exc}")
        if getattr(result, "is_error", False):
            return checks.row(criterion, True, "an isError result")
        return checks.row(criterion, False, f"the call succeeded: {result.model_dump(exclude_none=True)!r:.200}")


# --- verify_mcp_env_assessment --------------------------------------------------------------------------

class VerifyMcpEnvAssessmentStep(EnvStep):
    type: ClassVar[str] = "verify_mcp_env_assessment"
    records_only: ClassVar[bool] = True

    prompt_id: str = Field(min_length=1)

    async def execute(self, ctx: StepContext) -> None:
        ctx.deployed_env(self.env_id)  # the env must be this run's
        answers = [r for r in ctx.state.get("prompt_responses", []) if isinstance(r, dict)
                   and r.get("prompt_id") == self.prompt_id]
        if not answers:
            raise StepError(f"step {self.id!r}: no response to prompt {self.prompt_id!r} in this run",
                            hint="list the prompt_agent step that asks for the assessment in depends_on")
        answer = answers[-1]
        if answer.get("error_type") or answer.get("error"):
            rows = [checks.row("the agent answered", False,
                               f"agent error: {answer.get('error_type') or answer.get('error')}")]
        else:
            rows = assessment_rows(answer.get("response"))
        record_gate(ctx, self.env_id, checks.GATE_CORRECTNESS, rows, total_tools=sum("tool" in r for r in rows))


def assessment_rows(response: Any) -> list[dict]:
    """One row per tool in `{"results": [{"tool_name", "passed", "error", "justification"}]}`."""
    if isinstance(response, str):
        text = response.strip()
        if text.startswith("```"):  # a fenced JSON block
            text = text.strip("`").removeprefix("json").strip()
        try:
            response = json.loads(text)
        except ValueError as exc:
            return [checks.row("the assessment is JSON", False, f"invalid JSON: {exc}")]
    results = response.get("results") if isinstance(response, dict) else None
    if not isinstance(results, list) or not results:
        return [checks.row("the assessment lists tool results", False,
                           "expected {\"results\": [{\"tool_name\", \"passed\", ...}]}, got no results")]
    rows = []
    for item in results:
        item = item if isinstance(item, dict) else {}
        name = str(item.get("tool_name") or "?")
        ok = item.get("passed") is True
        why = str(item.get("justification") or "") if ok else str(item.get("error") or item.get("justification")
                                                                  or "failed")
        rows.append(checks.row(f"tool {name!r} works", ok, why or "ok", tool=name))
    return rows


# --- validation_gate_aggregator -------------------------------------------------------------------------

class ValidationGateAggregatorStep(EnvStep):
    type: ClassVar[str] = "validation_gate_aggregator"
    records_only: ClassVar[bool] = True

    required_gates: list[str] = Field(default_factory=lambda: list(checks.DEFAULT_REQUIRED_GATES))

    def config_problems(self) -> list[str]:
        return [] if self.required_gates and all(self.required_gates) else \
            ["required_gates: name at least one gate (e.g. mcp_tool_schema)"]

    async def execute(self, ctx: StepContext) -> None:
        summary = checks.gate_summary(ctx.metadata.get("verifications") or {}, self.required_gates)
        ctx.metadata["validation_gate"] = summary
        stamp_env(ctx, self.env_id, "validation_gate", {**summary, "run_id": ctx.run_id, "step_id": self.id})
        ctx.log(f"validation gate for env {self.env_id}: {'passed' if summary['passed'] else 'FAILED'}"
                + (f" (failed: {', '.join(summary['failed_gates'])})" if summary["failed_gates"] else "")
                + (f" (missing: {', '.join(summary['missing_gates'])})" if summary["missing_gates"] else ""))
