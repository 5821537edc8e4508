"""`run_container_unit_tests_verifier`: run a test command in a deployed sandbox and score it.

The setup commands run first, in order; a failing one scores 0 (with its output) and the test
command does not run. Then `command` runs under `bash -c` in `/app` with `env_vars`. The score:
- with `reward_path`: the number in that file after the run (a float in [0, 1], or JSON
  `{"reward": x}`); a missing or unreadable file scores 0 and says why. The file is removed before
  anything runs, so a stale one (or one the agent wrote) never counts;
- without: 1 when the command exits 0, else 0.
A timed-out command scores 0. The outputs (stdout.txt, stderr.txt, each setup command's output
and the files of `result_paths` under results/) are stored as one file-bundle artifact that the
verification row names. Written only against the Sandbox interface.
"""

from __future__ import annotations

import inspect
import json
import math
import posixpath
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field, field_validator

from agentenv_local import artifacts as artifact_types
from agentenv_local.errors import AgentenvError, NotFoundError, StepError
from agentenv_local.tasks.step import Step

from . import resolve_sandbox_name, sandbox_or_container, tail
from .collect_artifacts import (
    DEFAULT_MAX_FILE_BYTES,
    add_run_artifact,
    bundle_name,
    file_entry,
    file_sizes,
    normalized,
    read_capped,
)

if TYPE_CHECKING:
    from agentenv_local.sandbox_api import ExecResult, Sandbox
    from agentenv_local.tasks.context import StepContext

WORKDIR = "/app"
MAX_RESULT_FILE_BYTES = DEFAULT_MAX_FILE_BYTES
OUTPUT_TAIL = 600


