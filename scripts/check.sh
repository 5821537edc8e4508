#!/usr/bin/env bash
# Every check CI runs (.ci/run), from a clean clone: set up .venv with the test extra, then lint (ruff),
# type-check (mypy: the code, bench/ and tests/kits/ as configured in pyproject.toml, then all of tests/) and
# run the tests. Arguments go to pytest, e.g. `scripts/check.sh tests/stores -x`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --test
.venv/bin/python -m ruff check .
.venv/bin/python -m mypy
# All of tests/ too, with less strictness: the bodies of unannotated test functions are left to pytest (so a
# type: ignore in one looks unused), and no union-attr (a test indexes what it has just asserted the shape of, e.g.
# an MCP result's content[0].text). Left out: conftest.py files (one module name for all of them), the scripts
# that run under the reference's venv (reference_*.py) and tests/fixtures/ (code the tests load as a third party's).
.venv/bin/python -m mypy --no-check-untyped-defs --no-warn-unused-ignores --disable-error-code union-attr \
    --disable-error-code annotation-unchecked \
    --exclude '(^|/)(conftest|reference_[a-z0-9_]+)\.py$|^tests/fixtures/' tests
.venv/bin/python -m pytest "$@"
