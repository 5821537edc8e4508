#!/usr/bin/env bash
# Make the podman sandbox provider usable here: install Podman (plus runc, and mmdebstrap for the offline
# base image) when they are missing and this machine has apt and root, then let agentenv build the base
# image and probe the fixes this machine's Podman needs (`agentenv sandbox setup`).
# Never fatal: without Podman, agentenv uses the process provider and the Podman tests are skipped.
set -uo pipefail
cd "$(dirname "$0")/.."

warn() { echo "setup-podman: $*" >&2; }

missing=()
command -v podman >/dev/null || missing+=(podman)
if [ "$(uname -s)" = Linux ]; then
  command -v runc >/dev/null || missing+=(runc)
  command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
  # exposed ports are published through it (sandboxes/podman/provider.py): podman only recommends it
  command -v slirp4netns >/dev/null || missing+=(slirp4netns)
fi

if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo -n"
  if command -v apt-get >/dev/null && { [ -z "$sudo" ] || sudo -n true 2>/dev/null; }; then
    echo "setup-podman: installing ${missing[*]} (apt)" >&2
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq >/dev/null || warn "apt-get update failed"
    if ! $sudo apt-get install -y -qq "${missing[@]}" >/dev/null; then
      warn "could not install ${missing[*]}; the podman provider stays unavailable"
      exit 0
    fi
  else
    warn "missing ${missing[*]} and no way to install it here (needs apt and root);" \
         "install Podman yourself (see docs/sandboxes.md); the process provider still works"
    exit 0
  fi
fi

command -v podman >/dev/null || exit 0
if ! .venv/bin/agentenv sandbox setup; then
  warn "agentenv sandbox setup failed (see above); the podman provider may not work here"
fi
exit 0
