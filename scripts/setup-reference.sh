#!/usr/bin/env bash
# The reference framework in a side venv, .venv-ref (scripts/setup.sh --test runs this). The tests also drive our
# envs, gateway and agents with the reference's own SDK and clients (agentenv-framework-protocol with its agent
# extra, on mcp 1.x and a2a-sdk 0.3), and copy the bundles that ship inside the reference (agentenv-framework) to
# run them unchanged, so it lives beside .venv, never in it. Never fatal: without it, its compatibility tests are
# skipped with a warning.
set -uo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}

if [ -x .venv-ref/bin/python ] && .venv-ref/bin/python -c "import a2a, agentenv_protocol, agent_env" 2>/dev/null; then
  exit 0
fi
if { [ -x .venv-ref/bin/python ] || "$python" -m venv .venv-ref; } && scripts/venv-install.sh .venv-ref \
    "agentenv-framework-protocol[agent]" "agentenv-framework==0.9.1364" "mcp>=1.25,<2"; then
  exit 0
fi
echo "warning: could not install the reference's SDK into .venv-ref; its compatibility tests will be skipped" >&2
rm -rf .venv-ref
exit 0
