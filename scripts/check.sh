#!/usr/bin/env bash
# Every check CI runs (.ci/run), from a clean clone: set up .venv with the test extra, then lint (ruff),
# type-check (mypy: the code, bench/ and tests/kits/, as configured in pyproject.toml) and run the tests.
# Arguments go to pytest, e.g. `scripts/check.sh tests/stores -x`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --test
.venv/bin/python -m ruff check .
.venv/bin/python -m mypy
.venv/bin/python -m pytest "$@"
