"""`rubrics_verifier`: an LLM judge grades an agent's response (and its trajectory) against rubric criteria.

    {"id": "grade", "type": "rubrics_verifier", "prompt_id": "p1",
     "criteria": [{"id": "answer", "criterion": "States that the total is 42", "weight": 2},
                  {"criterion": "Uses the calculator tool rather than guessing"}]}

The judge is either a direct model call (the default here: the `judge` role of `[model]`, see
docs/models.md; structured output asks per criterion for `{id, passed|score, justification}`) or, with
`use_agent_judge`, an A2A agent already deployed in the run (`judge_agent_name`) that receives the rubric,
the response and the trajectory as a data part and answers a verdict (the scripted agent's
`{"score", "passed", "criteria": [{name, passed}]}` works, as does `{"criteria": [{id, passed|score,
justification}]}`). An answer that cannot be read is asked for once more; if the second is no better, every
criterion without a verdict is recorded failed with the reason (no exception). A judge that cannot be reached
at all (model endpoint down, agent missing or timing out) fails the step.

`output_format` rubric_binary (passed or not) or rubric_partial (a score); the reference's evidence and
mistakes formats (rubric_evidence, rubric_evidence_with_mistakes, trajectory_mistakes) are in judge_formats.py.

Rows (`ctx.record_verification`): `criterion_index`, `id`, `criterion`, `weight`, `score`, `result`,
`justification`, `judge_output` (the judge's entry for that criterion); the judge's raw answers are kept in
the verification's `judge` metadata.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field

from agentenv_local.errors import AgentenvError, ConfigError, StepError
from agentenv_local.tasks.options import RunOptions
from agentenv_local.tasks.scoring import ScoreAggregator
from agentenv_local.tasks.step import Step

from . import judge_formats
from .trajectory_filter import TrajectoryFilter

if TYPE_CHECKING:
    from agentenv_local.tasks.context import StepContext

MAX_RAW_CHARS = 100_000
ANSWER_KEY = "\x00answer"  # where _parse keeps the whole answer (no criterion id has a NUL)
JUDGE_ATTEMPTS = 2

SYSTEM_PROMPT = """You are a careful, strict grader. You judge an AI agent's work against a rubric.
For every criterion decide, from the evidence given (the agent's final response and, when provided, its
trajectory of model and tool calls), whether the criterion is met. Do not give credit for claims the evidence
does not support. Answer only with JSON in the required format, one entry per criterion, using the criterion
ids exactly as given."""

BINARY_FORMAT = ('{"criteria": [{"id": "<criterion id>", "passed": true|false, '
                 '"justification": "<one or two sentences citing the evidence>"}]}')
PARTIAL_FORMAT = ('{"criteria": [{"id": "<criterion id>", "score": <number from 0 to 1>, '
                  '"justification": "<one or two sentences citing the evidence>"}]}')


class _Unusable(Exception):
    """The judge's answer could not be read (carries what could be read and why the rest could not)."""


