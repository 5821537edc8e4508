"""docs/plugins/sandbox-providers.md, built as a reader would: every ```console block runs, in page order, in one
PluginVenv (tests/kits/plugin_venv.py).

Convention: a `pip ...` line runs at the checkout root (the page says "from the root of an agentenv-local
checkout"); every other line runs in one fresh project folder (a scratch subfolder, never /tmp itself), with
`$CHECKOUT` set to the checkout root (the page says so). A block's output lines must all appear in what its command
printed, durations and run ids aside. Its ```python excerpts must be the package's real code, verbatim.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from kits.plugin_venv import PLUGINS, ROOT, PluginVenv, console_blocks, run_plugin_page

PAGE = ROOT / "docs" / "plugins" / "sandbox-providers.md"


def test_the_python_excerpts_are_the_packages_code() -> None:
    code = "\n".join(p.read_text() for p in (PLUGINS / "bwrap" / "src").rglob("*.py"))
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)
    assert len(blocks) >= 3
    for block in blocks:
        for line in block.splitlines():
            assert line in code, f"the page shows {line!r}, which is not in examples/plugins/bwrap/src"


def _bwrap_reason() -> str | None:
    import sys

    sys.path.insert(0, str(PLUGINS / "bwrap" / "src"))
    try:
        from agentenv_bwrap.provider import probe
    finally:
        sys.path.remove(str(PLUGINS / "bwrap" / "src"))
    return probe("bwrap")


def test_the_page_runs(tmp_path: Path) -> None:
    reason = _bwrap_reason()
    if reason:
        if os.environ.get("AGENTENV_REQUIRE_BWRAP") == "1":
            pytest.fail(f"AGENTENV_REQUIRE_BWRAP=1 but {reason}")
        pytest.skip(reason)
    text = PAGE.read_text()
    blocks = console_blocks(text)
    assert [c for _n, _m, cs in blocks for c in cs] == [
        "pip install examples/plugins/bwrap", "agentenv plugin show agentenv-bwrap",
        "agentenv run hello --sandbox bwrap", "agentenv run $CHECKOUT/examples/plugins/bwrap/bundle"]
    venv = PluginVenv.create(tmp_path / "venv")
    project = tmp_path / "project"
    project.mkdir()
    run_plugin_page(venv, text, project)
    assert venv.has("agentenv-bwrap")
    assert not list((project / ".agentenv" / "sandboxes" / "bwrap").glob("bwrap-*"))  # every sandbox torn down
