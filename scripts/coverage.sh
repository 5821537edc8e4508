#!/usr/bin/env bash
# The suite's line coverage over agentenv_local, stores, sandboxes and tui (docs/testing.md, "Coverage"):
# every test, measured in each Python process the tests start (scripts/coverage.ini says which).
#
#   scripts/coverage.sh [pytest args]              this checkout
#   scripts/coverage.sh --rev REV [pytest args]    revision REV, in a worktree of its own with its own .venv
#                                                  (the same measurement, for a before/after comparison)
#
# Prints the report and, last, one line: `coverage: <percent>% of <statements> lines, <tests> tests`.
# Under coverage the suite takes about twice its usual CPU: it is not part of .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."
here=$PWD
tree=$here
if [ "${1:-}" = "--rev" ]; then
  [ -n "${2:-}" ] || { echo "usage: scripts/coverage.sh --rev REV [pytest args]" >&2; exit 2; }
  rev=$(git rev-parse --verify "$2^{commit}")
  shift 2
  tree="${AGENTENV_COVERAGE_TREES:-/tmp/agentenv-coverage-trees}/$rev/main"
  if [ ! -d "$tree" ]; then
    mkdir -p "$(dirname "$tree")"
    git worktree add --detach "$tree" "$rev" >/dev/null
  fi
  # The tests read the shared folder next to the checkout (../shared), as in a fresh clone.
  [ -e "$tree/../shared" ] || [ ! -e "$here/../shared" ] || ln -s "$(cd "$here/../shared" && pwd)" "$tree/../shared"
  (cd "$tree" && scripts/setup.sh --test)
fi
out="${AGENTENV_COVERAGE_OUT:-$tree/.coverage-data}"
rm -rf "$out"
mkdir -p "$out"
cd "$tree"
# coverage 7.10 or newer measures subprocesses and os._exit (a revision's venv may predate it)
.venv/bin/python -c 'import coverage, sys; sys.exit(coverage.version_info < (7, 10))' 2>/dev/null \
  || "$here/scripts/venv-install.sh" .venv "coverage>=7.10"
unset PYTHONDONTWRITEBYTECODE
export COVERAGE_RCFILE="$here/scripts/coverage.ini" AGENTENV_COVERAGE_DATA="$out"
status=0
.venv/bin/python -m coverage run -m pytest -p no:cacheprovider "$@" | tee "$out/pytest.log" || status=$?
.venv/bin/python -m coverage combine -q
.venv/bin/python -m coverage report | tee "$out/report.txt"
.venv/bin/python - "$out" <<'PY'
import json, re, subprocess, sys
from pathlib import Path

out = Path(sys.argv[1])
subprocess.run([".venv/bin/python", "-m", "coverage", "json", "-q", "-o", str(out / "coverage.json")], check=True)
totals = json.loads((out / "coverage.json").read_text())["totals"]
log = (out / "pytest.log").read_text()
counts = re.findall(r"(\d+) (passed|failed|error|errors|skipped)", log.splitlines()[-1] if log else "")
tests = sum(int(n) for n, _ in counts)
print(f"coverage: {totals['percent_covered']:.1f}% of {totals['num_statements']} lines, {tests} tests "
      f"({', '.join(f'{n} {what}' for n, what in counts)})")
PY
exit $status
