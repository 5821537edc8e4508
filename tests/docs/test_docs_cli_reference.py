"""docs/reference/cli.md is generated from the CLI's own help; fail when it is out of date.

When this fails, the CLI changed without the page: run `.venv/bin/python scripts/gen_cli_docs.py`
and commit the result.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gen_cli_docs.py"


def test_cli_reference_is_up_to_date(tmp_path):
    # Run from an empty folder with no AGENTENV_* settings: the page must not depend on either.
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTENV_")}
    done = subprocess.run([sys.executable, str(SCRIPT), "--check"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_cli_reference_lists_every_core_command():
    from agentenv_local.cli.main import core_commands

    page = (ROOT / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
    for name in core_commands():
        assert f"\n## agentenv {name}\n" in page, f"`agentenv {name}` is missing from docs/reference/cli.md"
