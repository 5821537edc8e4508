"""The reference's evidence and mistakes judge formats, for rubrics_verifier (our own wording and parsing).

- `rubric_evidence`: binary verdicts that cite their evidence: each criterion also gets `evidence` (what in
  the response or trajectory shows it) and `evidence_status` (one of EVIDENCE_STATUSES); a status in
  BAD_EVIDENCE means not met, whatever the judge said. The answer also has `reasoning`. Stored as
  `rubric_binary` rows, as the reference stores them.
- `rubric_evidence_with_mistakes`: the same, and the same call lists the run's mistakes (`findings`,
  `botched`, `botched_reason`, `summary`), written as a second verification `<verifier_id>-trajectory-mistakes`.
- `trajectory_mistakes`: no per-criterion verdicts: the judge lists mistakes and, per criterion, whether the
  run shows it (`coverage`). Rows: `summary` (weight 0: informational), `botched`, one `mistake_<n>` per finding
  (a negative weight: the severity's penalty, taken off the score), one `coverage_<id>` per criterion.
"""

from __future__ import annotations

from typing import Any

EVIDENCE_FORMATS = ("rubric_evidence", "rubric_evidence_with_mistakes")
EVIDENCE_STATUSES = ("visible", "missing", "contradicted", "blocked", "unavailable", "ambiguous", "not_applicable")
BAD_EVIDENCE = frozenset({"missing", "contradicted", "blocked", "unavailable"})
SEVERITY_PENALTY = {"low": 0.02, "medium": 0.08, "high": 0.25, "critical": 1.0}
MISTAKES_SUFFIX = "-trajectory-mistakes"

_FINDING = {"type": "object", "additionalProperties": False,
            "required": ["severity", "step", "should", "description"],
            "properties": {"severity": {"type": "string", "enum": list(SEVERITY_PENALTY)},
                           "step": {"type": ["integer", "null"]}, "should": {"type": "string"},
                           "description": {"type": "string"}}}
MISTAKE_FIELDS: dict[str, Any] = {"findings": {"type": "array", "items": _FINDING}, "botched": {"type": "boolean"},
                                  "botched_reason": {"type": "string"}, "summary": {"type": "string"}}
EVIDENCE_ITEM_FIELDS: dict[str, Any] = {"evidence": {"type": "string"},
                                        "evidence_status": {"type": "string", "enum": list(EVIDENCE_STATUSES)}}

EVIDENCE_EXAMPLE = ('{"reasoning": "<what the evidence shows>", "criteria": [{"id": "<criterion id>", "evidence": '
                    '"<the part of the response or trajectory you relied on, or NOT SHOWN>", "evidence_status": '
                    '"visible|missing|contradicted|blocked|unavailable|ambiguous|not_applicable", '
                    '"passed": true|false, "justification": "<one or two sentences>"}]')
MISTAKES_EXAMPLE = ('"findings": [{"severity": "low|medium|high|critical", "step": <trajectory event index or null>, '
                    '"should": "<what the agent should have done>", "description": "<what it did>"}], '
                    '"botched": true|false, "botched_reason": "<why, or empty>", "summary": "<one sentence>"')
COVERAGE_EXAMPLE = '"coverage": [{"id": "<criterion id>", "shown": true|false, "note": "<where the run shows it>"}]'


def instructions(fmt: str) -> list[str]:
    """What the judge is asked for, beyond the criteria list."""
    if fmt == "trajectory_mistakes":
        return ["Do not grade the criteria one by one. Review the agent's trajectory for mistakes: wrong or "
                "needless tool calls, ignored errors, claims the evidence does not support. For each criterion say "
                "whether the run shows it (coverage). Set botched when the run flailed or gave up.",
                "", "Answer with JSON exactly like: {" + MISTAKES_EXAMPLE + ", " + COVERAGE_EXAMPLE + "}"]
    lines = ["For each criterion decide passed (true) or not (false), and cite the evidence you relied on. A "
             "criterion whose evidence_status is " + ", ".join(sorted(BAD_EVIDENCE)) + " is not met."]
    example = EVIDENCE_EXAMPLE
    if fmt == "rubric_evidence_with_mistakes":
        lines.append("Also review the trajectory for mistakes (wrong or needless tool calls, ignored errors, "
                     "unsupported claims) and say whether the run was botched.")
        example += ", " + MISTAKES_EXAMPLE
    return [*lines, "", "Answer with JSON exactly like: " + example + "}"]


