#!/usr/bin/env bash
# Make the example sandbox provider examples/plugins/bwrap usable here: install bubblewrap (Debian's `bubblewrap`)
# and util-linux's prlimit/setpriv/unshare when they are missing and this machine has apt and root, then check that
# bwrap can make a sandbox (unprivileged user namespaces on).
# Never fatal: without bwrap, tests/plugins/test_bwrap.py is skipped with the reason (a failure under
# AGENTENV_REQUIRE_BWRAP=1).
set -uo pipefail

warn() { echo "setup-bwrap: $*" >&2; }

missing=()
command -v bwrap >/dev/null || missing+=(bubblewrap)
{ command -v prlimit && command -v setpriv && command -v unshare; } >/dev/null || missing+=(util-linux)

if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo -n"
  if command -v apt-get >/dev/null && { [ -z "$sudo" ] || sudo -n true 2>/dev/null; }; then
    echo "setup-bwrap: installing ${missing[*]} (apt)" >&2
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq >/dev/null || warn "apt-get update failed"
    if ! $sudo apt-get install -y -qq "${missing[@]}" >/dev/null; then
      warn "could not install ${missing[*]}; the bwrap provider stays unavailable"
      exit 0
    fi
  else
    warn "missing ${missing[*]} and no way to install it here (needs apt and root); the bwrap tests are skipped"
    exit 0
  fi
fi

if ! bwrap --unshare-all --unshare-user --ro-bind / / true 2>/dev/null; then
  warn "bwrap is installed but cannot make a sandbox (unprivileged user namespaces off?" \
       "sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces > 0); the bwrap tests are skipped"
fi
exit 0
