"""docs/plugins/env-providers.md, built as a reader would: every ```console block runs, in page order, in one
PluginVenv (tests/kits/plugin_venv.py).

Convention: a `pip ...` line runs at the checkout root (the page says "from the root of an agentenv-local
checkout"); every other line runs in one fresh project folder (a scratch subfolder, never /tmp itself), with
`$CHECKOUT` set to the checkout root (the page says so). A block's output lines must all appear in what its command
printed, durations and run ids aside. Its ```python and ```toml excerpts must be the package's real files, verbatim.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from kits.plugin_venv import PLUGINS, ROOT, PluginVenv, console_blocks

PAGE = ROOT / "docs" / "plugins" / "env-providers.md"
FOLDER = PLUGINS / "one-process"


def _outputs(text: str) -> dict[int, list[str]]:
    """Each console block's output lines (those after a `$ ` line), by the block's line number."""
    lines, out = text.splitlines(), {}
    for number, _marker, _commands in console_blocks(text):
        end = next(j for j in range(number, len(lines)) if lines[j].strip() == "```")
        out[number] = [ln for ln in lines[number:end] if ln.strip() and not ln.startswith("$ ")]
    return out


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
    outputs = _outputs(text)
    assert [c for _n, _m, cs in blocks for c in cs] == [
        "pip install examples/plugins/one-process", "agentenv plugin show agentenv-one-process",
        "agentenv run $CHECKOUT/examples/plugins/one-process/bundle --task desk"]
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
    assert venv.has("agentenv-one-process")
