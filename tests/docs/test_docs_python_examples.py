"""The ```python blocks of the docs that are marked `<!-- test -->` (on the line before the block) run
without error, each in a fresh interpreter in an empty folder (the checkout on sys.path). Blocks that serve
forever, need a model or a running hub stay unmarked."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MARK = "<!-- test -->"


def marked_blocks() -> list[tuple[str, int, str]]:
    out = []
    for page in sorted((ROOT / "docs").rglob("*.md")):
        lines = page.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            if line.strip() == "```python" and i > 0 and lines[i - 1].strip() == MARK:
                end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
                out.append((page.relative_to(ROOT).as_posix(), i + 1, "\n".join(lines[i + 1:end])))
    return out


BLOCKS = marked_blocks()


def test_some_blocks_are_marked():
    assert len(BLOCKS) >= 3


@pytest.mark.parametrize(("page", "line", "code"), BLOCKS, ids=[f"{p}:{n}" for p, n, _ in BLOCKS])
def test_marked_python_block_runs(page, line, code, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTENV_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["HOME"] = str(tmp_path)
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, f"{page} line {line}:\n{code}\n--- stderr ---\n{done.stderr}"
