"""agentenv_local/entry_points.py: the plugin registry's reader of installed distributions' entry points, which
must answer what importlib.metadata answers without importing it (~90 ms of every short command's CPU)."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from agentenv_local import entry_points
from agentenv_local.plugins import PluginRegistry


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _as_importlib_sees_them() -> set[tuple[str, str, str, str, str]]:
    seen: set[str] = set()
    out = set()
    for dist in metadata.distributions():
        key = _key(dist.metadata["Name"])
        if key in seen:
            continue
        seen.add(key)
        out |= {(ep.group, ep.name, ep.value, dist.metadata["Name"], dist.version) for ep in dist.entry_points}
    return out


def _distribution(site: Path, folder: str, name: str, version: str, entry_points_txt: str | None) -> None:
    info = site / folder
    info.mkdir(parents=True)
    header = "PKG-INFO" if folder.endswith(".egg-info") else "METADATA"
    (info / header).write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\nName: not-this\n")
    if entry_points_txt is not None:
        (info / "entry_points.txt").write_text(entry_points_txt)


def test_it_reads_what_importlib_metadata_reads_here():
    mine = {(p.group, p.name, p.value, p.distribution, p.version) for p in entry_points.scan()}
    assert mine == _as_importlib_sees_them()
    assert ("agentenv_local.task_steps", "prompt_agent") in {(p.group, p.name) for p in entry_points.scan()}


def test_the_first_copy_of_a_distribution_on_the_path_wins_as_in_importlib(tmp_path, monkeypatch):
    first, second = tmp_path / "first", tmp_path / "second"
    _distribution(first, "agentenv_probe_plugin-2.0.dist-info", "agentenv-probe-plugin", "2.0",
                  "# a comment\n[agentenv_local.task_steps]\nprobe = probe_new:Step\n\n[console_scripts]\n"
                  "probe = probe_new:main\n")
    _distribution(second, "agentenv_probe_plugin-1.0.dist-info", "agentenv-probe-plugin", "1.0",
                  "[agentenv_local.task_steps]\nprobe = probe_old:Step\n")
    _distribution(second, "legacy_probe-0.1.egg-info", "legacy-probe", "0.1",
                  "[agentenv_local.stores]\nlegacy = legacy_probe:Store\n")
    _distribution(second, "no_points-1.0.dist-info", "no-points", "1.0", None)
    monkeypatch.syspath_prepend(str(second))
    monkeypatch.syspath_prepend(str(first))
    importlib.invalidate_caches()

    mine = {(p.group, p.name, p.value, p.distribution, p.version) for p in entry_points.scan()}
    assert mine == _as_importlib_sees_them()
    assert ("agentenv_local.task_steps", "probe", "probe_new:Step", "agentenv-probe-plugin", "2.0") in mine
    assert ("agentenv_local.stores", "legacy", "legacy_probe:Store", "legacy-probe", "0.1") in mine
    assert not any(value == "probe_old:Step" for _, _, value, _, _ in mine)
    # a registry made now sees the new distribution (plugin.py's `plugin add` relies on it after an install)
    assert PluginRegistry().contributions("task_steps")["probe"].value == "probe_new:Step"


def test_a_command_never_imports_importlib_metadata(tmp_path):
    code = ("import sys\nfrom agentenv_local.cli.main import main\nsys.argv = ['agentenv', 'task', 'list']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print('importlib.metadata' in sys.modules, file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.stderr.strip().splitlines()[-1] == "False", done.stderr
