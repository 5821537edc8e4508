"""docs/plugins/registry-stores.md, built as a reader would: every ```console block runs, in page order, in one
PluginVenv (tests/kits/plugin_venv.py).

Convention: a `pip ...` line runs at the checkout root (the page says "from the root of an agentenv-local
checkout"); every other line runs in one fresh project folder, tmp_path/project (a scratch subfolder, never /tmp
itself; the page's `../second` is tmp_path/second), with `$CHECKOUT` set to the checkout root (the page says so)
and HOME set to tmp_path/home, so the default CAS root (~/.cache/agentenv-cas) is the test's own. A block must
exit 0, unless the marker before it says `<!-- exit: N -->`; any other marker fails the test (every block of this
page runs). Each output line a block shows must appear in what its commands printed (compared with runs of spaces
collapsed; a shown line may be part of a printed one, which adds run ids, durations and the root's path). Its
```python excerpts are the package's real code, verbatim, and its first ```toml excerpt the package's real entry
points.
"""

from __future__ import annotations

import re
from pathlib import Path

from kits.plugin_venv import PLUGINS, ROOT, PluginVenv, console_blocks, run_plugin_page

PAGE = ROOT / "docs" / "plugins" / "registry-stores.md"
FOLDER = PLUGINS / "cas-store"


def test_the_excerpts_are_the_packages_code() -> None:
    text = PAGE.read_text()
    code = "\n".join(p.read_text() for p in (FOLDER / "src").rglob("*.py"))
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 3
    for block in blocks:
        for line in block.splitlines():
            assert line in code, f"the page shows {line!r}, which is not in {FOLDER / 'src'}"
    pyproject = (FOLDER / "pyproject.toml").read_text()
    entry_points = re.findall(r"```toml\n(.*?)```", text, re.S)[0]
    for line in entry_points.splitlines():
        assert line in pyproject, f"the page shows {line!r}, which is not in the package's pyproject.toml"


def test_the_page_runs(tmp_path: Path) -> None:
    text = PAGE.read_text()
    blocks = console_blocks(text)
    handbook = "agentenv run $CHECKOUT/examples/plugins/cas-store/handbook"
    assert [c for _n, _m, cs in blocks for c in cs] == [
        "pip install examples/plugins/cas-store", "agentenv plugin show agentenv-cas-store", handbook,
        "agentenv store migrate-objects --to cas --dry-run", "agentenv store migrate-objects --to cas",
        handbook, "agentenv cas info",
        "mkdir -p ../second/.agentenv && printf '[store]\\nobjects = \"cas\"\\n' > ../second/.agentenv/config.toml",
        f"cd ../second && {handbook}", "agentenv cas info",
        "agentenv store cleanup-objects --store local --yes",
        "rm -rf ../second", "agentenv cas gc --dry-run", "agentenv cas gc",
        "AGENTENV_STORE_OBJECTS=s3 agentenv runs list"]
    venv = PluginVenv.create(tmp_path / "venv")
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    home.mkdir()
    run_plugin_page(venv, text, project, home=home)
    assert venv.has("agentenv-cas-store")
    blobs = sorted(p for p in (home / ".cache" / "agentenv-cas" / "blobs").glob("*/*"))
    assert len(blobs) == 2
    assert not (tmp_path / "second").exists()
    assert not any((project / ".agentenv" / "objects" / "sha256").iterdir())