def schema(fmt: str, criterion_ids: list[str], verdict_item: dict[str, Any]) -> dict[str, Any]:
    """The JSON schema of the answer; `verdict_item` is the binary per-criterion item the evidence formats extend."""
    if fmt == "trajectory_mistakes":
        coverage = {"type": "object", "additionalProperties": False, "required": ["id", "shown", "note"],
                    "properties": {"id": {"type": "string", "enum": criterion_ids}, "shown": {"type": "boolean"},
                                   "note": {"type": "string"}}}
        properties: dict[str, Any] = {"findings": MISTAKE_FIELDS["findings"],
                                      "coverage": {"type": "array", "items": coverage},
                                      **{k: v for k, v in MISTAKE_FIELDS.items() if k != "findings"}}
    else:
        item = {**verdict_item, "properties": {**verdict_item["properties"], **EVIDENCE_ITEM_FIELDS},
                "required": [*verdict_item["required"], *EVIDENCE_ITEM_FIELDS]}
        properties = {"reasoning": {"type": "string"}, "criteria": {"type": "array", "items": item}}
        if fmt == "rubric_evidence_with_mistakes":
            properties.update(MISTAKE_FIELDS)
    return {"type": "object", "title": "rubric_verdict", "additionalProperties": False,
            "required": list(properties), "properties": properties}


def evidence_of(item: dict[str, Any], result: bool) -> tuple[bool, dict[str, Any]]:
    """(the result after the evidence rule, the row fields the evidence formats add)."""
    status = item.get("evidence_status")
    status = status if status in EVIDENCE_STATUSES else "ambiguous"  # the reference's reading of an unknown one
    fields = {"evidence_status": status, "evidence": str(item.get("evidence") or item.get("frame") or "")}
    return result and status not in BAD_EVIDENCE, fields


def mistakes_rows(answer: dict[str, Any], coverage: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rubric-shaped rows of a mistakes answer; `coverage` is [{id, shown, note}]."""
    findings = [f for f in answer.get("findings") or [] if isinstance(f, dict)]
    botched = bool(answer.get("botched"))
    clean = not findings and not botched
    rows: list[dict[str, Any]] = [
        {"id": "summary", "score": 1.0 if clean else 0.0, "result": clean, "weight": 0.0,
         "justification": str(answer.get("summary") or "")},
        {"id": "botched", "score": 0.0 if botched else 1.0, "result": not botched, "weight": 1.0,
         "justification": str(answer.get("botched_reason") or ("the run was botched" if botched else
                                                               "no flailing seen"))}]
    for i, finding in enumerate(findings):
        severity = str(finding.get("severity") or "medium").lower()
        penalty = SEVERITY_PENALTY.get(severity, SEVERITY_PENALTY["medium"])
        should, what = str(finding.get("should") or ""), str(finding.get("description") or "")
        rows.append({"id": f"mistake_{i}", "score": 0.0, "result": False, "weight": -penalty, "severity": severity,
                     "step": finding.get("step"), "justification": f"[{severity}] {should} — {what}".strip(" —")})
    for c in coverage:
        shown = bool(c.get("shown"))
        rows.append({"id": f"coverage_{c.get('id', '?')}", "score": 1.0 if shown else 0.0, "result": shown,
                     "weight": 1.0, "justification": ("shown: " if shown else "MISSING: ") + str(c.get("note") or "")})
    return [{"criterion_index": i, "criterion": r["id"], "skipped": False, **r} for i, r in enumerate(rows)]
