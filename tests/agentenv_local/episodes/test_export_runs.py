"""`agentenv export runs`: a known `support` run exported as JSONL (read back with the standard library) and as
Parquet (read back with DuckDB), every field checked; the filters, and the bad-input cases."""

from __future__ import annotations

import json
import time
from pathlib import Path

import duckdb
import pytest
from kits.hub import cli

ROOT = Path(__file__).resolve().parents[3]
SUPPORT = ROOT / "examples" / "support"
PROMPT = "Hi! Maria from Acme wrote about pricing. What did she ask for?"


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A project with one `support` run, then the same task run by an eval (labelled with the eval)."""
    root = tmp_path_factory.mktemp("export") / "proj"
    root.mkdir()
    cli(root, "run", str(SUPPORT), "--sandbox", "process", check=True, timeout=300)
    runs = json.loads(cli(root, "runs", "list", "--json", check=True).stdout)
    (root / "eval.json").write_text(json.dumps([{"task_id": runs[0]["task_id"]}]))
    cli(root, "eval", "create", "eval.json", "--id", "nightly", check=True)
    cli(root, "eval", "run", "--id", "nightly", "--sandbox", "process", check=True, timeout=300)
    return root


def runs_of(project: Path) -> list[dict]:
    return json.loads(cli(project, "runs", "list", "--json", check=True).stdout)


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def read_parquet(path: Path) -> list[dict]:
    con = duckdb.connect()
    try:
        result = con.execute("SELECT * FROM read_parquet(?) ORDER BY run_id", [str(path)])
        names = [d[0] for d in result.description]
        return [dict(zip(names, row, strict=True)) for row in result.fetchall()]
    finally:
        con.close()


def check_support_episode(row: dict, run: dict) -> None:
    """Every field of the known `support` episode (nested fields as parsed JSON)."""
    assert row["run_id"] == run["run_id"]
    assert row["task_id"] == run["task_id"] and row["task_id"].endswith("/support")
    assert row["task_version"] == 1 and row["task_name"] == "support"
    assert row["status"] == "passed" and row["score"] == 1.0 and row["error"] is None
    assert row["seed"] == {} and row["agent"] is None and row["model"] is None
    assert row["verifier_scores"] == {"grade": 1.0, "outcome": 1.0}
    assert [(c["verifier"], c["id"], c["passed"], c["score"]) for c in row["criteria"]] == [
        ("grade", "polite", True, 1.0), ("grade", "replied", True, 1.0), ("grade", "deal_updated", True, 1.0),
        ("outcome", "deal_won", True, 1.0), ("outcome", "one_reply", True, 1.0)]
    assert row["criteria"][0]["criterion"] == "The assistant ends the conversation politely."
    messages = row["messages"]
    assert messages[0] == {"role": "user", "content": PROMPT}
    calls = [m["tool_calls"][0] for m in messages if m.get("tool_calls")]
    assert [c["function"]["name"] for c in calls][:2] == ["office__search_emails", "office__read_email"]
    assert json.loads(calls[0]["function"]["arguments"]) == {"query": "acme pricing"}
    results = [m for m in messages if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in results] == [c["id"] for c in calls]  # each call answered, in order
    assert "Fleet Analytics Platform" in results[0]["content"]
    assert [m["content"] for m in messages if m["role"] == "user"] == [
        PROMPT, "Sam approved 8% on 3 years. Please reply to her and mark the deal won.", "Thanks!"]
    assert messages[-1] == {"role": "assistant", "content": "You're welcome!"}
    assert [c["agent_name"] for c in row["conversations"]] == ["solver"]
    assert row["conversations"][0]["messages"] == messages
    tool_events = [e for e in row["trajectory"] if e["type"] == "tool_call"]
    assert len(tool_events) == len(calls) == 4 and {e["step_id"] for e in row["trajectory"]} == {"chat"}
    assert row["usage"] == {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0, "model_calls": 0,
                            "tool_calls": 4}
    timings = row["timings"]
    assert timings["started_at"] == run["started_at"] and timings["finished_at"] == run["finished_at"]
    assert set(timings["steps"]) == {"deploy", "seed_mail", "seed_crm", "lock_down", "solver", "customer", "judge",
                                     "chat", "grade", "outcome"}


def test_jsonl_holds_every_field_of_a_known_run(project, tmp_path):
    first = runs_of(project)[-1]  # the plain `run`, not the eval's
    out = cli(project, "export", "runs", "--task", "support", "--format", "jsonl", "-o", str(tmp_path / "e.jsonl"),
              check=True)
    assert "Exported 2 episodes" in out.stdout
    rows = {r["run_id"]: r for r in read_jsonl(tmp_path / "e.jsonl")}
    check_support_episode(rows[first["run_id"]], first)
    assert rows[first["run_id"]]["eval_id"] is None


def test_parquet_is_written_by_duckdb_with_typed_columns(project, tmp_path):
    first = runs_of(project)[-1]
    target = tmp_path / "e.parquet"
    cli(project, "export", "runs", "-o", str(target), check=True)  # the suffix picks parquet
    con = duckdb.connect()
    types = dict(con.execute("SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM read_parquet(?))",
                             [str(target)]).fetchall())
    con.close()
    assert types["run_id"] == "VARCHAR" and types["task_version"] == "INTEGER" and types["score"] == "DOUBLE"
    assert types["messages"] == "JSON" and types["criteria"] == "JSON"
    rows = {r["run_id"]: r for r in read_parquet(target)}
    nested = {k: (json.loads(v) if isinstance(v, str) and k not in
                  ("run_id", "task_id", "task_name", "group_id", "eval_id", "status", "error", "agent", "model")
                  else v) for k, v in rows[first["run_id"]].items()}
    check_support_episode(nested, first)
    assert read_jsonl_equivalent(project, tmp_path, first["run_id"]) == nested


def read_jsonl_equivalent(project: Path, tmp_path: Path, run_id: str) -> dict:
    cli(project, "export", "runs", "-o", str(tmp_path / "same.jsonl"), check=True)
    return next(r for r in read_jsonl(tmp_path / "same.jsonl") if r["run_id"] == run_id)


def test_eval_runs_carry_their_eval_and_filter_by_it(project, tmp_path):
    cli(project, "export", "runs", "--eval", "nightly", "-o", str(tmp_path / "n.jsonl"), check=True)
    rows = read_jsonl(tmp_path / "n.jsonl")
    assert len(rows) == 1
    assert rows[0]["eval_id"] == "nightly" and rows[0]["eval_version"] == 1
    assert rows[0]["group_id"].startswith("eval-") and rows[0]["status"] == "passed"


@pytest.mark.parametrize("flags", [["--status", "failed"], ["--since", "2999-01-01"], ["--eval", "no-such-eval"],
                                   ["--task", "no-such-task"]])
def test_filters_that_match_nothing_write_an_empty_file(project, tmp_path, flags):
    for suffix in ("jsonl", "parquet"):
        target = tmp_path / f"none.{suffix}"
        out = cli(project, "export", "runs", *flags, "-o", str(target), check=True)
        assert "Exported 0 episodes" in out.stdout and "No finished run matched" in out.stderr
        assert (read_jsonl(target) if suffix == "jsonl" else read_parquet(target)) == []


def test_since_keeps_runs_created_from_then(project, tmp_path):
    now = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(time.time() + 3600))
    first = runs_of(project)[-1]
    earlier = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(first["created_at"] - 1))
    cli(project, "export", "runs", "--since", earlier, "-o", str(tmp_path / "a.jsonl"), check=True)
    cli(project, "export", "runs", "--since", now, "-o", str(tmp_path / "b.jsonl"), check=True)
    assert len(read_jsonl(tmp_path / "a.jsonl")) == 2 and read_jsonl(tmp_path / "b.jsonl") == []


def test_bad_input_fails_clearly_and_leaves_the_old_file(project, tmp_path):
    target = tmp_path / "keep.jsonl"
    target.write_text("old\n")
    bad = cli(project, "export", "runs", "--since", "last tuesday", "-o", str(target))
    assert bad.returncode != 0 and "is not a date" in bad.stderr and "2026-12-01" in bad.stderr
    assert target.read_text() == "old\n"
    missing = cli(project, "export", "runs", "-o", str(tmp_path / "no" / "such" / "e.jsonl"))
    assert missing.returncode != 0 and "does not exist" in missing.stderr
    folder = cli(project, "export", "runs", "-o", str(tmp_path))
    assert folder.returncode != 0
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary file left behind
