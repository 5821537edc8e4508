#!/usr/bin/env bash
# Set up a development environment in ./.venv: the package (editable) and, with --test,
# what the tests need. Safe to run again; fast when nothing changed.
set -euo pipefail
cd "$(dirname "$0")/.."

want_test=0
for arg in "$@"; do
  case "$arg" in
    --test) want_test=1 ;;
    *) echo "usage: scripts/setup.sh [--test]" >&2; exit 2 ;;
  esac
done

# .venv's interpreter: $PYTHON, else the distribution's own Python 3.11+ (/usr/bin/python3) where there is one, else
# python3. A distribution builds its Python with profile-guided and link-time optimisation and a static libpython;
# a source build such as pyenv's has neither by default, and every Python process of agentenv (each command, hub,
# env and agent server) and of the tests ran on it with 15-20% more CPU (measured side by side in docs/testing.md).
python=${PYTHON:-}
if [ -z "$python" ]; then
  python=python3
  if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import sys, ensurepip; sys.exit(sys.version_info < (3, 11))' \
      2>/dev/null; then
    python=/usr/bin/python3
  fi
fi
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "agentenv-local needs Python 3.11 or newer (set PYTHON=/path/to/python3.11)" >&2
  exit 1
fi
[ -x .venv/bin/python ] || "$python" -m venv .venv

# With --test, the installs that need nothing from .venv (the reference's side venv, the coding CLIs) run in the
# background while .venv, Podman and bubblewrap install here: each mostly waits on the network and the disk.
# Their output is shown once they are done.
background_logs=""
background_pids=()
if [ "$want_test" = 1 ]; then
  # uv installs the test setup's packages (scripts/venv-install.sh), 15-20 times faster than pip
  [ -x .venv/bin/uv ] || .venv/bin/python -m pip install --disable-pip-version-check -q "uv>=0.13,<0.14" \
    || echo "warning: could not install uv; the test setup installs with pip (slower)" >&2
  background_logs=$(mktemp -d)
  scripts/setup-reference.sh >"$background_logs/reference.log" 2>&1 &
  background_pids+=($!)
  scripts/setup-agent-clis.sh >"$background_logs/agent-clis.log" 2>&1 &
  background_pids+=($!)
fi

extra=""
[ "$want_test" = 1 ] && extra="[test]"
# Reinstall only when pyproject.toml changed since the last install.
stamp=".venv/.agentenv-installed$extra"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  if [ "$want_test" = 1 ]; then
    scripts/venv-install.sh .venv -e ".$extra"
  else
    .venv/bin/python -m pip install --disable-pip-version-check -q -e ".$extra"
  fi
  touch "$stamp"
fi
# An editable install leaves the packages uncompiled, and where PYTHONDONTWRITEBYTECODE is set every command would
# compile what it imports again (about 0.1-0.2 s of CPU each); compiled here once, again only for changed files.
.venv/bin/python -m compileall -q -j 0 agentenv_local stores sandboxes tui >/dev/null

# The tests run real Podman containers: install and set up Podman where this machine allows it.
if [ "$want_test" = 1 ]; then
  scripts/setup-podman.sh
  scripts/setup-bwrap.sh  # bubblewrap, for the example sandbox provider examples/plugins/bwrap (never fatal)
  for pid in "${background_pids[@]}"; do
    wait "$pid" || true  # each says what it could not install, and never fails the setup
  done
  cat "$background_logs"/*.log >&2
  rm -rf "$background_logs"
fi
