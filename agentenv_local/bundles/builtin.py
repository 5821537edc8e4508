"""Where the built-in example bundles are: inside the installed wheel, or the source checkout."""

from __future__ import annotations

from pathlib import Path


def example_bundles() -> Path:
    here = Path(__file__).resolve().parent.parent  # agentenv_local/
    installed = here / "_examples"
    return installed if installed.is_dir() else here.parent / "examples"
