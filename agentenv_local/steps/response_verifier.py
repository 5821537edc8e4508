"""`agent_prompt_response_verifier`: deterministic checks on an agent's reply text.

Criteria:
    {"type": "response_contains", "needles": ["..."], "case_sensitive": false}   every needle present
    {"type": "response_regex_present", "pattern": "...", "flags": "ims"}          the regex matches
each with an optional "weight" and "description". An unknown type is a configuration error
(the reference raises too). The reply is the latest `prompt_responses` entry with `prompt_id`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field

from agentenv_local.errors import StepError
from agentenv_local.tasks.scoring import ScoreAggregator
from agentenv_local.tasks.step import Step

from . import criteria_shape_problems, regex_problem, string_list

if TYPE_CHECKING:
    from agentenv_local.tasks.context import StepContext

CRITERION_TYPES = ("response_contains", "response_regex_present")
FLAG_BITS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL}


def regex_flags(letters: Any) -> int:
    flags = 0
    for letter in letters or "":
        flags |= FLAG_BITS[letter]
    return flags


class AgentPromptResponseVerifierStep(Step):
    type: ClassVar[str] = "agent_prompt_response_verifier"

    prompt_id: str = Field(min_length=1)
    criteria: list[dict[str, Any]]
    score_aggregator: ScoreAggregator = "all_pass"
    verifier_id: str | None = None  # None: the step id

    def config_problems(self) -> list[str]:
        problems = criteria_shape_problems(self.criteria)
        for i, c in enumerate(self.criteria):
            if not isinstance(c, dict) or not c.get("type"):
                continue
            where = f"criteria[{i}] ({c['type']})"
            if c["type"] == "response_contains":
                if string_list(c.get("needles")) is None:
                    problems.append(f"{where}.needles: needs a non-empty list of strings")
                if not isinstance(c.get("case_sensitive", False), bool):
                    problems.append(f"{where}.case_sensitive: must be true or false")
            elif c["type"] == "response_regex_present":
                flags = c.get("flags") or ""
                if not isinstance(flags, str) or any(f not in FLAG_BITS for f in flags):
                    problems.append(f"{where}.flags: {flags!r} must be letters from \"ims\"")
                    flags = ""
                if "pattern" not in c:
                    problems.append(f"{where}: missing \"pattern\"")
                elif why := regex_problem(c["pattern"], regex_flags(flags)):
                    problems.append(f"{where}.pattern: {why}")
            else:
                problems.append(f"criteria[{i}].type: unknown criterion type {c['type']!r}; "
                                f"use one of {', '.join(CRITERION_TYPES)}")
        return problems

    async def execute(self, ctx: "StepContext") -> None:
        problems = self.config_problems()
        if problems:
            raise StepError(f"step {self.id!r} is misconfigured: " + "; ".join(problems))
        responses = [r for r in ctx.state.get("prompt_responses", []) if isinstance(r, dict)]
        matching = [r for r in responses if r.get("prompt_id") == self.prompt_id]
        if not matching:
            known = sorted({str(r.get("prompt_id")) for r in responses})
            raise StepError(
                f"step {self.id!r}: no response to prompt {self.prompt_id!r} in this run"
                + (f" (responses exist for: {', '.join(known)})" if known else " (no prompt has been answered yet)"),
                hint="check prompt_id, and list the prompt_agent step in depends_on",
            )
        text = matching[-1].get("response") or ""
        if not isinstance(text, str):
            text = str(text)
        rows = []
        for index, criterion in enumerate(self.criteria):
            passed, why = self._check(criterion, text)
            rows.append({"criterion_index": index, **criterion, "result": passed, "score": 1 if passed else 0,
                         "justification": why, "skipped": False})
        verifier_id = self.verifier_id or self.id
        score = ctx.record_verification(verifier_id, rows, self.score_aggregator)
        ctx.log(f"{verifier_id}: score {score:g} ({sum(r['result'] for r in rows)}/{len(rows)} criteria passed)")

    @staticmethod
    def _check(criterion: dict, text: str) -> tuple[bool, str]:
        if criterion["type"] == "response_contains":
            needles = string_list(criterion["needles"]) or []
            sensitive = bool(criterion.get("case_sensitive", False))
            haystack = text if sensitive else text.casefold()
            missing = [n for n in needles if (n if sensitive else n.casefold()) not in haystack]
            if missing:
                return False, "the response lacks " + ", ".join(repr(n) for n in missing)
            return True, "the response contains " + ", ".join(repr(n) for n in needles)
        pattern = re.compile(criterion["pattern"], regex_flags(criterion.get("flags")))
        match = pattern.search(text)
        shown = f"/{pattern.pattern}/{criterion.get('flags') or ''}"
        if match is None:
            return False, f"no match for {shown} in the response"
        snippet = match.group(0)
        snippet = snippet if len(snippet) <= 120 else snippet[:117] + "..."
        return True, f"{shown} matches {snippet!r}"
