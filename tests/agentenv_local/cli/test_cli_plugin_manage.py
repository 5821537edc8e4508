"""`agentenv plugin show|check --json|add|remove` through a real interpreter and its real pip.

The fake plugin (tests/fixtures/fake_plugin) is built into a wheel offline and added to, then removed from, a
throwaway venv that sees agentenv-local through a .pth file, so the project's own venv is never changed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = ROOT / "tests" / "fixtures" / "fake_plugin"
MAIN = "from agentenv_local.cli.main import main; main()"


class Env:
    def __init__(self, python: Path, site: Path, wheel: Path) -> None:
        self.python, self.site, self.wheel = python, site, wheel

    def agentenv(self, *args: str, code: int = 0) -> subprocess.CompletedProcess:
        proc = subprocess.run([str(self.python), "-c", MAIN, *args], capture_output=True, text=True, timeout=300,
                              check=False, stdin=subprocess.DEVNULL, cwd=self.site.parent)
        shown = f"$ agentenv {' '.join(args)}\n{proc.stdout}{proc.stderr}"
        assert "Traceback" not in proc.stdout + proc.stderr, shown
        assert proc.returncode == code, shown
        return proc

    def has_fake(self) -> bool:
        return any(self.site.glob("agentenv_fake_plugin-*.dist-info"))


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> Env:
    root = tmp_path_factory.mktemp("plugin-venv")
    subprocess.run([sys.executable, "-m", "venv", str(root / "venv")], check=True, timeout=300)
    python = root / "venv" / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    # agentenv-local (editable) and its dependencies, from the project's venv, after the new venv's own packages
    (site / "zz_agentenv_local.pth").write_text(f"{ROOT}\n{sysconfig.get_paths()['purelib']}\n")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                    "--no-index", "-w", str(root / "wheels"), str(FIXTURE)], check=True, timeout=300)
    (wheel,) = (root / "wheels").glob("agentenv_fake_plugin-*.whl")
    return Env(python, site, wheel)


def test_add_shows_then_installs_and_loads_show_and_check_report_it_remove_takes_it_away(env):
    dry = env.agentenv("plugin", "add", "--dry-run", str(env.wheel)).stdout
    assert f"pip of {env.python} would install:" in dry and "  agentenv-fake-plugin 0.3.1 (new)" in dry
    assert "Dry run: nothing was installed." in dry and not env.has_fake()
    err = env.agentenv("plugin", "add", str(env.wheel), code=1).stderr  # no terminal to ask on
    assert "not asking: stdin is not a terminal; nothing was installed" in err and "--yes" in err
    assert not env.has_fake()

    added = env.agentenv("plugin", "add", "--yes", str(env.wheel), code=1).stdout  # it ships a broken step
    assert env.has_fake() and "Installed agentenv-fake-plugin 0.3.1." in added
    assert "2 contribution(s) do not load" in added and "agentenv plugin remove agentenv-fake-plugin" in added

    shown = json.loads(env.agentenv("plugin", "show", "Agentenv_Fake_Plugin", "--json").stdout)
    assert (shown["name"], shown["version"], shown["builtin"]) == ("agentenv-fake-plugin", "0.3.1", False)
    steps = {s["name"]: s for s in shown["groups"]["task_steps"]}
    assert steps["fake_echo"]["status"] == "active"
    assert steps["fake_broken"]["status"] == "failed" and "unobtainium" in steps["fake_broken"]["reason"]
    assert sorted(shown["groups"]) == ["agents", "cli", "env_providers", "env_types", "task_steps"]
    unloaded = json.loads(env.agentenv("plugin", "show", "agentenv-fake-plugin", "--json", "--no-load").stdout)
    assert {s["status"] for g in unloaded["groups"].values() for s in g} == {"unloaded"}
    text = env.agentenv("plugin", "show", "agentenv-fake-plugin").stdout
    assert "7 contribution(s) in 5 group(s), 2 not loading:" in text

    check = json.loads(env.agentenv("plugin", "check", "--json", code=1).stdout)
    assert check["ok"] is False
    assert {"fake_broken", "fake-broken"} <= {p["name"] for p in check["problems"]}

    dry = env.agentenv("plugin", "remove", "agentenv-fake-plugin", "--dry-run").stdout
    assert "agentenv-fake-plugin 0.3.1: task_steps fake_broken, task_steps fake_echo" in dry
    assert "Dry run: nothing was removed." in dry and env.has_fake()
    assert "Removed agentenv-fake-plugin 0.3.1." in env.agentenv("plugin", "remove", "agentenv_fake_plugin",
                                                                   "-y").stdout
    assert not env.has_fake()
    err = env.agentenv("plugin", "show", "agentenv-fake-plugin", code=1).stderr
    assert "no installed distribution named 'agentenv-fake-plugin'" in err


def test_remove_refuses_agentenv_itself_and_what_is_not_installed(env):
    err = env.agentenv("plugin", "remove", "AgentEnv_Local", "no-such-dist", "--yes", code=1).stderr
    assert "2 package(s) cannot be removed; nothing was removed" in err
    assert "AgentEnv_Local: that is agentenv itself" in err and "no-such-dist: not installed" in err
    err = env.agentenv("plugin", "remove", "click", "--dry-run", code=1).stderr
    assert "click: required by" in err and "agentenv-local" in err and "--force" in err
    shown = json.loads(env.agentenv("plugin", "show", "agentenv-local", "--json", "--no-load").stdout)
    assert shown["builtin"] is True and "run" in {c["name"] for c in shown["groups"]["cli"]}


def test_add_of_something_pip_cannot_install_changes_nothing(env, tmp_path):
    err = env.agentenv("plugin", "add", "--yes", str(tmp_path / "missing.whl"), code=1).stderr
    assert "pip cannot install" in err and "nothing was installed" in err
    assert not env.has_fake()
