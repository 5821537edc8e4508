#!/usr/bin/env bash
# Passes when the greeting is where load_artifact put it and says hello.
set -eu
grep -qi hello "$(dirname "$0")/hello.txt"
