"""docs/plugins/task-steps.md, built as a reader would: every ```console block runs, in page order, in one
PluginVenv (tests/kits/plugin_venv.py).

Convention: a `pip ...` line runs at the checkout root (the page says "from the root of an agentenv-local
checkout"); every other line runs in one fresh project folder (a scratch subfolder, never /tmp itself), with
`$CHECKOUT` set to the checkout root (the page says so). A block must exit 0, unless the marker before it says
`<!-- exit: N -->`; any other marker fails the test (every block of this page runs). Each output line a block shows
must appear in what its command printed (compared with runs of spaces collapsed; durations and run ids follow the
shown text, so a shown line may be the start of a printed one). Its ```python excerpts are the package's real code,
verbatim, and its ```toml excerpt the package's real entry points.
"""

from __future__ import annotations

import re
from pathlib import Path

from kits.plugin_venv import PLUGINS, ROOT, PluginVenv, console_blocks, run_plugin_page

PAGE = ROOT / "docs" / "plugins" / "task-steps.md"
FOLDER = PLUGINS / "verifier-steps"


def test_the_excerpts_are_the_packages_code() -> None:
    text = PAGE.read_text()
    code = "\n".join(p.read_text() for p in (FOLDER / "src").rglob("*.py"))
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) >= 4
    for block in blocks:
        for line in block.splitlines():
            assert line in code, f"the page shows {line!r}, which is not in {FOLDER / 'src'}"
    pyproject = (FOLDER / "pyproject.toml").read_text()
    for block in re.findall(r"```toml\n(.*?)```", text, re.S):
        for line in block.splitlines():
            assert line in pyproject, f"the page shows {line!r}, which is not in the package's pyproject.toml"


def test_the_page_runs(tmp_path: Path) -> None:
    text = PAGE.read_text()
    blocks = console_blocks(text)
    assert [c for _n, _m, cs in blocks for c in cs] == [
        "pip install examples/plugins/verifier-steps", "agentenv plugin show agentenv-verifier-steps",
        "agentenv run $CHECKOUT/examples/plugins/verifier-steps/bundle",
        "agentenv task validate $CHECKOUT/examples/plugins/verifier-steps/broken-task.json"]
    venv = PluginVenv.create(tmp_path / "venv")
    project = tmp_path / "project"
    project.mkdir()
    run_plugin_page(venv, text, project)
    assert venv.has("agentenv-verifier-steps")
