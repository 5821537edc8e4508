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

python=${PYTHON:-python3}
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "agentenv-local needs Python 3.11 or newer (set PYTHON=/path/to/python3.11)" >&2
  exit 1
fi
[ -x .venv/bin/python ] || "$python" -m venv .venv

extra=""
[ "$want_test" = 1 ] && extra="[test]"
# Reinstall only when pyproject.toml changed since the last install.
stamp=".venv/.agentenv-installed$extra"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install --disable-pip-version-check -q -e ".$extra"
  touch "$stamp"
fi

# The tests also drive our envs, gateway and agents with the reference's own SDK and clients
# (agentenv-framework-protocol with its agent extra, on mcp 1.x and a2a-sdk 0.3), and copy the bundles that
# ship inside the reference (agentenv-framework) to run them unchanged, so it lives in a side venv, never in
# .venv.
if [ "$want_test" = 1 ] && ! { [ -x .venv-ref/bin/python ] && .venv-ref/bin/python -c "import a2a, agentenv_protocol, agent_env" 2>/dev/null; }; then
  if { [ -x .venv-ref/bin/python ] || "$python" -m venv .venv-ref; } && .venv-ref/bin/python -m pip install \
      --disable-pip-version-check -q "agentenv-framework-protocol[agent]" "agentenv-framework==0.9.1364" "mcp>=1.25,<2"; then
    :
  else
    echo "warning: could not install the reference's SDK into .venv-ref; its compatibility tests will be skipped" >&2
    rm -rf .venv-ref
  fi
fi

# The tests run real Podman containers: install and set up Podman where this machine allows it.
if [ "$want_test" = 1 ]; then
  scripts/setup-podman.sh
  scripts/setup-bwrap.sh  # bubblewrap, for the example sandbox provider examples/plugins/bwrap (never fatal)
  scripts/setup-agent-clis.sh  # the coding-agent CLIs tests/agents_cli runs (each skipped when absent)
fi
