"""docs/architecture.md is the map of the code: its table names every package (agentenv_local's, at any
depth, and the top-level ones) and every module directly in agentenv_local, and nothing that is gone."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAP = ROOT / "docs" / "architecture.md"
TOP_LEVEL = ("agentenv_local", "stores", "sandboxes", "tui")


def packages_and_modules() -> set[str]:
    """`agentenv_local/cli/`-style paths of every package, and `agentenv_local/x.py` of each core module."""
    found = set()
    for top in TOP_LEVEL:
        for init in (ROOT / top).rglob("__init__.py"):
            if "__pycache__" not in init.parts:
                found.add(init.parent.relative_to(ROOT).as_posix() + "/")
    found |= {p.relative_to(ROOT).as_posix() for p in (ROOT / "agentenv_local").glob("*.py")
              if p.name != "__init__.py"}
    return found


def mapped() -> set[str]:
    """The paths in the first column of the map's table rows."""
    rows = re.findall(r"^\| `([^`]+)` \|", MAP.read_text(encoding="utf-8"), flags=re.MULTILINE)
    return set(rows)


def test_every_package_and_core_module_is_on_the_map():
    missing = sorted(packages_and_modules() - mapped())
    assert not missing, f"add a row for each to the table in docs/architecture.md: {missing}"


def test_the_map_names_nothing_that_is_gone():
    gone = sorted(p for p in mapped() if not (ROOT / p).exists())
    assert not gone, f"docs/architecture.md maps paths that no longer exist: {gone}"
