"""Score aggregators over verifier results: all_pass (default), any_pass, weighted_average."""

from __future__ import annotations

from typing import Literal

ScoreAggregator = Literal["all_pass", "any_pass", "weighted_average"]
AGGREGATORS = ("all_pass", "any_pass", "weighted_average")


def aggregate(results: list[dict], aggregator: str = "all_pass") -> float:
    """One score in [0, 1] from rows with `score` (0..1), `result` (bool), `weight`, `skipped`.

    Skipped rows don't count. weighted_average averages positive weights; a negative weight
    subtracts (1 - score) * |weight| so a failed "must not" criterion costs points.
    """
    rows = [r for r in results if not r.get("skipped")]
    if not rows:
        return 0.0
    if aggregator == "all_pass":
        return 1.0 if all(r.get("result") for r in rows) else 0.0
    if aggregator == "any_pass":
        return 1.0 if any(r.get("result") for r in rows) else 0.0
    if aggregator == "weighted_average":
        positive = [r for r in rows if float(r.get("weight", 1.0)) > 0]
        total = sum(float(r.get("weight", 1.0)) for r in positive)
        score = sum(float(r.get("weight", 1.0)) * _score(r) for r in positive) / total if total else 1.0
        for r in rows:
            w = float(r.get("weight", 1.0))
            if w < 0:
                score -= (1.0 - _score(r)) * abs(w)
        return max(0.0, min(1.0, score))
    raise ValueError(f"unknown score aggregator {aggregator!r}; use one of {', '.join(AGGREGATORS)}")


def _score(row: dict) -> float:
    if "score" in row and row["score"] is not None:
        return float(row["score"])
    return 1.0 if row.get("result") else 0.0
