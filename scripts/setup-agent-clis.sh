#!/usr/bin/env bash
# Install the coding-agent CLIs the tests drive (tests/agents_cli/) into .cache/agent-clis/<name>/,
# pinned, from the npm registry (OpenHands from PyPI into a side venv). Safe to run again: a CLI already
# installed at its pinned version is skipped. Quiet on success; a CLI that cannot install prints one
# warning line and the others still install (its tests then skip, saying the cache is absent).
# Each install's seconds and size are written to .cache/agent-clis/<name>/.install-stats.
set -uo pipefail
cd "$(dirname "$0")/.."
cache=.cache/agent-clis
mkdir -p "$cache"
export NPM_CONFIG_UPDATE_NOTIFIER=false NPM_CONFIG_FUND=false NPM_CONFIG_AUDIT=false

# name  npm package  pinned version
clis=(
  "claude-code @anthropic-ai/claude-code 2.1.332"
  "codex @openai/codex 0.169.0"
  "gemini @google/gemini-cli 0.61.0"
  "opencode opencode-ai 1.18.33"
  "pi @mariozechner/pi-coding-agent 0.73.1"
)

installed_version() {  # the version in DIR/node_modules/PKG/package.json, or nothing
  node -e 'try{process.stdout.write(require(process.argv[1]).version)}catch(e){}' \
    "$PWD/$1/node_modules/$2/package.json" 2>/dev/null
}

record() {  # DIR SECONDS: write the install's time and size
  echo "seconds=$2 bytes=$(du -sb "$1" | cut -f1)" > "$1/.install-stats"
}

install_npm_clis() {
  if ! command -v npm >/dev/null 2>&1; then
    echo "warning: npm not found; the coding-agent CLIs are not installed (their tests will be skipped)" >&2
  else
    for line in "${clis[@]}"; do
      read -r name pkg version <<<"$line"
      dir="$cache/$name"
      [ "$(installed_version "$dir" "$pkg")" = "$version" ] && continue
      mkdir -p "$dir"
      start=$(date +%s)
      if log=$(npm install --prefix "$dir" --no-audit --no-fund --loglevel=error --save-exact "$pkg@$version" 2>&1) \
          && [ "$(installed_version "$dir" "$pkg")" = "$version" ]; then
        record "$dir" $(( $(date +%s) - start ))
      else
        echo "warning: could not install $pkg@$version into $dir: $(echo "$log" | grep -m1 -i err || echo "$log" | tail -1)" >&2
      fi
    done
  fi
}

# The npm CLIs install while OpenHands' venv (the longest: 12 s with uv, about three minutes with pip) installs below.
install_npm_clis &
npm_pid=$!

# OpenHands (PyPI) in its own venv: it pins its own dependency tree, which must not touch .venv. Its 1.x
# releases require Python 3.12 exactly (Requires-Python ==3.12.*): found as $PYTHON312 or python3.12.
openhands_version=1.16.0
venv="$cache/openhands-venv"
python312=""
for candidate in ${PYTHON312:-} python3.12 "$(pyenv root 2>/dev/null)"/versions/3.12*/bin/python3.12; do
  # the first that runs as 3.12 (a pyenv shim of a version not selected here does not)
  if "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' 2>/dev/null; then
    python312=$candidate
    break
  fi
done
if [ -x "$venv/bin/python" ] && [ "$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("openhands"))' 2>/dev/null)" = "$openhands_version" ]; then
  :
elif [ -z "$python312" ]; then
  echo "warning: openhands==$openhands_version not installed: it requires Python 3.12 (set PYTHON312=/path/to/python3.12)" >&2
else
  start=$(date +%s)
  if { [ -x "$venv/bin/python" ] || "$python312" -m venv "$venv"; } \
      && log=$(scripts/venv-install.sh "$venv" "openhands==$openhands_version" 2>&1); then
    record "$venv" $(( $(date +%s) - start ))
  else
    echo "warning: could not install openhands==$openhands_version into $venv: $(echo "${log:-}" | grep -m1 -i error || echo "${log:-}" | tail -1)" >&2
  fi
fi
wait "$npm_pid"
exit 0
