#!/usr/bin/env bash
# Every check CI runs (.ci/run), from a clean clone: set up .venv with the test extra, then lint (ruff),
# type-check (mypy: the code, bench/ and tests/kits/ as configured in pyproject.toml, then all of tests/) and
# run the tests. Arguments go to pytest, e.g. `scripts/check.sh tests/stores -x`.
#
# `scripts/check.sh --quick [pytest args]`: the inner loop (docs/testing.md). The same lint and type checks, and
# the tests that need no Podman, coding CLI or Ray (markers podman, agent_cli, ray; set in tests/conftest.py) and
# took at most a few seconds in the last measured run (pytest's --quick, tests/durations.json). CI always runs
# everything.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
if [ "${1:-}" = "--quick" ]; then
  quick=1
  shift
fi
# Each part's time on stderr, for the profile in docs/testing.md.
started=$SECONDS
took() { echo "check.sh: $1 took $((SECONDS - started)) s" >&2; started=$SECONDS; }
scripts/setup.sh --test  # seconds when everything is installed already
took "setup"
# A machine may set PYTHONDONTWRITEBYTECODE (these do): then each of the thousands of Python processes the tests
# start (every `agentenv` command, hub, env and agent server) compiles the modules it imports from source again,
# a fifth of a short command's CPU. setup.sh compiles the packages; this lets the rest be cached as imported.
unset PYTHONDONTWRITEBYTECODE
.venv/bin/python -m ruff check .
took "ruff"
# Both mypy passes run beside the tests, in the background (their output follows the tests'): the tests keep two
# cores busy only once they are under way, and mypy's ~50 s of one core no longer come before them.
mypy_log=$(mktemp)
(
  t0=$SECONDS
  .venv/bin/python -m mypy || echo "mypy of the code failed" >>"$mypy_log.failed"
  echo "check.sh: mypy of the code took $((SECONDS - t0)) s"
  t0=$SECONDS
  # All of tests/ too, with less strictness: the bodies of unannotated test functions are left to pytest (so a
  # type: ignore in one looks unused), and no union-attr (a test indexes what it has just asserted the shape of,
  # e.g. an MCP result's content[0].text). Left out: conftest.py files (one module name for all of them), the
  # scripts that run under the reference's venv (reference_*.py) and tests/fixtures/ (code the tests load as a
  # third party's).
  .venv/bin/python -m mypy --no-check-untyped-defs --no-warn-unused-ignores --disable-error-code union-attr \
      --disable-error-code annotation-unchecked \
      --exclude '(^|/)(conftest|reference_[a-z0-9_]+)\.py$|^tests/fixtures/' tests \
    || echo "mypy of the tests failed" >>"$mypy_log.failed"
  echo "check.sh: mypy of the tests took $((SECONDS - t0)) s"
) >"$mypy_log" 2>&1 &
mypy_pid=$!
status=0
if [ "$quick" = 1 ]; then
  .venv/bin/python -m pytest -m "not podman and not agent_cli and not ray" --quick "$@" || status=$?
else
  .venv/bin/python -m pytest "$@" || status=$?
fi
took "pytest"
wait "$mypy_pid"
cat "$mypy_log" >&2
if [ -s "$mypy_log.failed" ]; then
  cat "$mypy_log.failed" >&2
  status=1
fi
rm -f "$mypy_log" "$mypy_log.failed"
exit "$status"
