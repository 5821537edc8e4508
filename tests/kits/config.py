"""Configuration for tests (`from kits.config import ...`): a project's .agentenv/config.toml written to disk, and
a stand-in for the loaded config object where a test needs no real one."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def write_config(root: Path, text: str) -> Path:
    """Write `text` as the project's .agentenv/config.toml under `root`; its path."""
    state = root / ".agentenv"
    state.mkdir(parents=True, exist_ok=True)
    path = state / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


class DictConfig:
    """Stands in for the config object: `.get("a.b.c", default)` (and `.raw`, what resolve_model reads) over
    nested dicts."""

    def __init__(self, values: dict | None = None):
        self.values = dict(values or {})

    def get(self, path: str, default: Any = None) -> Any:
        node: Any = self.values
        for part in path.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node

    raw = get
