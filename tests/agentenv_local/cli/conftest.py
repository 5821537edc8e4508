"""Shared fixtures for the CLI tests: a project folder driven through real `agentenv` subprocesses.

`project.cli(...)` runs the installed console script with cwd = the project and every AGENTENV_*
variable removed (so state goes to <project>/.agentenv), and fails the test on a traceback.
`project.stored()` reads what the project's DuckDB file holds, to prove "nothing was written".
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from kits.warm_cli import run_agentenv

AGENTENV = Path(sys.executable).parent / "agentenv"
HELLO = Path(__file__).resolve().parents[3] / "examples" / "hello"


class Project:
    def __init__(self, root: Path):
        self.root = root

    def cli(self, *args: str, code: int | None = 0, timeout: float = 60) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTENV_") or k == "AGENTENV_SANDBOX_DEFAULT"}
        proc = run_agentenv([*map(str, args)], cwd=self.root, env=env, timeout=timeout)
        shown = f"$ agentenv {' '.join(map(str, args))}\n--- stdout\n{proc.stdout}--- stderr\n{proc.stderr}"
        assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, shown
        if code is not None:
            assert proc.returncode == code, shown
        return proc

    def json(self, *args: str, code: int | None = 0) -> object:
        proc = self.cli(*args, "--json", code=code)
        return json.loads(proc.stdout)

    def stored(self) -> dict:
        """Every document version, run and object in the project's store (empty if there is none)."""
        db = self.root / ".agentenv" / "store.duckdb"
        out: dict = {"documents": set(), "runs": 0, "objects": 0}
        if not db.exists():
            return out
        import duckdb

        con = duckdb.connect(str(db), read_only=True)
        try:
            rows = con.execute("SELECT collection, id, version FROM documents").fetchall()
            out["documents"] = {tuple(r) for r in rows}
            out["runs"] = con.execute("SELECT count(*) FROM runs").fetchone()[0]
            out["objects"] = con.execute("SELECT count(*) FROM objects").fetchone()[0]
        finally:
            con.close()
        return out

    def copy_hello(self, name: str = "mybundle") -> Path:
        dest = self.root / name
        shutil.copytree(HELLO, dest)
        return dest

    def write(self, rel: str, text: str) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    def write_json(self, rel: str, value: object) -> Path:
        return self.write(rel, json.dumps(value, indent=1))


@pytest.fixture
def project(tmp_path) -> Project:
    return Project(tmp_path)


@pytest.fixture(scope="session")
def make_project():
    """The Project class, for module-scoped fixtures (which cannot use `project`)."""
    return Project


def hello_steps(artifact_id: str = "greeting", expected: str = "hello") -> list[dict]:
    """The hello task's steps, with the artifact id and the expected text as parameters."""
    return [
        {"id": "box", "type": "deploy_sandbox", "sandbox_name": "box"},
        {"id": "load", "type": "load_artifact", "artifact_id": artifact_id, "sandbox_name": "box",
         "destination_path": "/app/greeting"},
        {"id": "hello", "type": "verify_sandbox", "sandbox_name": "box",
         "criteria": [{"type": "probe_file_contains", "paths": ["greeting/hello.txt"], "expected": expected}]},
    ]


@pytest.fixture
def steps_factory():
    return hello_steps
