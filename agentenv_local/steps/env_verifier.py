"""`env_outcome_verifier`: a Python verifier file checks a deployed env's state through its MCP endpoint.

The file artifact defines `async def verify(mcp_url[, run])` (a plain function works too) returning
`[{"id", "result": bool, "description"}]`. It runs in a separate Python process (the project's
interpreter: a fork of the warm script worker unless `[scripts] warm = false`, see run_code's
`run_script_on_host`; so `mcp` is importable and the script can open an `mcp.Client(mcp_url)`), with `mcp_url`
the gateway's MCP endpoint and `run` a dict: `{"prompt_id", "response", "prompt_responses", "seed",
"env": {"id", "gateway_url", "mcp_url", "admin_token"}}` (`admin_token`: the instance's control-plane
credential for its data plane, `Authorization: Bearer ...`; None with an open control plane). Each
criterion becomes a verification row `{criterion: description, id, result, score}` under
`metadata.verifications[verifier_id]`.

`run` is also the reference's `Run` (compat/run_view.py: `turns`, `firings()`, `as_of()`), built in the script's
process from the graded prompt response and each deployed env's trigger events, which `_run_context` reads here;
a `verify` with a parameter named `run` gets it as `run=`, as the reference passes it. A script written for mcp
1.x gets its client facade (compat/mcp1.py).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, ClassVar

from pydantic import Field

from agentenv_local.errors import AgentenvError, StepError
from agentenv_local.tasks.scoring import AGGREGATORS
from agentenv_local.tasks.step import Step

from . import tail
from .env_gateway import EnvGateway, admin_token, message_of
from .run_code import pick_script, run_script_on_host, warm_scripts

if TYPE_CHECKING:
    from agentenv_local.tasks.context import StepContext

# The script runs through run_code's runner, in its `verify(mcp_url[, run])` call style.



class EnvOutcomeVerifierStep(Step):
    type: ClassVar[str] = "env_outcome_verifier"
    env_ref_fields: ClassVar[tuple[str, ...]] = ("env_id",)
    artifact_ref_fields: ClassVar[tuple[str, ...]] = ("file_artifact_id",)

    env_id: str = Field(min_length=1)
    file_artifact_id: str = Field(min_length=1)
    file_artifact_version: int | None = Field(default=None, ge=1)
    script_file: str | None = None  # which file of a bundle; None: the only .py file
    score_aggregator: str = "all_pass"
    verifier_id: str | None = None
    prompt_id: str | None = None
    timeout_seconds: float = Field(default=300, gt=0)

    def config_problems(self) -> list[str]:
        problems = []
        if self.score_aggregator not in AGGREGATORS:
            problems.append(f"score_aggregator: {self.score_aggregator!r} is not one of {', '.join(AGGREGATORS)}")
        if self.verifier_id is not None and not self.verifier_id:
            problems.append("verifier_id: must not be empty")
        return problems

    def _run_input(self, ctx: StepContext, record: dict) -> dict:
        responses = list(ctx.state.get("prompt_responses") or [])
        response = None
        if self.prompt_id:
            matching = [r for r in responses if isinstance(r, dict) and r.get("prompt_id") == self.prompt_id]
            if not matching:
                raise StepError(f"step {self.id!r}: no prompt response with prompt_id {self.prompt_id!r} yet",
                                hint="run the prompt_agent step first and list it in depends_on")
            response = matching[-1]
        return {"prompt_id": self.prompt_id, "response": response, "prompt_responses": responses,
                "seed": ctx.metadata.get("seed", {}),
                "env": {"id": self.env_id, "gateway_url": record.get("gateway_url"), "mcp_url": record.get("mcp_url")}}

    async def _run_context(self, ctx: StepContext) -> dict:
        """What the runner builds the reference's `Run` from (compat/run_view.py): the graded prompt response (the
        one `prompt_id` names, else the last, as the reference grades) and each deployed env's trigger events."""
        responses = [r for r in ctx.state.get("prompt_responses") or [] if isinstance(r, dict)]
        matching = [r for r in responses if not self.prompt_id or r.get("prompt_id") == self.prompt_id]
        events: dict[str, list] = {}
        unavailable: dict[str, str] = {}
        for record in ctx.state.get("deployed_envs") or []:
            env_id = str(record.get("env_id"))
            if not record.get("gateway_url"):
                unavailable[env_id] = "the env has no gateway, so no trigger log"
                continue
            try:
                async with EnvGateway(ctx, env_id, timeout=30) as gw:
                    status, answer = await gw.request("GET", "/triggers/state")
            except StepError as exc:
                unavailable[env_id] = exc.message[:200]
                continue
            if status >= 300 or not isinstance(answer, dict) or not isinstance(answer.get("events"), list):
                unavailable[env_id] = f"GET /triggers/state answered {status}: {message_of(answer)[:200]}"
            elif answer.get("events_dropped"):  # the engine keeps a head and a tail: the middle is gone
                unavailable[env_id] = f"incomplete: the gateway dropped {answer['events_dropped']} of its events"
            else:
                events[env_id] = answer["events"]
        return {"prompt": matching[-1] if matching else None, "env_events": events, "env_unavailable": unavailable}

    def _pick(self, files: dict[str, bytes]) -> str:
        return pick_script(self.id, self.file_artifact_id, files, self.script_file, "verify with")

    async def execute(self, ctx: StepContext) -> None:
        record = ctx.deployed_env(self.env_id)
        mcp_url = record.get("mcp_url") or (str(record.get("gateway_url") or "").rstrip("/") + "/mcp")
        doc = ctx.artifact(self.file_artifact_id, self.file_artifact_version)
        try:
            files = ctx.artifact_files(doc)
        except AgentenvError as exc:
            raise StepError(f"step {self.id!r}: cannot read artifact {self.file_artifact_id!r}: {exc.message}") from exc
        script = self._pick(files)
        where = f"{script} ({doc['id']} v{doc['version']})"
        run = self._run_input(ctx, record)
        # the task's own verifier may read the env's data plane: it gets the admin token (not journaled or logged)
        run["env"]["admin_token"] = admin_token(ctx, record)
        payload = {"mcp_url": mcp_url, "run": run, "run_context": await self._run_context(ctx)}
        code, stdout, stderr, timed_out, raw = await run_script_on_host(
            self.id, files, script, "verify", json.dumps(payload, default=str).encode(), self.timeout_seconds,
            style="verify", warm=warm_scripts(ctx), note=ctx.log)
        if stdout.strip():
            ctx.log(f"{script} printed: {tail(stdout, 2000)}")
        if timed_out:
            raise StepError(f"step {self.id!r}: verifier {where} did not finish within {self.timeout_seconds:g}s")
        if raw is None:
            raise StepError(f"step {self.id!r}: verifier {where} exited with code {code} without a result"
                            + (f": {tail(stderr, 1500)}" if stderr.strip() else ""))
        try:
            outcome = json.loads(raw)
        except ValueError as exc:
            raise StepError(f"step {self.id!r}: verifier {where} left an unreadable result: {exc}") from exc
        if not outcome.get("ok"):
            trace = outcome.get("traceback") or stderr
            raise StepError(f"step {self.id!r}: verifier {where} verify() failed: {outcome.get('error')}"
                            + (f"\n{tail(trace, 2000)}" if trace and trace.strip() else ""))
        rows = self._rows(outcome.get("result"), where)
        verifier_id = self.verifier_id or self.id
        score = ctx.record_verification(verifier_id, rows, self.score_aggregator)
        ctx.log(f"{verifier_id}: {sum(r['result'] for r in rows)}/{len(rows)} criteria passed, score {score:g}")

    def _rows(self, value, where: str) -> list[dict]:
        if not isinstance(value, list) or not value:
            raise StepError(f"step {self.id!r}: verifier {where} must return a non-empty list of "
                            f"{{id, result, description}}, got {json.dumps(value, default=str)[:200]}")
        rows = []
        for i, item in enumerate(value):
            if not isinstance(item, dict) or not isinstance(item.get("result"), bool):
                raise StepError(f"step {self.id!r}: verifier {where} result [{i}] needs a boolean \"result\": "
                                f"{json.dumps(item, default=str)[:200]}")
            cid = str(item.get("id") or f"criterion-{i + 1}")
            row = {"criterion": str(item.get("description") or cid), "id": cid, "result": item["result"],
                   "score": 1.0 if item["result"] else 0.0}
            if isinstance(item.get("weight"), (int, float)) and not isinstance(item.get("weight"), bool):
                row["weight"] = item["weight"]
            rows.append(row)
        return rows
