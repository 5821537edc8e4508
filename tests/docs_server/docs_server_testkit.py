"""Helpers shared by the docs server tests (imported by name: `from docs_server_testkit import ...`)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def agentenv_exe() -> str:
    for candidate in (Path(sys.executable).parent / "agentenv", ROOT / ".venv" / "bin" / "agentenv"):
        if candidate.is_file():
            return str(candidate)
    found = shutil.which("agentenv")
    assert found, "agentenv is not installed (scripts/setup.sh --test)"
    return found
