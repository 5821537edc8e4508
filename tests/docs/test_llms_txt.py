"""docs/llms.txt and docs/llms-full.txt are generated from the docs; fail when they are stale.

When this fails, the docs changed without them: run `.venv/bin/python scripts/gen_llms_txt.py`.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gen_llms_txt.py"


def test_llms_txt_is_up_to_date(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTENV_")}
    done = subprocess.run([sys.executable, str(SCRIPT), "--check"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_llms_txt_links_every_page_once():
    text = (ROOT / "docs" / "llms.txt").read_text(encoding="utf-8")
    links = re.findall(r"^- \[[^\]]+\]\(([^)]+\.md)\): ", text, flags=re.MULTILINE)
    pages = sorted(p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md"))
    assert sorted(links) == sorted(p for p in pages if p != "index.md")
    assert "(llms-full.txt)" in text


def test_llms_full_holds_every_page():
    full = (ROOT / "docs" / "llms-full.txt").read_text(encoding="utf-8")
    for page in (ROOT / "docs").rglob("*.md"):
        rel = page.relative_to(ROOT / "docs").as_posix()
        assert f"<!-- page: {rel} -->" in full, rel


def test_check_mode_fails_on_a_stale_file(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Mine\n\nThe docs.\n\n## Start\n\n- [A](a.md)\n")
    (docs / "a.md").write_text("# A page\n\nAbout a.\n")
    args = [sys.executable, str(SCRIPT), "--docs", str(docs)]
    assert subprocess.run(args + ["--check"], capture_output=True).returncode == 1
    assert subprocess.run(args, capture_output=True).returncode == 0
    assert "- [A page](a.md): About a." in (docs / "llms.txt").read_text()
    assert subprocess.run(args + ["--check"], capture_output=True).returncode == 0
    (docs / "a.md").write_text("# A page\n\nChanged.\n")
    assert subprocess.run(args + ["--check"], capture_output=True).returncode == 1
