"""`env_outcome_verifier`: a Python verifier file checks a deployed env's state through its MCP endpoint.

The file artifact defines `async def verify(mcp_url[, run])` (a plain function works too) returning
`[{"id", "result": bool, "description"}]`. It runs in a separate Python process (the project's
interpreter, so `mcp` is importable and the script can open an `mcp.Client(mcp_url)`), with `mcp_url`
the gateway's MCP endpoint and `run` a dict: `{"prompt_id", "response", "prompt_responses", "seed",
"env": {"id", "gateway_url", "mcp_url"}}`. Each criterion becomes a verification row
`{criterion: description, id, result, score}` under `metadata.verifications[verifier_id]`.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from pydantic import Field

from agentenv_local.errors import AgentenvError, StepError
from agentenv_local.procs import run_process
from agentenv_local.tasks.scoring import AGGREGATORS
from agentenv_local.tasks.step import Step

from . import tail

if TYPE_CHECKING:
    from agentenv_local.tasks.context import StepContext

RUNNER_SOURCE = r'''
import asyncio, importlib.util, inspect, json, os, sys, traceback

def main():
    script, input_path, result_path = sys.argv[1:4]

    def finish(payload, code):
        with open(result_path + ".tmp", "w", encoding="utf-8") as f:
            f.write(json.dumps(payload, default=str))
        os.replace(result_path + ".tmp", result_path)
        sys.stdout.flush(); sys.stderr.flush()
        os._exit(code)

    try:
        with open(input_path, encoding="utf-8") as f:
            data = json.load(f)
        sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
        spec = importlib.util.spec_from_file_location("agentenv_env_verifier", script)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        fn = getattr(module, "verify", None)
        if not callable(fn):
            finish({"ok": False, "error": f"{os.path.basename(script)} defines no function 'verify'"}, 2)
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        star = any(p.kind == p.VAR_POSITIONAL for p in inspect.signature(fn).parameters.values())
        args = [data["mcp_url"], data["run"]] if (len(params) >= 2 or star) else [data["mcp_url"]]
        value = fn(*args)
        if inspect.isawaitable(value):
            async def wait(awaitable):
                return await awaitable
            value = asyncio.run(wait(value))
        finish({"ok": True, "result": value}, 0)
    except BaseException as exc:
        finish({"ok": False, "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}, 1)

main()
'''


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

    def _pick(self, files: dict[str, bytes]) -> str:
        if self.script_file:
            if self.script_file not in files:
                raise StepError(f"step {self.id!r}: artifact {self.file_artifact_id!r} has no file "
                                f"{self.script_file!r}", hint=f"its files: {', '.join(sorted(files))}")
            return self.script_file
        python = sorted(f for f in files if f.endswith(".py"))
        if len(python) == 1:
            return python[0]
        if len(files) == 1:
            return next(iter(files))
        raise StepError(f"step {self.id!r}: artifact {self.file_artifact_id!r} holds {len(python)} Python files; "
                        "say which one verifies", hint=f"set script_file to one of: {', '.join(python)}")

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
        payload = {"mcp_url": mcp_url, "run": self._run_input(ctx, record)}
        folder = Path(tempfile.mkdtemp(prefix="agentenv-env-verifier-"))
        try:
            for rel, data in files.items():
                target = (folder / rel).resolve()
                if not str(target).startswith(str(folder.resolve()) + os.sep):
                    raise StepError(f"step {self.id!r}: artifact file {rel!r} would land outside the work folder")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
            (folder / "_agentenv_verify_runner.py").write_text(RUNNER_SOURCE)
            (folder / "_agentenv_input.json").write_text(json.dumps(payload, default=str))
            result_file = folder / "_agentenv_result.json"
            done = await run_process([sys.executable, str(folder / "_agentenv_verify_runner.py"), str(folder / script),
                                      str(folder / "_agentenv_input.json"), str(result_file)],
                                     cwd=folder, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
                                     timeout=self.timeout_seconds)
            raw = result_file.read_bytes() if result_file.is_file() else None
        finally:
            await asyncio.to_thread(shutil.rmtree, folder, True)
        if done.stdout.strip():
            ctx.log(f"{script} printed: {tail(done.stdout, 2000)}")
        if done.timed_out:
            raise StepError(f"step {self.id!r}: verifier {where} did not finish within {self.timeout_seconds:g}s")
        if raw is None:
            raise StepError(f"step {self.id!r}: verifier {where} exited with code {done.exit_code} without a result"
                            + (f": {tail(done.stderr, 1500)}" if done.stderr.strip() else ""))
        try:
            outcome = json.loads(raw)
        except ValueError as exc:
            raise StepError(f"step {self.id!r}: verifier {where} left an unreadable result: {exc}") from exc
        if not outcome.get("ok"):
            trace = outcome.get("traceback") or done.stderr
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
