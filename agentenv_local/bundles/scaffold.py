"""A new bundle to start from (`agentenv bundle init FOLDER`): one task, one artifact, a README.

It runs as it is, offline, with no config, model or Podman: the task loads the artifact into a
`process` sandbox and checks it. The user changes it from there.
"""

from __future__ import annotations

import json
from pathlib import Path

from agentenv_local.nofollow import write_file

from .export import build

CHECK_SH = """#!/usr/bin/env bash
# Passes when the note is where load_artifact put it and says ready.
set -eu
grep -q ready "$(dirname "$0")/note.txt"
"""

TASK = {
    "description": "Load the note into a sandbox and check it.",
    "steps": [
        {"id": "box", "type": "deploy_sandbox", "sandbox_name": "box", "sandbox_mode": "vm"},
        {"id": "load", "type": "load_artifact", "artifact_id": "note", "sandbox_name": "box",
         "destination_path": "/app/note"},
        {"id": "check", "type": "verify_sandbox", "sandbox_name": "box",
         "criteria": [{"type": "probe_file_contains", "paths": ["note/note.txt"], "expected": "ready"},
                      {"type": "bash_cmd_succeeds", "bash_cmd": "bash /app/note/check.sh"}]},
    ],
}


def readme(name: str) -> str:
    return f"""# {name}: a new bundle, ready to run and to change.

`tasks/check-note.json` deploys a `process` sandbox (a work folder), loads the `note` artifact
(`artifacts/note/`) into it, and verifies it: a file contains "ready", and a shell check succeeds.

Run it with `agentenv run {name}` from the folder that holds it (or `agentenv run PATH`). Then add
tasks under `tasks/`, artifacts under `artifacts/`, envs under `envs/` and evals under `evals/`:
see docs/bundles.md (`agentenv docs read bundles`).
"""


def scaffold(folder: Path) -> list[str]:
    """Write the new bundle at `folder` (new or empty); the relative paths written."""
    files = {
        "README.md": readme(folder.name),
        "artifacts/note/note.txt": "ready\n",
        "artifacts/note/check.sh": CHECK_SH,
        "tasks/check-note.json": json.dumps(TASK, indent=2) + "\n",
    }

    def fill(staging: Path) -> None:
        for rel, text in files.items():
            write_file(staging, rel, text.encode(), path=rel, where="the new bundle")

    build(folder, fill)
    return sorted(files)
