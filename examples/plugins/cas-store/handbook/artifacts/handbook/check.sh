#!/usr/bin/env bash
# Passes when both copies of the policy arrived whole and identical.
set -eu
here="$(dirname "$0")"
cmp -s "$here/policy.md" "$here/policy-copy.md"
grep -q "100 EUR" "$here/policy.md"
