"""The reference's own bundles (`from kits.reference_bundles import ...`), copied unchanged out of the installed
reference (`agentenv-framework` in the side venv that `scripts/setup.sh --test` makes) into a test's folder.
Nothing of the reference is committed here: the bundles are read from the installed package at test time."""

from __future__ import annotations

import shutil
import subprocess
from functools import cache
from pathlib import Path

import pytest

from kits.servers import REF_PYTHON

# Where each shipped bundle lives inside the installed `agent_env` package.
BUNDLES = {"hello": "examples/hello", "echo-mcp": "examples/echo-mcp", "mail-mcp": "examples/mail-mcp",
           "agents": "agents", "drivers": "drivers"}


@cache
def reference_package_dir() -> Path | None:
    """The installed reference's `agent_env` folder, or None when the side venv does not have it."""
    if not REF_PYTHON.is_file():
        return None
    done = subprocess.run([str(REF_PYTHON), "-c", "import agent_env, os; print(os.path.dirname(agent_env.__file__))"],
                          check=False, capture_output=True, text=True)
    return Path(done.stdout.strip()) if done.returncode == 0 else None


def copy_reference_bundle(name: str, into: Path) -> Path:
    """Copy the reference's bundle `name` (a key of BUNDLES) unchanged into `into/<name>`; skips the test
    when the reference is not installed (scripts/setup.sh --test installs it)."""
    package = reference_package_dir()
    if package is None:
        pytest.skip("the reference (agentenv-framework) is not installed in .venv-ref: run scripts/setup.sh --test")
    target = into / name
    shutil.copytree(package / BUNDLES[name], target, ignore=shutil.ignore_patterns("__pycache__"))
    return target
