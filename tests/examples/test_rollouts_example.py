"""examples/rollouts/grpo_advantages.py: run as a user would, and its advantage arithmetic."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

from kits.hub import clean_env

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "rollouts" / "grpo_advantages.py"


def load_example():
    spec = importlib.util.spec_from_file_location("grpo_advantages", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_group_relative_advantages():
    example = load_example()
    assert example.group_advantages([0.0, 1.0, 1.0, 0.0]) == [-1.0, 1.0, 1.0, -1.0]
    assert example.group_advantages([1.0, 1.0]) == [0.0, 0.0]  # a group with one reward teaches nothing
    assert example.prompt_key({"task_id": "t", "task_version": 2, "seed": {"b": 1, "a": 2}}) == \
        't:v2 seed={"a": 2, "b": 1}'


def test_the_example_runs_the_support_bundle_and_prints_one_row_per_episode(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    out = subprocess.run([sys.executable, str(EXAMPLE), "--k", "2", "--concurrency", "2"], cwd=project,
                         env=clean_env(), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert len(rows) == 2 and len({r["run_id"] for r in rows}) == 2
    assert all(r["reward"] == 1.0 and r["advantage"] == 0.0 and r["assistant_messages"] > 0 for r in rows)
    assert rows[0]["group"].endswith("support/support:v1 seed={}")