class RunContainerUnitTestsVerifierStep(Step):
    type: ClassVar[str] = "run_container_unit_tests_verifier"

    command: str
    sandbox_name: str | None = None  # None: the run's only deployed sandbox
    container_name: str | None = None  # the reference's task container; for us a sandbox's name (wins)
    setup_commands: list[str] = Field(default_factory=list)
    user: str | None = "root"  # root/None: the sandbox's own user, unless its exec() takes a user
    timeout_sec: float = Field(default=300, gt=0)
    env_vars: dict[str, str] = Field(default_factory=dict)
    result_paths: list[str] = Field(default_factory=list)
    reward_path: str | None = None
    verifier_id: str | None = None  # None: the step id

    @field_validator("setup_commands", "result_paths", mode="before")
    @classmethod
    def _lone_string(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    def config_problems(self) -> list[str]:
        problems = []
        if not self.command.strip():
            problems.append("command: must be a non-empty command string")
        for i, cmd in enumerate(self.setup_commands):
            if not cmd.strip():
                problems.append(f"setup_commands[{i}]: must be a non-empty command string")
        if any(not p for p in self.result_paths):
            problems.append("result_paths: entries must be non-empty paths")
        if self.reward_path is not None and not self.reward_path.strip():
            problems.append("reward_path: must not be empty (leave it out to score by exit code)")
        bad = [k for k in self.env_vars if not k or "=" in k or "\0" in k]
        if bad:
            problems.append(f"env_vars: bad variable name(s): {', '.join(map(repr, bad))}")
        if self.user is not None and not self.user.strip():
            problems.append("user: must not be empty (leave it out for root)")
        if self.verifier_id is not None and not self.verifier_id:
            problems.append("verifier_id: must not be empty")
        return problems

    async def execute(self, ctx: "StepContext") -> None:
        problems = self.config_problems()
        if problems:
            raise StepError(f"step {self.id!r} is misconfigured: " + "; ".join(problems))
        name = resolve_sandbox_name(ctx, sandbox_or_container(self.sandbox_name, self.container_name))
        sandbox = await ctx.sandbox(name)
        exec_user = self._exec_user(sandbox, name)
        verifier_id = self.verifier_id or self.id
        outputs: dict[str, bytes] = {}
        row: dict[str, Any] = {"criterion_index": 0, "type": "unit_tests", "criterion": f"`{self.command}` passes",
                               "sandbox_name": name, "command": self.command, "skipped": False}
        try:
            score, why = await self._run(sandbox, exec_user, outputs, row)
            result_files, result_notes = await self._results(sandbox, outputs)
        except AgentenvError as exc:
            raise StepError(f"step {self.id!r}: cannot run the tests in sandbox {name!r}: {exc.message}",
                            hint=exc.hint) from exc
        if result_notes:
            why += "; " + "; ".join(result_notes)
        artifact_id = f"{ctx.run_id}__{self.id}-verifier-output"
        try:
            doc = artifact_types.put_artifact(
                ctx.store, artifact_id, outputs, artifact_type=artifact_types.BUNDLE,
                description=f"output of verifier {verifier_id} (run {ctx.run_id}, step {self.id})",
                extra={"verifier_output": {"run_id": ctx.run_id, "step_id": self.id, "verifier_id": verifier_id}})
        except AgentenvError as exc:
            raise StepError(f"step {self.id!r}: cannot store the test output {artifact_id!r}: {exc.message}") from exc
        add_run_artifact(ctx, doc, kind="verifier_output")
        row.update(result=score >= 1.0, score=score, justification=why,
                   output_artifact={"id": doc["id"], "version": doc["version"]},
                   output_files=sorted(outputs), result_files=result_files)
        # One row whose score is the reward: weighted_average makes the verification's score that number.
        final = ctx.record_verification(verifier_id, [row], "weighted_average")
        ctx.log(f"{verifier_id}: score {final:g} ({why})"[:600])

    # -- running ----------------------------------------------------------------------------
    def _exec_user(self, sandbox: "Sandbox", name: str) -> str | None:
        """The `user` to pass to exec(), if the sandbox's exec takes one; root/None run as the
        sandbox's own user otherwise, and any other user is refused."""
        try:
            takes_user = "user" in inspect.signature(sandbox.exec).parameters
        except (TypeError, ValueError):
            takes_user = False
        if takes_user:
            return self.user
        if self.user not in (None, "root"):
            raise StepError(f"step {self.id!r}: sandbox {name!r} ({sandbox.type or 'unknown'} provider) cannot run "
                            f"commands as user {self.user!r}", hint="leave user out (root) on this sandbox type")
        return None

    async def _exec(self, sandbox: "Sandbox", command: str, user: str | None) -> "ExecResult":
        kwargs: dict[str, Any] = {"timeout": self.timeout_sec, "env": dict(self.env_vars), "cwd": WORKDIR}
        if user is not None:
            kwargs["user"] = user
        return await sandbox.exec(command, **kwargs)

    async def _run(self, sandbox: "Sandbox", user: str | None, outputs: dict[str, bytes],
                   row: dict) -> tuple[float, str]:
        """(score, justification), with the outputs added to `outputs` and facts to `row`."""
        if self.reward_path:
            reward_file = normalized(WORKDIR, self.reward_path)
            # exists() first: it refuses a path the sandbox does not own before anything is removed.
            if await sandbox.exists(reward_file, "any"):
                await sandbox.exec(["rm", "-f", "--", reward_file], timeout=60, cwd=WORKDIR)
        for i, cmd in enumerate(self.setup_commands):
            result = await self._exec(sandbox, cmd, user)
            outputs[f"setup-{i + 1}.stdout.txt"] = result.stdout.encode()
            outputs[f"setup-{i + 1}.stderr.txt"] = result.stderr.encode()
            if not result.ok:
                row.update(failed_setup_command_index=i, reward_source="setup", exit_code=result.exit_code,
                           timed_out=result.timed_out)
                what = f"setup command {i + 1} of {len(self.setup_commands)} (`{cmd}`) failed"
                return 0.0, f"{what}: {_status(result, self.timeout_sec)}{_output(result)}"
        result = await self._exec(sandbox, self.command, user)
        outputs["stdout.txt"] = result.stdout.encode()
        outputs["stderr.txt"] = result.stderr.encode()
        row.update(exit_code=result.exit_code, timed_out=result.timed_out, duration_s=round(result.duration_s, 3))
        killed = getattr(result, "killed_reason", None)
        if killed:
            row["killed_reason"] = killed
        status = _status(result, self.timeout_sec)
        if result.timed_out:
            row["reward_source"] = "timeout"
            return 0.0, f"{status}; score 0{_output(result)}"
        if not self.reward_path:
            row["reward_source"] = "exit_code"
            score = 1.0 if result.exit_code == 0 else 0.0
            return score, f"{status}; score {score:g} by exit code{_output(result)}"
        row["reward_source"] = "reward_path"
        reward, why = await self._reward(sandbox)
        row["reward"] = reward
        return (reward or 0.0), f"{status}; {why}{_output(result)}"

    async def _reward(self, sandbox: "Sandbox") -> tuple[float | None, str]:
        assert self.reward_path is not None  # only called with one
        path = normalized(WORKDIR, self.reward_path)
        try:
            data = await read_capped(sandbox, path, 1024 * 1024, field="the reward file limit")
        except NotFoundError:
            return None, f"score 0: reward file {path} was not written"
        except ValueError as exc:
            return None, f"score 0: reward file {exc}"
        text = data.decode("utf-8", errors="replace").strip()
        reward, problem = parse_reward(text)
        if problem:
            return None, f"score 0: reward file {path} holds {tail(text, 80)!r}: {problem}"
        return reward, f"reward {reward:g} from {path}"

    async def _results(self, sandbox: "Sandbox", outputs: dict[str, bytes]) -> tuple[dict[str, dict], list[str]]:
        """Copy `result_paths` into outputs under results/; ({bundle name: entry}, notes)."""
        wanted: list[tuple[str, str]] = []
        notes: list[str] = []
        for raw in self.result_paths:
            path = normalized(WORKDIR, raw)
            if await sandbox.exists(path, "file"):
                wanted.append((path, bundle_name(WORKDIR, path)))
            elif await sandbox.exists(path, "dir"):
                wanted += [(posixpath.join(path, rel), bundle_name(WORKDIR, posixpath.join(path, rel)))
                           for rel in await sandbox.list_files(path)]
            else:
                notes.append(f"result path {raw} missing")
        sizes = await file_sizes(sandbox, [p for p, _ in wanted])
        entries: dict[str, dict] = {}
        for path, rel in wanted:
            name = f"results/{rel}"
            if name in entries:
                continue
            try:
                data = await read_capped(sandbox, path, MAX_RESULT_FILE_BYTES, sizes.get(path),
                                         field="the result file limit")
            except ValueError as exc:
                notes.append(f"result file {exc}; not kept")
                continue
            except NotFoundError:
                notes.append(f"result path {path} missing")
                continue
            outputs[name] = data
            entries[name] = file_entry(path, data)
        return entries, notes


def parse_reward(text: str) -> tuple[float | None, str | None]:
    """(reward, None) for a float in [0, 1] or JSON {"reward": x}; (None, why) otherwise."""
    if not text:
        return None, "the file is empty"
    value: Any
    try:
        value = float(text)
    except ValueError:
        try:
            data = json.loads(text)
        except ValueError:
            return None, 'not a number, nor JSON {"reward": x}'
        if not isinstance(data, dict) or "reward" not in data:
            return None, 'JSON without a "reward" key'
        value = data["reward"]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None, f'"reward" must be a number, not {json.dumps(value)[:40]}'
        value = float(value)
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        return None, f"reward {value:g} is outside [0, 1]"
    return value, None


def _status(result: "ExecResult", timeout: float) -> str:
    text = f"timed out after {timeout:g}s" if result.timed_out else f"exit {result.exit_code}"
    killed = getattr(result, "killed_reason", None)
    if not killed:
        return text
    return f"{text} ({killed})" if str(killed).lower().startswith("killed") else f"{text} (killed: {killed})"


def _output(result: "ExecResult") -> str:
    parts = []
    if (out := tail(result.stdout, OUTPUT_TAIL)):
        parts.append(f"stdout: {out}")
    if (err := tail(result.stderr, OUTPUT_TAIL)):
        parts.append(f"stderr: {err}")
    return ("; " + "; ".join(parts)) if parts else ""

