"""docs/plugins/env-types.md, built as a reader would: every ```console block runs, in page order, in one PluginVenv
(tests/kits/plugin_venv.py), and every code excerpt is the package's real code.

Convention: a `pip ...` line runs at the checkout root (the page says "From the root of an agentenv-local
checkout"); every other line runs in one fresh project folder (a scratch subfolder of pytest's basetemp, never /tmp
itself) with `$CHECKOUT` set to the checkout root (the page says so). Each output line a block shows must appear
in what its commands printed (the page shows no durations or run ids). No block is skipped.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from kits.plugin_venv import PLUGINS, ROOT, PluginVenv, console_blocks

PAGE = ROOT / "docs" / "plugins" / "env-types.md"
FOLDER = PLUGINS / "sqlite-app"


def shown_output(text: str) -> dict[int, list[str]]:
    """The output lines of each console block (every line but the `$ ` ones), by the block's line number."""
    lines, out = text.splitlines(), {}
    for number, _marker, _commands in console_blocks(text):
        end = next(j for j in range(number, len(lines)) if lines[j].strip() == "```")
        out[number] = [ln for ln in lines[number:end] if ln.strip() and not ln.startswith("$ ")]
    return out


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
    outputs = shown_output(text)
    venv = PluginVenv.create(tmp_path / "venv")
    project = tmp_path / "project"
    project.mkdir()
    for number, marker, commands in blocks:
        assert not marker, f"line {number}: every block of this page runs"
        printed = ""
        for command in commands:
            if command.startswith("pip "):
                printed += venv.shell(command, cwd=ROOT).stdout
            else:
                printed += venv.shell(f"CHECKOUT={shlex.quote(str(ROOT))}; {command}", cwd=project).stdout
        for line in outputs[number]:
            assert line in printed, f"line {number}: {line!r} not in\n{printed}"
    assert venv.has("agentenv-sqlite-app")
