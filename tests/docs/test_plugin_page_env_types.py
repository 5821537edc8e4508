"""docs/plugins/env-types.md, built as a reader would: every ```console block runs, in page order, in one PluginVenv
(tests/kits/plugin_venv.py), and every code excerpt is the package's real code.

Convention: a `pip ...` line runs at the checkout root (the page says "From the root of an agentenv-local
checkout"); every other line runs in one fresh project folder (a scratch subfolder of pytest's basetemp, never /tmp
itself) with `$CHECKOUT` set to the checkout root (the page says so). Each output line a block shows must appear
in what its commands printed (the page shows no durations or run ids). No block is skipped.
"""

from __future__ import annotations

import re
from pathlib import Path

from kits.plugin_venv import PLUGINS, ROOT, PluginVenv, console_blocks, run_plugin_page

PAGE = ROOT / "docs" / "plugins" / "env-types.md"
FOLDER = PLUGINS / "sqlite-app"


def test_every_excerpt_is_the_packages_own_text() -> None:
    text = PAGE.read_text()
    code = "\n".join(p.read_text() for p in sorted((FOLDER / "src").rglob("*.py")))
    code += (FOLDER / "shop" / "artifacts" / "verifier" / "verify.py").read_text()
    pythons = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(pythons) == 6
    for block in pythons:
        assert block.rstrip("\n") in code, f"the page shows code that is not the package's:\n{block}"
    tomls = re.findall(r"```toml\n(.*?)```", text, re.S)
    assert tomls[1] in (FOLDER / "pyproject.toml").read_text()
    assert tomls[2].rstrip("\n") in (FOLDER / "shop" / "envs" / "shop" / "env.toml").read_text()
    assert "(../plugins.md#env-types-and-env-providers)" in text and "## Env types and env providers" in (
        ROOT / "docs" / "plugins.md").read_text()


def test_the_page_runs(tmp_path: Path) -> None:
    text = PAGE.read_text()
    blocks = console_blocks(text)
    assert [c for _n, _m, commands in blocks for c in commands] == [
        "pip install examples/plugins/sqlite-app", "agentenv plugin show agentenv-sqlite-app",
        "agentenv run $CHECKOUT/examples/plugins/sqlite-app/shop"]
    venv = PluginVenv.create(tmp_path / "venv")
    project = tmp_path / "project"
    project.mkdir()
    run_plugin_page(venv, text, project)
    assert venv.has("agentenv-sqlite-app")
