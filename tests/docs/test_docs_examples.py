"""The docs work: the commands on docs/getting-started.md exit 0, and links between pages resolve.

Every ```console block is read in page order, and its lines that start with `$ agentenv` are run
one after the other in one temporary project folder, the way a reader following the page would
(so later blocks see what earlier ones stored). Lines without `$ ` are the expected output and
are not compared: output holds run ids, times and paths. A block is skipped when the line before
it is `<!-- no-test -->` (commands that need an edit first, other tools, or that fail on purpose).
A `$` line in a tested block that does not run `agentenv` is an error: mark the block no-test.

Two things the page cannot do by itself are done here:
- the page copies the built-in hello bundle (`cp -r .../examples/hello my-hello`) in a no-test
  block (the source path is wherever the reader's checkout is), so the project folder starts
  with that copy;
- run ids on the page (`hello-20261129-3d5fac50`) are examples: each is replaced by the newest
  real run of the same task before the command runs.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from kits.servers import agentenv_exe

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "getting-started.md"
NO_TEST = "<!-- no-test -->"
RUN_ID = re.compile(r"\b([A-Za-z0-9_.-]+?)-(\d{8})-([0-9a-f]{8})\b")


def console_blocks(text: str) -> list[tuple[int, list[str], bool]]:
    """(line number, lines, skipped) of every ```console block, in page order."""
    blocks = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```console":
            start = i
            j = i + 1
            while j < len(lines) and lines[j].strip() != "```":
                j += 1
            before = next((lines[k].strip() for k in range(start - 1, -1, -1) if lines[k].strip()), "")
            blocks.append((start + 1, lines[start + 1:j], before == NO_TEST))
            i = j + 1
        else:
            i += 1
    return blocks


def commands(block: list[str]) -> list[str]:
    return [line[2:].strip() for line in block if line.startswith("$ ")]


def test_page_has_tested_examples():
    blocks = console_blocks(PAGE.read_text(encoding="utf-8"))
    tested = [c for _, lines, skipped in blocks if not skipped for c in commands(lines)]
    assert len(tested) >= 5, "docs/getting-started.md should keep runnable `$ agentenv` examples"
    for line_no, lines, skipped in blocks:
        if skipped:
            continue
        others = [c for c in commands(lines) if not c.startswith("agentenv")]
        assert not others, (f"docs/getting-started.md line {line_no}: {others} is not an agentenv command; "
                            f"put {NO_TEST} on the line before the block")


def test_getting_started_commands_exit_0(tmp_path):
    exe = agentenv_exe()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTENV_") or k == "AGENTENV_SANDBOX_DEFAULT"}
    env["HOME"] = str(tmp_path / "home")  # nothing of the tester's own home leaks in
    env["PATH"] = f"{Path(exe).parent}{os.pathsep}{env.get('PATH', '')}"
    project = tmp_path / "project"
    project.mkdir()
    (tmp_path / "home").mkdir()
    shutil.copytree(ROOT / "examples" / "hello", project / "my-hello")

    def newest_run(task: str) -> str | None:
        done = subprocess.run([exe, "runs", "list", "--json", "--task", task, "--limit", "1"], cwd=project,
                              env=env, capture_output=True, text=True, timeout=60)
        rows = json.loads(done.stdout) if done.returncode == 0 and done.stdout.strip() else []
        return rows[0]["run_id"] if rows else None

    ran = 0
    for line_no, lines, skipped in console_blocks(PAGE.read_text(encoding="utf-8")):
        if skipped:
            continue
        for command in commands(lines):
            if not command.startswith("agentenv"):
                continue
            for match in RUN_ID.finditer(command):
                real = newest_run(match.group(1))
                if real is None:
                    pytest.fail(f"line {line_no}: `{command}` names a run of {match.group(1)!r}, "
                                "but no earlier command on the page made one")
                command = command.replace(match.group(0), real)
            argv = shlex.split(command)
            argv[0] = exe
            done = subprocess.run(argv, cwd=project, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                                  text=True, timeout=120)
            assert done.returncode == 0, (f"docs/getting-started.md line {line_no}: `{command}` exited "
                                          f"{done.returncode}\n{done.stdout}\n{done.stderr}")
            ran += 1
    assert ran >= 5


# -- links between the pages ----------------------------------------------------------------

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """The anchor GitHub makes for a heading."""
    text = heading.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    out, fenced = set(), False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            out.add(_slug(line.lstrip("#")))
    return out


def test_relative_links_in_docs_and_readme_resolve():
    pages = sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]
    broken = []
    for page in pages:
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
        for target in LINK.findall(text):
            if "://" in target or target.startswith("mailto:"):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, "broken links:\n" + "\n".join(broken)