class RubricsVerifierStep(Step):
    type: ClassVar[str] = "rubrics_verifier"
    agent_ref_fields: ClassVar[tuple[str, ...]] = ("judge_a2a_agent_id",)
    cloud_only_fields: ClassVar[dict[str, str]] = {
        "default_model_api_base": "the judge's endpoint is the `judge` role of [model] (docs/models.md)",
        "max_thinking_tokens": "a litellm reasoning budget; the local model providers take no such parameter",
        "effort": "a litellm reasoning effort; the local model providers take no such parameter",
        "judge_a2a_agent_id": "the reference deploys a judge agent from the catalog; locally deploy one with "
                              "deploy_agent and name it in judge_agent_name",
        "judge_sandbox_type": "where the reference deploys its judge agent; locally see judge_agent_name",
        "run_context_for_judge": "the reference's run-context parts come from its cloud run record",
        "judge_batch_size": "locally every criterion is judged in one call",
        "judge_batch_concurrency": "locally every criterion is judged in one call",
    }

    criteria: list[dict[str, Any]]
    prompt_id: str | None = None           # None: the run's latest response
    agent_name: str | None = None          # only responses of this agent
    output_format: Literal["rubric_binary", "rubric_partial", "trajectory_mistakes", "rubric_evidence",
                           "rubric_evidence_with_mistakes"] = "rubric_binary"
    score_aggregator: ScoreAggregator = "weighted_average"
    verifier_id: str | None = None         # None: the step id
    use_agent_judge: bool = False
    judge_agent_name: str | None = None
    default_model: str | None = None       # overrides the judge role's model name
    use_trajectory: bool = True
    trajectory_max_chars: int = Field(default=50_000, ge=0)
    grading_policy_prompt: str | None = None
    context_facts_for_judge: str | list[str] | dict[str, str] | None = None  # a dict: the reference's {name: fact}
    judge_timeout_seconds: float = Field(default=300, gt=0)
    pass_threshold: float = Field(default=0.5, ge=0, le=1)  # rubric_partial: a score at or above it passes
    trajectory_filter: TrajectoryFilter | None = None  # what of the trajectory the judge sees
    grade_up_to_turn: int | None = Field(default=None, ge=1)  # grade a conversation as of this (1-based) turn
    # The reference's, accepted (cloud_only_fields says why each has no local meaning).
    default_model_api_base: str | None = None
    max_thinking_tokens: int | None = None
    effort: str | None = None
    judge_a2a_agent_id: str | None = None
    judge_sandbox_type: str | None = None
    run_context_for_judge: list[str] | None = None
    judge_batch_size: int | None = Field(default=None, ge=1)
    judge_batch_concurrency: int | None = Field(default=None, ge=1)

    # -- checks ---------------------------------------------------------------------------------------

    def config_problems(self) -> list[str]:
        problems: list[str] = []
        if not self.criteria:
            problems.append("criteria: needs at least one criterion")
        seen: set[str] = set()
        for i, c in enumerate(self.criteria):
            where = f"criteria[{i}]"
            if not isinstance(c, dict):
                problems.append(f"{where}: must be an object with a \"criterion\", not {type(c).__name__}")
                continue
            if not isinstance(c.get("criterion"), str) or not c["criterion"].strip():
                problems.append(f"{where}.criterion: needs the text of the criterion")
            cid = c.get("id")
            if cid is not None and (not isinstance(cid, str) or not cid.strip()):
                problems.append(f"{where}.id: must be a non-empty string")
            elif cid is not None:
                if cid in seen:
                    problems.append(f"{where}.id: {cid!r} is used twice")
                seen.add(cid)
            weight = c.get("weight")
            if weight is not None and (isinstance(weight, bool) or not isinstance(weight, (int, float))):
                problems.append(f"{where}.weight: must be a number, not {weight!r}")
        if self.use_agent_judge and not self.judge_agent_name:
            problems.append("judge_agent_name: use_agent_judge needs the name of a deployed judge agent")
        return problems

    def preflight(self, config: Any, judge_model: str | None = None) -> list[str]:
        """Problems that need the configuration (no I/O): without an agent judge, the judge model must be set.
        `judge_model` is the run's --judge-model, which wins over `default_model`.

        Call it before the run deploys anything; `execute` calls it again first thing."""
        if self.use_agent_judge:
            return []
        from agentenv_local.models import resolve_endpoint

        try:
            resolve_endpoint(config, "judge", model=judge_model or self.default_model)
        except ConfigError as exc:
            why = (f"step {self.id!r} (rubrics_verifier) needs a judge model: {exc.message} "
                   "(or set use_agent_judge: true and judge_agent_name)")
            return [why]
        return []

    def config_preflight(self, config: Any, overrides: dict | None = None) -> list[str]:
        """The runner's check before a run starts (its messages name the step already)."""
        judge_model = RunOptions.from_stored(overrides).judge_model
        return [p.split(": ", 1)[1] if p.startswith(f"step {self.id!r}") else p
                for p in self.preflight(config, judge_model)]

    # -- running --------------------------------------------------------------------------------------

    async def execute(self, ctx: StepContext) -> None:
        problems = self.config_problems()
        if problems:
            raise StepError(f"step {self.id!r} is misconfigured: " + "; ".join(problems))
        problems = self.preflight(ctx.config, ctx.options.judge_model)
        if problems:
            raise StepError("; ".join(problems),
                            hint="e.g. [model] base_url = \"http://127.0.0.1:11434/v1\" and [model.roles] judge = "
                                 "\"qwen3:32b\"; see docs/models.md")
        note = self.trajectory_filter.screenshot_note() if self.trajectory_filter else None
        if note:
            ctx.log(f"step {self.id!r}: {note}", level="warning")
        response = self._response(ctx)
        criteria = self._criteria()
        evidence = self._evidence(self._as_of_turn(response))
        attempts: list[dict[str, Any]] = []
        verdicts: dict[str, dict[str, Any]] = {}
        problem: str | None = None
        judge_info: dict[str, Any] = {}
        for attempt in range(JUDGE_ATTEMPTS):
            if self.use_agent_judge:
                raw, judge_info = await self._ask_agent(ctx, criteria, evidence, problem)
            else:
                raw, judge_info = await self._ask_model(ctx, criteria, evidence, problem)
            verdicts, problem = self._parse(raw, criteria)
            attempts.append({"attempt": attempt + 1, "raw": _clip_raw(raw), "problem": problem})
            if problem is None:
                break
            ctx.log(f"judge answer {attempt + 1} unusable: {problem}", level="warning")
        answer = verdicts.pop(ANSWER_KEY, None)  # the whole answer, for the evidence and mistakes formats
        if self.output_format == "trajectory_mistakes":
            rows = self._mistakes_rows(answer, criteria, problem, len(attempts))
        else:
            rows = []
            for index, c in enumerate(criteria):
                v = verdicts.get(c["id"])
                row = {**c["source"], "criterion_index": index, "id": c["id"], "criterion": c["criterion"],
                       "weight": c["weight"], "skipped": False}
                if v is None:
                    row.update(score=0, result=False, judge_output=None,
                               justification=f"no usable verdict from the judge after {len(attempts)} attempt(s): "
                                             f"{problem}")
                else:
                    row.update(score=v["score"], result=v["result"], justification=v["justification"],
                               judge_output=v["raw"], **v.get("evidence", {}))
                rows.append(row)
        verifier_id = self.verifier_id or self.id
        score = ctx.record_verification(verifier_id, rows, self.score_aggregator)
        ctx.metadata["verifications"][verifier_id]["judge"] = {
            **judge_info, "output_format": self.output_format, "prompt_id": response.get("prompt_id"),
            "attempts": attempts, "usable": problem is None,
            **({"reasoning": str(answer.get("reasoning") or "")} if self.output_format in judge_formats.EVIDENCE_FORMATS
               and answer else {})}
        passed = sum(1 for r in rows if r["result"])
        ctx.log(f"{verifier_id}: score {score:g} ({passed}/{len(rows)} criteria passed)")
        if self.output_format == "rubric_evidence_with_mistakes":  # the same answer's mistakes, an entry of their own
            coverage = [{"id": r["id"], "shown": r["result"], "note": r["justification"]} for r in rows]
            mistakes = judge_formats.mistakes_rows(answer or {}, coverage)
            key = verifier_id + judge_formats.MISTAKES_SUFFIX
            mistakes_score = ctx.record_verification(key, mistakes, "weighted_average")
            ctx.metadata["verifications"][key]["source_verifier_id"] = verifier_id
            ctx.log(f"{key}: score {mistakes_score:g} ({len(mistakes) - 2 - len(coverage)} mistake(s))")

    def _mistakes_rows(self, answer: dict | None, criteria: list[dict[str, Any]], problem: str | None,
                       attempts: int) -> list[dict[str, Any]]:
        """trajectory_mistakes: the answer's rows; an unusable answer is one failed row saying why."""
        if answer is None:
            return [{"criterion_index": 0, "id": "parse_error", "criterion": "parse_error", "score": 0,
                     "result": False, "skipped": False,
                     "justification": f"no usable answer from the judge after {attempts} attempt(s): {problem}"}]
        coverage = [c for c in answer.get("coverage") or [] if isinstance(c, dict)]
        return judge_formats.mistakes_rows(answer, coverage)

    def _response(self, ctx: StepContext) -> dict[str, Any]:
        responses = [r for r in ctx.state.get("prompt_responses", []) if isinstance(r, dict)]
        matching = [r for r in responses
                    if (self.prompt_id is None or r.get("prompt_id") == self.prompt_id)
                    and (self.agent_name is None or r.get("agent_name") == self.agent_name)]
        if not matching:
            known = sorted({str(r.get("prompt_id")) for r in responses})
            what = f"prompt {self.prompt_id!r}" if self.prompt_id else "any prompt"
            raise StepError(
                f"step {self.id!r}: no response to {what}"
                + (f" from agent {self.agent_name!r}" if self.agent_name else "") + " in this run"
                + (f" (responses exist for: {', '.join(known)})" if known else " (no prompt has been answered yet)"),
                hint="check prompt_id, and list the prompt_agent step in depends_on")
        return matching[-1]

    def _criteria(self) -> list[dict[str, Any]]:
        out = []
        for i, c in enumerate(self.criteria):
            weight = c.get("weight")
            out.append({"id": c.get("id") or f"criterion_{i + 1}", "criterion": c["criterion"].strip(),
                        "weight": 1.0 if weight is None else float(weight), "source": dict(c)})
        return out

    def _evidence(self, response: dict[str, Any]) -> dict[str, Any]:
        text = response.get("response")
        evidence: dict[str, Any] = {"response": text if isinstance(text, str) else json.dumps(text, default=str)
                                    if text is not None else ""}
        for key in ("prompt_text", "structured_output", "error_message", "agent_name"):
            if response.get(key) not in (None, ""):
                evidence[key] = response[key]
        turns = response.get("turns")
        if isinstance(turns, list) and len(turns) > 1:
            evidence["conversation"] = turns
        if self.use_trajectory:
            events = response.get("trajectory")
            if isinstance(events, list) and self.trajectory_filter is not None:
                events = self.trajectory_filter.apply(events)
            if isinstance(events, list) and events:
                evidence["trajectory"], omitted = truncate_events(events, self.trajectory_max_chars)
                if omitted:
                    evidence["trajectory_events_omitted"] = omitted
        return evidence

    def _as_of_turn(self, response: dict[str, Any]) -> dict[str, Any]:
        """The response cut after turn `grade_up_to_turn` (as the reference's): that turn's reply, the turns so
        far, the trajectory up to the next turn's start; the response itself when there is nothing to cut."""
        turn = self.grade_up_to_turn
        turns = response.get("turns")
        if turn is None or not isinstance(turns, list) or turn >= len(turns):
            return response
        if not self.use_trajectory:
            raise StepError(f"step {self.id!r}: grade_up_to_turn={turn} needs use_trajectory: true (turn "
                            f"{turn}'s work is only in the trajectory)", hint="drop use_trajectory: false")
        cut = {**response, "turns": turns[:turn], "response": turns[turn - 1].get("response"),
               "structured_output": None, "error_message": None}
        events = response.get("trajectory")
        if isinstance(events, list):
            starts = [i for i, e in enumerate(events) if isinstance(e, dict) and e.get("type") == "turn"]
            cut["trajectory"] = events[:starts[turn]] if len(starts) > turn else events
        return cut

    def _facts(self) -> list[str]:
        facts = self.context_facts_for_judge
        if facts is None:
            return []
        if isinstance(facts, dict):
            return [f"{name}: {fact}" for name, fact in facts.items()]
        return [facts] if isinstance(facts, str) else [str(f) for f in facts]

    def _instructions(self, criteria: list[dict[str, Any]], problem: str | None) -> str:
        rubric = "\n".join(f"- id {c['id']!r}: {c['criterion']}" for c in criteria)
        lines = ["Grade the agent's work against these criteria:", rubric, ""]
        if self.output_format not in ("rubric_binary", "rubric_partial"):
            lines += judge_formats.instructions(self.output_format)
        elif self.output_format == "rubric_partial":
            lines.append("For each criterion give a score from 0 (not met at all) to 1 (fully met).")
        else:
            lines.append("For each criterion decide passed (true) or not (false).")
        if self._facts():
            lines += ["", "Facts to rely on when grading:", *[f"- {f}" for f in self._facts()]]
        if self.output_format in ("rubric_binary", "rubric_partial"):
            lines += ["", "Answer with JSON exactly like: " + (PARTIAL_FORMAT if self.output_format == "rubric_partial"
                                                              else BINARY_FORMAT)]
        if problem:
            lines += ["", f"Your previous answer could not be used ({problem}). Follow the format exactly."]
        return "\n".join(lines)

    def _schema(self, criteria: list[dict[str, Any]]) -> dict[str, Any]:
        verdict: dict[str, Any] = ({"score": {"type": "number", "minimum": 0, "maximum": 1}}
                                   if self.output_format == "rubric_partial" else {"passed": {"type": "boolean"}})
        item = {"type": "object", "additionalProperties": False,
                "required": ["id", *verdict, "justification"],
                "properties": {"id": {"type": "string", "enum": [c["id"] for c in criteria]}, **verdict,
                               "justification": {"type": "string"}}}
        if self.output_format not in ("rubric_binary", "rubric_partial"):
            return judge_formats.schema(self.output_format, [c["id"] for c in criteria], item)
        return {"type": "object", "title": "rubric_verdict", "additionalProperties": False, "required": ["criteria"],
                "properties": {"criteria": {"type": "array", "items": item}}}

    async def _ask_model(self, ctx: StepContext, criteria: list[dict[str, Any]], evidence: dict[str, Any],
                         problem: str | None) -> tuple[Any, dict[str, Any]]:
        from agentenv_local.models import Message, ModelError, resolve_model

        try:
            provider, model = resolve_model(ctx.config, "judge", model=ctx.options.judge_model or self.default_model)
        except (ConfigError, ModelError) as exc:
            raise StepError(f"step {self.id!r}: cannot build the judge model: {exc.message}", hint=exc.hint) from None
        system = SYSTEM_PROMPT + (f"\n\nGrading policy:\n{self.grading_policy_prompt}"
                                  if self.grading_policy_prompt else "")
        user = (self._instructions(criteria, problem) + "\n\nThe evidence (JSON):\n"
                + json.dumps(evidence, ensure_ascii=False, indent=1, default=str))
        try:
            async with asyncio.timeout(self.judge_timeout_seconds):
                reply = await provider.complete([Message.system(system), Message.user(user)], model=model,
                                                response_format=self._schema(criteria),
                                                timeout=self.judge_timeout_seconds)
        except TimeoutError:
            raise StepError(f"step {self.id!r}: the judge model did not answer within "
                            f"{self.judge_timeout_seconds:g} s", hint="raise judge_timeout_seconds") from None
        except ModelError as exc:
            raise StepError(f"step {self.id!r}: the judge model call failed: {exc.message}", hint=exc.hint) from None
        info = {"mode": "model", "model": reply.model, "api": provider.api,
                "usage": {"input_tokens": reply.usage.input_tokens, "output_tokens": reply.usage.output_tokens}}
        return reply.text, info

    async def _ask_agent(self, ctx: StepContext, criteria: list[dict[str, Any]], evidence: dict[str, Any],
                         problem: str | None) -> tuple[Any, dict[str, Any]]:
        from agentenv_local.agents.client import A2AClient

        record = None
        for r in reversed(ctx.state.get("deployed_agents", [])):
            if isinstance(r, dict) and r.get("agent_name") == self.judge_agent_name:
                record = r
                break
        if record is None or not record.get("a2a_url"):
            known = [str(r.get("agent_name")) for r in ctx.state.get("deployed_agents", []) if isinstance(r, dict)]
            raise StepError(f"step {self.id!r}: judge agent {self.judge_agent_name!r} is not deployed in this run"
                            + (f" (deployed: {', '.join(known)})" if known else ""),
                            hint="add a deploy_agent step for the judge and list it in depends_on")
        url = str(record["a2a_url"])
        base = re.sub(r"/a2a/?$", "", url.rstrip("/"))
        data = {**evidence, "rubric": [{"id": c["id"], "criterion": c["criterion"], "weight": c["weight"]}
                                       for c in criteria],
                "output_format": self.output_format,
                "verdict_format": PARTIAL_FORMAT if self.output_format == "rubric_partial" else BINARY_FORMAT}
        if self.grading_policy_prompt:
            data["grading_policy"] = self.grading_policy_prompt
        if self._facts():
            data["context_facts"] = self._facts()
        text = self._instructions(criteria, problem) + "\n\nThe evidence is in the data part of this message."
        context_id = f"rubrics-{ctx.run_id}-{self.id}-{uuid.uuid4().hex[:8]}"
        try:
            async with A2AClient(base) as client:
                task = await client.prompt([text, data], context_id=context_id, timeout=self.judge_timeout_seconds)
                if task.timed_out:
                    try:
                        await client.cancel(task.id)
                    except AgentenvError:
                        pass
        except AgentenvError as exc:
            raise StepError(f"step {self.id!r}: could not prompt judge agent {self.judge_agent_name!r} at {base}: "
                            f"{exc.message}") from None
        info = {"mode": "agent", "agent_name": self.judge_agent_name, "a2a_url": url,
                "a2a_context_id": context_id, "a2a_task_id": task.id}
        if task.timed_out:
            raise StepError(f"step {self.id!r}: judge agent {self.judge_agent_name!r} did not answer within "
                            f"{self.judge_timeout_seconds:g} s", hint="raise judge_timeout_seconds")
        if task.state != "completed":
            error = task.error or {}
            message = error.get("error_message") or task.text or task.state
            if error.get("error_type") == "infra_error":
                raise StepError(f"step {self.id!r}: judge agent {self.judge_agent_name!r} failed: {message}")
            return {"__judge_failed__": f"the judge agent ended {task.state}: {message}"}, info
        structured = task.structured_output
        return (structured if structured is not None else task.text), info

    # -- reading the verdict --------------------------------------------------------------------------

    def _parse(self, raw: Any, criteria: list[dict[str, Any]]) -> tuple[dict[str, dict[str, Any]], str | None]:
        """({criterion id: verdict}, None) or (what could be read, why the rest could not)."""
        if isinstance(raw, dict) and "__judge_failed__" in raw:
            return {}, raw["__judge_failed__"]
        value = raw
        if isinstance(raw, str):
            text = raw.strip()
            fence = re.search(r"```(?:json)?\s*(.*?)\s*```", text, re.DOTALL)
            if fence:
                text = fence.group(1)
            try:
                value = json.loads(text)
            except ValueError:
                start, end = text.find("{"), text.rfind("}")
                try:
                    value = json.loads(text[start:end + 1]) if 0 <= start < end else None
                except ValueError:
                    value = None
                if value is None:
                    return {}, "the answer is not JSON"
        if self.output_format == "trajectory_mistakes":
            if isinstance(value, dict) and isinstance(value.get("findings"), list):
                return {ANSWER_KEY: value}, None
            return {}, "the answer has no \"findings\" list"
        items = None
        if isinstance(value, dict):
            for key in ("criteria", "results", "verdicts", "rubric"):
                if isinstance(value.get(key), list):
                    items = value[key]
                    break
            if items is None and len(criteria) == 1 and ("passed" in value or "score" in value):
                items = [{**value, "id": criteria[0]["id"]}]
        elif isinstance(value, list):
            items = value
        if items is None:
            return {}, "the answer has no \"criteria\" list"
        by_id = {c["id"]: c for c in criteria}
        by_text = {c["criterion"].casefold(): c for c in criteria}
        verdicts: dict[str, dict[str, Any]] = {}
        loose: list[tuple[int, dict]] = []
        for pos, item in enumerate(items):
            if not isinstance(item, dict):
                continue
            target = None
            for key in ("id", "name", "criterion_id"):
                if isinstance(item.get(key), str) and item[key] in by_id:
                    target = by_id[item[key]]
                    break
            if target is None:
                for key in ("criterion", "name"):
                    if isinstance(item.get(key), str) and item[key].strip().casefold() in by_text:
                        target = by_text[item[key].strip().casefold()]
                        break
            if target is None:
                loose.append((pos, item))
                continue
            verdict = self._verdict(item)
            if verdict is not None and target["id"] not in verdicts:
                verdicts[target["id"]] = verdict
        if loose and len(items) == len(criteria):  # unnamed (or renamed) entries: by position
            for pos, item in loose:
                verdict = self._verdict(item)
                if verdict is not None and criteria[pos]["id"] not in verdicts:
                    verdicts[criteria[pos]["id"]] = verdict
        if isinstance(value, dict) and self.output_format in judge_formats.EVIDENCE_FORMATS:
            verdicts[ANSWER_KEY] = value  # its reasoning and mistakes
        missing = [c["id"] for c in criteria if c["id"] not in verdicts]
        if missing:
            return verdicts, "no usable verdict for " + ", ".join(repr(m) for m in missing)
        return verdicts, None

    def _verdict(self, item: dict[str, Any]) -> dict[str, Any] | None:
        score = item.get("score")
        passed = item.get("passed", item.get("result"))
        in_range = isinstance(score, (int, float)) and not isinstance(score, bool) and 0 <= score <= 1
        numeric = score if in_range else None
        if self.output_format == "rubric_partial":
            if numeric is not None:
                value = float(numeric)
            elif isinstance(passed, bool):
                value = 1.0 if passed else 0.0
            else:
                return None
            result = value >= self.pass_threshold
        else:
            if isinstance(passed, bool):
                result = passed
            elif numeric is not None:
                result = float(numeric) >= self.pass_threshold
            else:
                return None
            evidence: dict[str, Any] = {}
            if self.output_format in judge_formats.EVIDENCE_FORMATS:  # bad evidence: not met, whatever it said
                result, evidence = judge_formats.evidence_of(item, result)
            value = 1.0 if result else 0.0
        why = item.get("justification") or item.get("reason") or item.get("explanation") or ""
        return {"score": value, "result": result, "justification": str(why), "raw": item,
                **({"evidence": evidence} if self.output_format in judge_formats.EVIDENCE_FORMATS else {})}


def truncate_events(events: list[Any], max_chars: int) -> tuple[list[Any], int]:
    """The events, or the first and last ones that fit in about `max_chars` of JSON; (events, how many cut)."""
    sizes = [len(json.dumps(e, ensure_ascii=False, default=str)) + 1 for e in events]
    if sum(sizes) <= max_chars:
        return list(events), 0
    head: list[Any] = []
    used = 0
    for e, n in zip(events, sizes, strict=True):
        if used + n > max_chars // 2:
            break
        head.append(e)
        used += n
    tail: list[Any] = []
    used = 0
    for e, n in zip(reversed(events[len(head):]), reversed(sizes[len(head):]), strict=True):
        if used + n > max_chars - max_chars // 2:
            break
        tail.append(e)
        used += n
    tail.reverse()
    omitted = len(events) - len(head) - len(tail)
    marker = {"type": "truncated", "events_omitted": omitted}
    return [*head, marker, *tail], omitted


def _clip_raw(raw: Any) -> Any:
    if isinstance(raw, str) and len(raw) > MAX_RAW_CHARS:
        return raw[:MAX_RAW_CHARS] + f"... [{len(raw) - MAX_RAW_CHARS} more characters]"
    return raw
