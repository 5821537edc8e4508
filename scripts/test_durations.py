"""Turn a test timeline (AGENTENV_TEST_TIMELINE=FILE scripts/check.sh ...) into tests/durations.json, the seconds
each test took, which tests/conftest.py uses to hand the longest work to the workers first; and print how the
workers' time went (busy seconds per worker, the run's span, the idle tail), the profile docs/testing.md keeps.

    python scripts/test_durations.py TIMELINE [--write]
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

DURATIONS = Path(__file__).resolve().parent.parent / "tests" / "durations.json"


def _plain_id(test: str) -> str:
    """The test id without the "@GROUP" xdist appends to a grouped test's id (conftest.py sees them without)."""
    base, at, group = test.rpartition("@")
    return base if at and "[" not in group and "]" not in group else test


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    rows = [json.loads(line) for line in Path(argv[0]).read_text().splitlines() if line.strip()]
    if not rows:
        print(f"{argv[0]} holds no test reports", file=sys.stderr)
        return 1
    per_test: dict[str, float] = defaultdict(float)
    busy: dict[str, float] = defaultdict(float)
    last_stop: dict[str, float] = {}
    for row in rows:
        took = row["stop"] - row["start"]
        per_test[_plain_id(row["test"])] += took
        busy[row["worker"]] += took
        last_stop[row["worker"]] = max(last_stop.get(row["worker"], 0.0), row["stop"])
    began = min(row["start"] for row in rows)
    ended = max(last_stop.values())
    print(f"{len(per_test)} tests; the run's span {ended - began:.0f} s")
    for worker in sorted(busy):
        print(f"  {worker}: busy {busy[worker]:.0f} s, done {last_stop[worker] - began:.0f} s in "
              f"(idle at the end {ended - last_stop[worker]:.0f} s)")
    folders: dict[str, float] = defaultdict(float)
    for test, took in per_test.items():
        folders["/".join(test.split("::")[0].split("/")[:2])] += took
    print("by folder: " + ", ".join(f"{k} {v:.0f} s" for k, v in sorted(folders.items(), key=lambda kv: -kv[1])))
    if "--write" in argv:
        DURATIONS.write_text(json.dumps({t: round(s, 2) for t, s in sorted(per_test.items())}, indent=0) + "\n")
        print(f"wrote {DURATIONS}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
