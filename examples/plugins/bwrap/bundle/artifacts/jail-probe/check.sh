#!/usr/bin/env bash
# Run inside a bwrap sandbox: passes when the jail holds what the agentenv-bwrap provider promises.
set -u
fail() { echo "FAIL: $*" >&2; exit 1; }
# looks with test -w (access(2) says EROFS on a read-only mount): the probe never writes outside /app
[ -w /usr ] && fail "the root is writable"
echo ok > /app/probe/written.txt || fail "/app is not writable"
[ "$(id -u)" != 0 ] || fail "running as root"
grep -q '^NoNewPrivs:[[:space:]]*1' /proc/self/status || fail "no_new_privs is off"
[ "$(ls /proc | grep -c '^[0-9]')" -lt 10 ] || fail "/proc shows the host's processes"
python3 -c 'import socket; socket.create_connection(("127.0.0.1", 22), timeout=2)' 2>/dev/null \
  && fail "the network is reachable"
[ "$(ulimit -u)" -le 512 ] || fail "no process limit"
echo "the jail holds"
