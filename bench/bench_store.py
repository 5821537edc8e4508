"""Store benchmark: event ingest through the appender vs one INSERT per event, and run history.

    .venv/bin/python bench/bench_store.py [--events 200000] [--inserts 20000] [--runs 100000]

Everything is measured in one run on a fresh temporary DuckDB file, side by side, and printed
with its target. Nothing here is asserted by the tests (DESIGN.md section 9).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(ROOT))

import duckdb  # noqa: E402

from stores.database import DuckDBStore  # noqa: E402
from stores.query import Query  # noqa: E402

EVENT_RATE_TARGET = 100_000  # events/s through EventLog.append + flush
QUERY_TARGET_MS = 50.0  # median run-history query over 100k runs
STATUSES = ("passed", "failed", "error", "cancelled", "interrupted", "running")


def _event_body(i: int) -> dict:
    return {"tool": "search_invoices", "args": {"vendor": "acme", "page": i % 7}, "ok": True, "n": i}


def bench_event_log(store: DuckDBStore, n: int) -> float:
    """Events/s for n appends plus the flush that makes them all durable in the table."""
    log = store.events
    start = time.perf_counter()
    for i in range(n):
        log.append("tool.call", _event_body(i), run_id=f"run-{i % 10}", step_id="prompt", virtual_at=float(i))
    log.flush()
    took = time.perf_counter() - start
    reader = duckdb.connect(str(store.db_path))  # in one process this shares the store's database instance
    try:
        count = reader.execute("SELECT count(*) FROM events").fetchall()[0][0]
    finally:
        reader.close()
    assert count >= n, f"only {count} of {n} events reached the table"
    return n / took


def bench_single_inserts(db_path: Path, n: int) -> float:
    """Events/s for the naive way: one INSERT (one autocommit transaction) per event, same table shape."""
    con = duckdb.connect(str(db_path))
    try:
        con.execute("CREATE TABLE events_single AS SELECT * FROM events LIMIT 0")
        dumps = json.dumps
        start = time.perf_counter()
        for i in range(n):
            con.execute("INSERT INTO events_single VALUES (?, ?, ?, ?, ?, ?, ?)",
                        [i + 1, f"run-{i % 10}", "tool.call", "prompt", time.time(), float(i), dumps(_event_body(i))])
        took = time.perf_counter() - start
    finally:
        con.close()
    return n / took


def seed_runs(db_path: Path, n: int, tasks: int = 200) -> tuple[list[str], float]:
    """Record n finished runs over `tasks` task ids through the appender; returns task ids and seconds."""
    rng = random.Random(7)
    task_ids = [f"bundle/task-{t:03d}" for t in range(tasks)]
    base = time.time() - n
    rows = []
    for i in range(n):
        task_id = task_ids[i % tasks]
        status = STATUSES[rng.randrange(len(STATUSES))]
        started = base + i
        rows.append((f"{task_id.split('/')[-1]}-{i:07d}-{rng.getrandbits(32):08x}", task_id, 1 + i % 3, None, status,
                     started - 0.5, started, started + rng.random() * 30, rng.random(), None, 3,
                     json.dumps({"task_name": task_id.split("/")[-1], "steps": {"prompt": status},
                                 "metadata": {"seed": {"n": i}}})))
    con = duckdb.connect(str(db_path))
    try:
        start = time.perf_counter()
        appender = con.appender("runs")
        appender.append_rows(rows)
        appender.flush()
        took = time.perf_counter() - start
    finally:
        con.close()
    return task_ids, took


def median_ms(fn, repeat: int = 20) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000, help="events appended through the EventLog")
    parser.add_argument("--inserts", type=int, default=20_000, help="events written with one INSERT each")
    parser.add_argument("--runs", type=int, default=100_000, help="recorded runs for the history query")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="agentenv-bench-") as tmp:
        db_path = Path(tmp) / "store.duckdb"
        store = DuckDBStore(db_path, Path(tmp) / "objects")
        try:
            print(f"duckdb {duckdb.__version__}, python {sys.version.split()[0]}, fresh store at {db_path}")
            print(f"- appending {args.events:,} events through EventLog.append + flush ...", flush=True)
            appender_rate = bench_event_log(store, args.events)
            print(f"- writing {args.inserts:,} events with one INSERT each ...", flush=True)
            insert_rate = bench_single_inserts(db_path, args.inserts)
            print(f"- recording {args.runs:,} runs through the appender ...", flush=True)
            task_ids, seed_s = seed_runs(db_path, args.runs)
            probe = task_ids[len(task_ids) // 2]
            by_task = lambda: store.runs.list(Query("runs").where("task_id", "eq", probe).limit(50))  # noqa: E731
            by_status = lambda: store.runs.list(Query("runs").where("status", "eq", "failed").limit(50))  # noqa: E731
            newest = lambda: store.runs.list(Query("runs").limit(50))  # noqa: E731
            assert len(by_task()) == 50 and len(by_status()) == 50 and len(newest()) == 50
            task_ms, status_ms, newest_ms = median_ms(by_task), median_ms(by_status), median_ms(newest)
        finally:
            store.close()

    rows = [
        ("event ingest, EventLog.append + flush", f">= {EVENT_RATE_TARGET:,} ev/s", f"{appender_rate:,.0f} ev/s",
         appender_rate >= EVENT_RATE_TARGET),
        ("event ingest, one INSERT per event", "(comparison)", f"{insert_rate:,.0f} ev/s", None),
        (f"runs.list task_id=X limit 50 ({args.runs:,} runs)", f"< {QUERY_TARGET_MS:g} ms", f"{task_ms:.2f} ms",
         task_ms < QUERY_TARGET_MS),
        (f"runs.list status=failed limit 50 ({args.runs:,} runs)", f"< {QUERY_TARGET_MS:g} ms", f"{status_ms:.2f} ms",
         status_ms < QUERY_TARGET_MS),
        (f"runs.list newest 50 ({args.runs:,} runs)", f"< {QUERY_TARGET_MS:g} ms", f"{newest_ms:.2f} ms",
         newest_ms < QUERY_TARGET_MS),
    ]
    headers = ("MEASURE", "TARGET", "MEASURED", "RESULT")
    table = [headers] + [(m, t, v, "-" if ok is None else "PASS" if ok else "MISS") for m, t, v, ok in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(headers))]
    print()
    for r in table:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    print()
    print(f"appender / single INSERT: {appender_rate / insert_rate:,.1f}x faster")
    print(f"seeding {args.runs:,} runs through the appender took {seed_s:.2f} s "
          f"({args.runs / seed_s:,.0f} rows/s); query times are the median of 20")
    return 0 if all(ok is not False for *_, ok in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
