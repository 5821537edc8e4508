"""`run_code`: call `run(input)` of a Python script artifact in a separate Python process.

`input` is `{"args": <the step's args>, "results": <metadata.script_results so far>}`, plus
`"env": {"id", "url", "mcp_url"}` (the deployed env's gateway) when the step names an `env_id`;
the script then runs on this machine (never in a sandbox, which an agent may share) and may call the
env's tools over MCP; `"admin_token"` is the instance's control-plane credential for its data plane,
as `env_outcome_verifier` scripts get it. The
function may be async. Its return value must be JSON (at most 50 MiB); it is stored in
`metadata.script_results[result_id]`. The script runs in the sandbox named by `sandbox_name`
(its files are copied to a scratch folder under /app and the command's working directory is
/app), or, without a sandbox, in a temporary folder on this machine.

A tiny runner (RUNNER_SOURCE) imports the script file, calls the entrypoint and writes one JSON
document to a result file: `{"ok": true, "result": ...}` or `{"ok": false, "error", "traceback"}`.
A result file rather than stdout keeps whatever the script prints out of the way. On this machine the
runner first lets agentenv_local.compat give a script written for mcp 1.x (the reference's) its 1.x client
facade (compat/mcp1.py), and gives a verifier the reference's `Run` (compat/run_view.py); a sandbox's own
Python may not have agentenv_local, and there the script runs as written.

On this machine the runner runs in a fresh fork of the warm script worker (agentenv_local/script_worker.py: mcp
and the compat layer already imported; same argv, cwd, environment and process group as a fresh interpreter)
unless `[scripts] warm = false`, or the worker can't start (then a fresh interpreter, and one log line says why).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import posixpath
import re
import secrets
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field

from agentenv_local.errors import AgentenvError, ConfigError, NotFoundError, StepError
from agentenv_local.procs import run_process
from agentenv_local.sandbox_api import ExecResult
from agentenv_local.script_worker import ScriptExit, WorkerUnavailable, run_warm
from agentenv_local.tasks.step import Step

from . import tail

if TYPE_CHECKING:
    from agentenv_local.tasks.context import StepContext

MAX_RESULT_BYTES = 50 * 1024 * 1024
SANDBOX_SCRATCH = "/app/.agentenv-run-code"

RUNNER_SOURCE = r'''
import asyncio, importlib.util, inspect, json, os, sys, traceback

def main():
    script, entrypoint, input_path, result_path, max_bytes = sys.argv[1:6]
    style = sys.argv[6] if len(sys.argv) > 6 else "input"  # "verify": env_outcome_verifier's signature

    def finish(payload, code):
        with open(result_path + ".tmp", "w", encoding="utf-8") as f:
            f.write(json.dumps(payload) if isinstance(payload, dict) else payload)
        os.replace(result_path + ".tmp", result_path)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)

    name = os.path.basename(script)
    try:
        with open(input_path, encoding="utf-8") as f:
            data = json.load(f)
        try:  # this machine's interpreter has our compat layer; a sandbox's python may not
            from agentenv_local.compat import mcp1, run_view
        except ImportError:
            mcp1 = run_view = None
        sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
        spec = importlib.util.spec_from_file_location("agentenv_run_code_script", script)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        if mcp1 is not None:
            mcp1.watch_folder(os.path.dirname(os.path.abspath(script)))  # its helper modules written for mcp 1.x
            with open(script, encoding="utf-8", errors="replace") as f:
                if mcp1.uses_mcp1(f.read()):  # a script written for mcp 1.x (the reference's) gets its facade
                    mcp1.prepare_module(module)
        spec.loader.exec_module(module)
        fn = getattr(module, entrypoint, None)
        if not callable(fn):
            finish({"ok": False, "error": f"{name} defines no function {entrypoint!r}"}, 2)
        if style == "verify":  # verify(mcp_url[, run]); the reference passes run=
            run = data["run"]
            if run_view is not None and "run_context" in data:
                run = run_view.build_run(run, data["run_context"])
            params = inspect.signature(fn).parameters
            sig = params.values()
            positional = [p for p in sig if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
            star = any(p.kind == p.VAR_POSITIONAL for p in sig)
            if "run" in params and params["run"].kind != params["run"].POSITIONAL_ONLY:
                value = fn(data["mcp_url"], run=run)
            else:
                value = fn(*([data["mcp_url"], run] if (len(positional) >= 2 or star) else [data["mcp_url"]]))
        else:
            value = fn(data)
        if inspect.isawaitable(value):
            async def wait(awaitable):
                return await awaitable
            value = asyncio.run(wait(value))
        try:
            text = json.dumps({"ok": True, "result": value}, allow_nan=False)
        except (TypeError, ValueError) as exc:
            finish({"ok": False, "error": f"{entrypoint}() returned something that is not JSON: {exc}"}, 2)
        if len(text.encode("utf-8")) > int(max_bytes):
            finish({"ok": False, "error": f"{entrypoint}() returned {len(text.encode('utf-8'))} bytes of JSON; "
                                           f"the limit is {max_bytes}"}, 2)
        finish(text, 0)
    except BaseException as exc:
        finish({"ok": False, "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}, 1)

main()
'''


class RunCodeStep(Step):
    type: ClassVar[str] = "run_code"
    artifact_ref_fields: ClassVar[tuple[str, ...]] = ("script_artifact_id",)
    env_ref_fields: ClassVar[tuple[str, ...]] = ("env_id",)

    script_artifact_id: str = Field(min_length=1)
    script_artifact_version: int | None = Field(default=None, ge=1)
    script_file: str | None = None  # which file of a bundle; None: the only .py file, or main.py
    entrypoint: str = "run"
    args: Any = Field(default_factory=dict)
    result_id: str | None = None  # None: the step id
    timeout_seconds: float = Field(default=300, gt=0)
    sandbox_name: str | None = None  # None: a temporary folder on this machine
    env_id: str | None = None
    agent_name: str | None = None

    def config_problems(self) -> list[str]:
        problems = []
        if not self.entrypoint.isidentifier():
            problems.append(f"entrypoint: {self.entrypoint!r} is not a Python function name")
        if self.script_file is not None:
            parts = PurePosixPath(self.script_file).parts
            if not self.script_file or self.script_file.startswith("/") or ".." in parts:
                problems.append(f"script_file: {self.script_file!r} must be a relative path inside the artifact")
        if self.result_id is not None and not self.result_id:
            problems.append("result_id: must not be empty")
        targets = [f for f in ("sandbox_name", "env_id", "agent_name") if getattr(self, f)]
        if len(targets) > 1:
            problems.append(f"{', '.join(targets)}: run in one place per step")
        try:
            json.dumps(self.args)
        except (TypeError, ValueError):
            problems.append("args: must be JSON")
        return problems

    def pick_script(self, files: dict[str, bytes]) -> str:
        return pick_script(self.id, self.script_artifact_id, files, self.script_file, "run", fallback="main.py")

    async def execute(self, ctx: StepContext) -> None:
        doc = ctx.artifact(self.script_artifact_id, self.script_artifact_version)
        try:
            files = ctx.artifact_files(doc)
        except AgentenvError as exc:
            raise StepError(f"step {self.id!r}: cannot read artifact {self.script_artifact_id!r}: "
                            f"{exc.message}") from exc
        script = self.pick_script(files)
        script_input = {"args": self.args, "results": ctx.metadata.get("script_results", {})}
        if self.env_id:  # the reference's shape: where the env's gateway answers
            record = ctx.deployed_env(self.env_id)
            script_input["env"] = {"id": record["env_id"], "url": record["gateway_url"],
                                   "mcp_url": record["mcp_url"], "instance_id": record.get("instance_id")}
            from .env_gateway import admin_token

            script_input["env"]["admin_token"] = admin_token(ctx, record)
        payload = json.dumps(script_input).encode()
        where = f"{script} ({doc['id']} v{doc['version']})"
        if self.sandbox_name or self.agent_name:  # agent_name: the sandbox the agent runs in
            code, stdout, stderr, timed_out, raw = await self._in_sandbox(ctx, files, script, payload)
        else:
            code, stdout, stderr, timed_out, raw = await self._on_host(ctx, files, script, payload)
        if stdout.strip():
            ctx.log(f"{script} printed: {tail(stdout, 2000)}")
        if timed_out:
            raise StepError(f"step {self.id!r}: {where} did not finish within {self.timeout_seconds:g}s; it was killed",
                            hint="raise timeout_seconds, or make the script faster")
        if raw is None:
            raise StepError(f"step {self.id!r}: {where} exited with code {code} without a result"
                            + (f": {tail(stderr, 1500)}" if stderr.strip() else ""))
        if len(raw) > MAX_RESULT_BYTES + 64:
            raise StepError(f"step {self.id!r}: {where} returned more than {MAX_RESULT_BYTES} bytes")
        try:
            outcome = json.loads(raw)
        except ValueError as exc:
            raise StepError(f"step {self.id!r}: {where} left an unreadable result: {exc}") from exc
        if not outcome.get("ok"):
            trace = outcome.get("traceback") or stderr
            raise StepError(f"step {self.id!r}: {where} {self.entrypoint}() failed: {outcome.get('error')}"
                            + (f"\n{tail(trace, 2000)}" if trace and trace.strip() else ""))
        result_id = self.result_id or self.id
        ctx.metadata.setdefault("script_results", {})[result_id] = outcome.get("result")
        ctx.log(f"{where}: {self.entrypoint}() returned a result, stored as script_results[{result_id!r}]")

    # -- where the script runs ----------------------------------------------------------------
    def _argv(self, python: str, folder: str, script: str) -> list[str]:
        join = posixpath.join
        return [python, join(folder, "_agentenv_runner.py"), join(folder, script), self.entrypoint,
                join(folder, "_agentenv_input.json"), join(folder, "_agentenv_result.json"), str(MAX_RESULT_BYTES)]

    async def _on_host(self, ctx: StepContext, files: dict[str, bytes], script: str, payload: bytes):
        return await run_script_on_host(self.id, files, script, self.entrypoint, payload, self.timeout_seconds,
                                        warm=warm_scripts(ctx), note=ctx.log)

    async def _in_sandbox(self, ctx: StepContext, files: dict[str, bytes], script: str, payload: bytes):
        from .collect_artifacts import target_sandbox

        where, sandbox = await target_sandbox(ctx, self.sandbox_name, self.agent_name)  # one of them is set
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", self.id)[:40]
        folder = f"{SANDBOX_SCRATCH}/{slug}-{secrets.token_hex(4)}"
        try:
            for rel, data in files.items():
                await sandbox.write_file(f"{folder}/{rel}", data)
            await sandbox.write_file(f"{folder}/_agentenv_runner.py", RUNNER_SOURCE.encode())
            await sandbox.write_file(f"{folder}/_agentenv_input.json", payload)
            python = getattr(sandbox, "python_executable", "python3")
            result = await sandbox.exec(self._argv(python, folder, script), timeout=self.timeout_seconds,
                                        env={"PYTHONDONTWRITEBYTECODE": "1"}, cwd="/app")
            try:
                raw = await sandbox.read_file(f"{folder}/_agentenv_result.json")
            except NotFoundError:
                raw = None
            return result.exit_code, result.stdout, result.stderr, result.timed_out, raw
        except AgentenvError as exc:
            raise StepError(f"step {self.id!r}: cannot run {script} in sandbox {where!r}: {exc.message}",
                            hint=exc.hint) from exc
        finally:
            with contextlib.suppress(Exception):
                await sandbox.exec(["rm", "-rf", folder], timeout=30)


async def run_script_on_host(step_id: str, files: dict[str, bytes], script: str, entrypoint: str, payload: bytes,
                             timeout: float, style: str = "input", *, warm: bool = False,
                             note: Callable[[str], None] | None = None):
    """Write `files` to a temporary folder and call `entrypoint` of `script` there through the runner.

    Returns (exit code, stdout, stderr, timed out, the result file's bytes or None). `style` "verify"
    calls `entrypoint(mcp_url[, run])` from the payload instead of `entrypoint(payload)`. `warm`: in a fork of
    the warm script worker (agentenv_local/script_worker.py) with the same argv, cwd and environment, else (or
    when the worker can't start: `note` hears why, in one line) in a fresh interpreter.
    """
    folder = Path(tempfile.mkdtemp(prefix="agentenv-run-code-"))
    try:
        for rel, data in files.items():
            target = (folder / rel).resolve()
            if not str(target).startswith(str(folder.resolve()) + os.sep):
                raise StepError(f"step {step_id!r}: artifact file {rel!r} would land outside the work folder")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        (folder / "_agentenv_runner.py").write_text(RUNNER_SOURCE)
        (folder / "_agentenv_input.json").write_bytes(payload)
        result_file = folder / "_agentenv_result.json"
        argv = [sys.executable, str(folder / "_agentenv_runner.py"), str(folder / script), entrypoint,
                str(folder / "_agentenv_input.json"), str(result_file), str(MAX_RESULT_BYTES), style]
        # The process sandbox's minimal environment, never all of ours (API keys behind `secret:` refs).
        from agentenv_local.procs import host_env

        env = {**host_env(), "PYTHONDONTWRITEBYTECODE": "1"}
        done: ExecResult | ScriptExit | None = None
        if warm:
            try:
                done = await run_warm(argv[1:], cwd=str(folder), env=env, timeout=timeout)
            except WorkerUnavailable as exc:
                if note is not None:
                    note(f"ran {script} in a fresh interpreter: the warm script worker is unavailable ({exc})")
        if done is None:
            done = await run_process(argv, cwd=folder, env=env, timeout=timeout)
        raw = result_file.read_bytes() if result_file.is_file() else None
        return done.exit_code, done.stdout, done.stderr, done.timed_out, raw
    finally:
        await asyncio.to_thread(shutil.rmtree, folder, True)


def warm_scripts(ctx: StepContext) -> bool:
    """`[scripts] warm`: host Python scripts run in a fork of the warm worker (default) or a fresh interpreter.
    The default when the config can't say (a config object without the key), as hosting/envs/pool.py does."""
    try:
        return ctx.config.get("scripts.warm", True) is not False
    except ConfigError:
        return True


def pick_script(step_id: str, artifact_id: str, files: dict[str, bytes], script_file: str | None, purpose: str,
                fallback: str | None = None) -> str:
    """Which file of a script artifact to run: `script_file` if given, else its only .py file, else
    `fallback` (when present), else its only file."""
    if script_file:
        if script_file not in files:
            raise StepError(f"step {step_id!r}: artifact {artifact_id!r} has no file {script_file!r}",
                            hint=f"its files: {', '.join(sorted(files))}")
        return script_file
    python = sorted(f for f in files if f.endswith(".py"))
    if len(python) == 1:
        return python[0]
    if fallback and fallback in files:
        return fallback
    if len(files) == 1:
        return next(iter(files))
    raise StepError(f"step {step_id!r}: artifact {artifact_id!r} has {len(python)} Python files"
                    + (f" and no {fallback}" if fallback else "") + f"; say which one to {purpose}",
                    hint=f"set script_file to one of: {', '.join(python or sorted(files))}")
