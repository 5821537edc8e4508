"""An episode with its envs in the hub equals one with them in subprocesses (issue 16 item 1).

The offline `support` bundle runs once as it is (its module envs load into the hub) and once from a copy whose
envs say `run_as = "subprocess"`, with the same seed; scores, verifications, step statuses, the conversation's
turns and trajectory and the env's tool calls must be the same, once timings, ports and ids are set aside.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from kits.hub import cli

from agentenv_local.tasks.journal import journal_state

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = ROOT / "examples" / "support"

VOLATILE_KEYS = {"run_id", "instance_id", "pid", "port", "url", "mcp_url", "gateway_url", "server_url", "rev",
                 "owner", "generation", "context_id", "task_id", "message_id", "id", "pool_slot", "from_pool",
                 "session"}
VOLATILE = [
    (re.compile(r"https?://127\.0\.0\.1:\d+"), "http://127.0.0.1:PORT"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "UUID"),
    (re.compile(r"\b(envi|envp|agent|run|sbx)-[0-9a-f]{6,}\b"), r"\1-ID"),
    (re.compile(r"\bsupport-\d{8}-[0-9a-f]+\b"), "RUN-ID"),
    (re.compile(r"\b[0-9a-f]{32}\b"), "HEX"),  # a2a task ids
    (re.compile(r"-[0-9a-f]{8}\b"), "-HEX"),  # a context id's random tail
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?"), "TIMESTAMP"),
]


def _timing(key: str) -> bool:
    return (key.endswith(("_at", "_at_utc", "_ms", "_s", "_seconds")) or key in {"timestamp", "ts", "time",
                                                                                 "elapsed", "latency"})


def normalized(value: Any, bundle_id: str = "") -> Any:
    """`value` without timings, ports and ids (the parts two equal episodes may differ in); `bundle_id`: the
    prefix of the ids of the bundle's records (its path: the copy's differs), and where the envs ran
    (`children`: the one difference the test makes)."""
    if isinstance(value, dict):
        return {k: normalized(v, bundle_id) for k, v in value.items()
                if not _timing(k) and k not in VOLATILE_KEYS and k != "children"}
    if isinstance(value, list):
        return [normalized(v, bundle_id) for v in value]
    if isinstance(value, str):
        if bundle_id:
            value = value.replace(bundle_id, "@local/BUNDLE")
        for pattern, stand_in in VOLATILE:
            value = pattern.sub(stand_in, value)
    return value


def _rows(db: Path, sql: str) -> list[dict]:
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        cursor = con.execute(sql)
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    finally:
        con.close()


def _episode(project: Path, bundle: Path) -> dict:
    project.mkdir()
    done = cli(project, "run", str(bundle), timeout=300)  # the bundle is deterministic: no seed placeholders
    assert done.returncode == 0, done.stdout + done.stderr
    assert "passed (grade: 1, outcome: 1)" in done.stdout, done.stdout
    [listed] = json.loads(cli(project, "runs", "list", "--json", check=True).stdout)
    run = json.loads(cli(project, "runs", "show", listed["run_id"], "--json", check=True).stdout)
    db = project / ".agentenv" / "store.duckdb"
    events = [{"kind": r["kind"], "step_id": r["step_id"], "body": json.loads(r["body"])}
              for r in _rows(db, "SELECT kind, step_id, body FROM events WHERE kind LIKE 'env.tool_call%' "
                                 "ORDER BY ts, event_id")]
    journal = [{"step_id": r["step_id"], "status": r["status"], "body": json.loads(r["body"])}
               for r in _rows(db, "SELECT step_id, status, body FROM step_journal ORDER BY seq")]
    return {"run": run, "events": events, "journal": journal}


def _subprocess_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "support-subprocess"
    shutil.copytree(BUNDLE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("mail", "crm"):
        toml = copy / "envs" / name / "env.toml"
        toml.write_text(toml.read_text() + 'run_as = "subprocess"\n')
    return copy


def test_an_episode_in_the_hub_equals_one_in_subprocesses(tmp_path):
    in_hub = _episode(tmp_path / "in-hub", BUNDLE)
    apart = _episode(tmp_path / "apart", _subprocess_copy(tmp_path))

    kinds = {e["name"]: e["kind"] for env in in_hub["run"]["context"]["deployed_envs"] for e in env["children"]}
    assert kinds == {"mail": "in_process", "crm": "in_process"}, kinds
    kinds = {e["name"]: e["kind"] for env in apart["run"]["context"]["deployed_envs"] for e in env["children"]}
    assert kinds == {"mail": "subprocess", "crm": "subprocess"}, kinds

    a, b = in_hub["run"], apart["run"]
    assert (a["status"], a["score"]) == (b["status"], b["score"]) == ("passed", a["score"])
    assert normalized(a["verifications"]) == normalized(b["verifications"])
    assert {k: (s["status"], s["type"], s["error"]) for k, s in a["steps"].items()} == \
        {k: (s["status"], s["type"], s["error"]) for k, s in b["steps"].items()}
    assert normalized(a["context"]["prompt_responses"]) == normalized(b["context"]["prompt_responses"])
    assert a["context"]["prompt_responses"][0]["trajectory"]  # the conversation did call tools

    # the env's own record of the calls (the gateway's trajectory events), in one order per step
    def env_calls(events: list[dict]) -> list:
        return sorted((json.dumps(normalized(e), sort_keys=True) for e in events))

    calls = env_calls(in_hub["events"])
    assert calls and calls == env_calls(apart["events"])

    # the journal: each step's records (parallel steps interleave freely, and the state each record saves is
    # the run's at that moment: which of two parallel steps finished first shows), and the state it ends with
    def unordered(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: unordered(v) for k, v in value.items()}
        if isinstance(value, list):
            return sorted((unordered(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
        return value

    def journal(episode: dict) -> tuple[list, Any]:
        bundle_id = episode["run"]["task_id"].rsplit("/", 1)[0]
        rows = episode["journal"]
        steps = sorted((r["step_id"], r["status"], json.dumps(r["body"].get("error"))) for r in rows)
        return steps, unordered(normalized(journal_state(rows), bundle_id))

    steps, final_state = journal(in_hub)
    assert steps and final_state
    assert (steps, final_state) == journal(apart)
