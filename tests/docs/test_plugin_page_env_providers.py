"""docs/plugins/env-providers.md, built as a reader would: every ```console block runs, in page order, in one
PluginVenv (tests/kits/plugin_venv.py).

Convention: a `pip ...` line runs at the checkout root (the page says "from the root of an agentenv-local
checkout"); every other line runs in one fresh project folder (a scratch subfolder, never /tmp itself), with
`$CHECKOUT` set to the checkout root (the page says so). A block's output lines must all appear in what its command
printed, durations and run ids aside. Its ```python and ```toml excerpts must be the package's real files, verbatim.
"""

from __future__ import annotations

import re
from pathlib import Path

from kits.plugin_venv import PLUGINS, ROOT, PluginVenv, console_blocks, run_plugin_page

PAGE = ROOT / "docs" / "plugins" / "env-providers.md"
FOLDER = PLUGINS / "one-process"


def test_the_excerpts_are_the_packages_files() -> None:
    code = "\n".join(p.read_text() for p in (FOLDER / "src").rglob("*.py"))
    text = PAGE.read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) >= 4
    for block in blocks:
        assert block.rstrip("\n") in code, f"the page shows code that is not in {FOLDER / 'src'}:\n{block}"
    tomls = re.findall(r"```toml\n(.*?)```", text, re.S)
    desk = (FOLDER / "bundle" / "envs" / "desk" / "env.toml").read_text()
    pyproject = (FOLDER / "pyproject.toml").read_text()
    assert tomls[1] in pyproject
    shown = [ln for ln in tomls[2].splitlines() if not ln.startswith("#")]
    assert shown and all(ln in desk.splitlines() for ln in shown)


def test_the_page_runs(tmp_path: Path) -> None:
    text = PAGE.read_text()
    blocks = console_blocks(text)
    assert [c for _n, _m, cs in blocks for c in cs] == [
        "pip install examples/plugins/one-process", "agentenv plugin show agentenv-one-process",
        "agentenv run $CHECKOUT/examples/plugins/one-process/bundle --task desk"]
    venv = PluginVenv.create(tmp_path / "venv")
    project = tmp_path / "project"
    project.mkdir()
    run_plugin_page(venv, text, project)
    assert venv.has("agentenv-one-process")
