#!/usr/bin/env bash
# venv-install.sh VENV ARGS...: `pip install ARGS` into the venv VENV (made by the caller), with uv when it is there
# (scripts/setup.sh --test puts it in .venv): what the test setup installs (.venv's test extra, .venv-ref,
# OpenHands' venv). Measured on a 2-core machine: OpenHands' venv 199 s with pip, 12 s with uv; .venv-ref 90 s and
# 4 s. Falls back to pip when uv is missing or fails. Quiet on success; on failure the installer's output goes to
# stderr. (A user's plain `scripts/setup.sh` keeps pip, which follows their pip configuration.)
set -uo pipefail
venv=$1
shift
uv="$(dirname "$0")/../.venv/bin/uv"
if [ -x "$uv" ] && log=$(UV_NATIVE_TLS=1 "$uv" pip install -q --python "$venv/bin/python" "$@" 2>&1); then
  exit 0
fi
[ -n "${log:-}" ] && echo "uv could not install $*, trying pip: $(echo "$log" | tail -1)" >&2
"$venv/bin/python" -m pip install --disable-pip-version-check -q "$@"
