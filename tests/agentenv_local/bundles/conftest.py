"""Shared fixtures for bundle tests: a bundle writer and a real DuckDB store in tmp_path."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from stores.database import DuckDBStore

HELLO = Path(__file__).resolve().parents[3] / "examples" / "hello"


class BundleWriter:
    """Writes bundle folders: `b.task("t", steps)`, `b.artifact("a", {"f.txt": "x"})`, `b.file(rel, text)`."""

    def __init__(self, root: Path):
        self.root = root

    def file(self, rel: str, content: str | bytes) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        return path

    def task(self, name: str, steps: object) -> Path:
        return self.file(f"tasks/{name}.json", json.dumps(steps, indent=1))

    def artifact(self, name: str, files: dict[str, str]) -> Path:
        for rel, text in files.items():
            self.file(f"artifacts/{name}/{rel}", text)
        return self.root / "artifacts" / name


@pytest.fixture
def bundle(tmp_path) -> BundleWriter:
    """An empty bundle folder named `mybundle` (add kinds to it)."""
    root = tmp_path / "mybundle"
    root.mkdir()
    return BundleWriter(root)


@pytest.fixture
def hello_copy(tmp_path) -> BundleWriter:
    """A copy of examples/hello to change."""
    root = tmp_path / "hello"
    shutil.copytree(HELLO, root)
    return BundleWriter(root)


@pytest.fixture
def store(tmp_path):
    (tmp_path / "state").mkdir()
    s = DuckDBStore(tmp_path / "state" / "store.duckdb", tmp_path / "state" / "objects")
    yield s
    s.close()


def hello_steps(artifact_id: str = "greeting") -> list[dict]:
    return [
        {"id": "box", "type": "deploy_sandbox", "sandbox_name": "box"},
        {"id": "load", "type": "load_artifact", "artifact_id": artifact_id, "sandbox_name": "box",
         "destination_path": "/app/greeting"},
        {"id": "check", "type": "verify_sandbox", "sandbox_name": "box",
         "criteria": [{"type": "probe_file_exists", "paths": ["greeting/hello.txt"]}]},
    ]


@pytest.fixture
def steps():
    return hello_steps
