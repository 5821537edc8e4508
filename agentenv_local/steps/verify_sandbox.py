"""`verify_sandbox`: filesystem and shell checks in a deployed sandbox, scored.

Criteria (relative paths join `base_dir`):
    {"type": "probe_file_exists",   "paths": [...]}
    {"type": "probe_dir_exists",    "paths": [...]}
    {"type": "probe_file_contains", "paths": [...], "expected": "<regex>"}
    {"type": "bash_cmd_succeeds",   "bash_cmd": "..."}
each with an optional "weight" and "description". A criterion of another type is recorded as
skipped (the reference's behaviour). A failing criterion is a score of 0 with a justification,
never an exception: the step itself fails only when it cannot run at all.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field

from agentenv_local.errors import AgentenvError, StepError
from agentenv_local.tasks.scoring import ScoreAggregator
from agentenv_local.tasks.step import Step

from . import (
    criteria_shape_problems,
    join_path,
    regex_problem,
    string_list,
    tail,
)

if TYPE_CHECKING:
    from agentenv_local.tasks.context import StepContext

REQUIRED_KEYS = {
    "probe_file_exists": ("paths",),
    "probe_dir_exists": ("paths",),
    "probe_file_contains": ("paths", "expected"),
    "bash_cmd_succeeds": ("bash_cmd",),
}


class VerifySandboxStep(Step):
    type: ClassVar[str] = "verify_sandbox"

    criteria: list[dict[str, Any]]
    sandbox_name: str | None = None  # None: the run's only deployed sandbox
    agent_name: str | None = None
    base_dir: str = "/app"
    shell_timeout_seconds: float = Field(default=120, gt=0)
    score_aggregator: ScoreAggregator = "all_pass"
    verifier_id: str | None = None  # None: the step id

    def config_problems(self) -> list[str]:
        problems = criteria_shape_problems(self.criteria)
        for i, c in enumerate(self.criteria):
            if not isinstance(c, dict) or not isinstance(c.get("type"), str) or c["type"] not in REQUIRED_KEYS:
                continue  # unknown types are skipped at run time
            where = f"criteria[{i}] ({c['type']})"
            for key in REQUIRED_KEYS[c["type"]]:
                if key not in c:
                    problems.append(f"{where}: missing \"{key}\"")
            if "paths" in c and string_list(c["paths"]) is None:
                problems.append(f"{where}.paths: must be a non-empty list of paths")
            if "expected" in c and (why := regex_problem(c["expected"])):
                problems.append(f"{where}.expected: {why}")
            if "bash_cmd" in c and (not isinstance(c["bash_cmd"], str) or not c["bash_cmd"].strip()):
                problems.append(f"{where}.bash_cmd: must be a non-empty command string")
        if self.sandbox_name and self.agent_name:
            problems.append("sandbox_name, agent_name: verify one target per step")
        return problems

    async def execute(self, ctx: "StepContext") -> None:
        problems = self.config_problems()
        if problems:
            raise StepError(f"step {self.id!r} is misconfigured: " + "; ".join(problems))
        from .collect_artifacts import target_sandbox

        # agent_name: the sandbox the agent runs in (the reference's agent workspace)
        name, sandbox = await target_sandbox(ctx, self.sandbox_name, self.agent_name)
        rows = []
        for index, criterion in enumerate(self.criteria):
            kind = criterion.get("type")
            row = {"criterion_index": index, **criterion}
            if kind not in REQUIRED_KEYS:
                ctx.log(f"criterion {index}: unknown type {kind!r}, skipped", level="warning")
                rows.append({**row, "result": False, "score": 0, "skipped": True,
                             "justification": f"unknown criterion type {kind!r}; skipped"})
                continue
            try:
                passed, why = await self._check(sandbox, criterion)
            except AgentenvError as exc:  # e.g. a path outside the sandbox: the criterion fails
                passed, why = False, exc.message
            rows.append({**row, "result": passed, "score": 1 if passed else 0, "justification": why,
                         "skipped": False})
        verifier_id = self.verifier_id or self.id
        score = ctx.record_verification(verifier_id, rows, self.score_aggregator)
        n_passed = sum(1 for r in rows if r["result"])
        ctx.log(f"{verifier_id}: score {score:g} ({n_passed}/{len(rows)} criteria passed)")

    def _paths(self, criterion: dict) -> list[str]:
        return string_list(criterion["paths"]) or []

    async def _check(self, sandbox, criterion: dict) -> tuple[bool, str]:
        kind = criterion["type"]
        if kind in ("probe_file_exists", "probe_dir_exists"):
            what = "file" if kind == "probe_file_exists" else "dir"
            missing = [p for p in self._paths(criterion)
                       if not await sandbox.exists(join_path(self.base_dir, p), what)]
            noun = "file" if what == "file" else "directory"
            if missing:
                return False, f"missing {noun}(s): {', '.join(missing)}"
            return True, f"{noun}(s) exist: {', '.join(self._paths(criterion))}"
        if kind == "probe_file_contains":
            pattern = re.compile(criterion["expected"])
            failures, found = [], []
            for p in self._paths(criterion):
                full = join_path(self.base_dir, p)
                if not await sandbox.exists(full, "file"):
                    failures.append(f"{p} is missing")
                    continue
                text = (await sandbox.read_file(full)).decode("utf-8", errors="replace")
                if pattern.search(text):
                    found.append(f"{p} contains /{pattern.pattern}/")
                else:
                    failures.append(f"{p} does not contain /{pattern.pattern}/")
            if failures:
                return False, "; ".join(failures)
            return True, "; ".join(found)
        # bash_cmd_succeeds
        result = await sandbox.exec(criterion["bash_cmd"], timeout=self.shell_timeout_seconds, cwd=self.base_dir)
        if result.timed_out:
            return False, f"timed out after {self.shell_timeout_seconds:g}s" + _output(result)
        if result.exit_code != 0:
            return False, f"exit {result.exit_code}" + _output(result)
        return True, "exit 0" + _output(result)


def _output(result) -> str:
    text = tail(result.stderr) or tail(result.stdout)
    return f": {text}" if text else ""
