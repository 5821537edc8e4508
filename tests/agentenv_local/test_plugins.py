"""Plugins end to end: a fake third-party distribution installed for real, seen by `agentenv`.

The fake plugin (tests/fixtures/fake_plugin) is pip-installed with `--target` into a temporary
site dir; `agentenv` runs in a subprocess with that dir on PYTHONPATH, so importlib.metadata
discovers it exactly as it would a plugin installed into the venv. Building needs no network:
`--no-build-isolation` uses the hatchling from our own venv (the `test` extra).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agentenv_local import __version__
from agentenv_local.plugins import PluginRegistry
from agentenv_local.tasks.context import StepContext, new_state
from agentenv_local.tasks.step import Step

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "fake_plugin"
FAKE_DIST = "agentenv-fake-plugin"
FAKE_VERSION = "0.3.1"


def pip_install_target(source: Path, target: Path) -> None:
    cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
           "--disable-pip-version-check", "--quiet", "--target", str(target), str(source)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        pytest.fail(f"could not install {source} (is hatchling installed? pip install -e '.[test]'):\n"
                    f"{done.stdout}\n{done.stderr}")


def entry_points_of(site: Path, dist_prefix: str) -> str:
    (dist_info,) = site.glob(f"{dist_prefix}-*.dist-info")
    return (dist_info / "entry_points.txt").read_text()


@pytest.fixture(scope="session")
def fake_site(tmp_path_factory) -> Path:
    site = tmp_path_factory.mktemp("fake-plugin") / "site"
    pip_install_target(FIXTURE, site)
    eps = entry_points_of(site, "agentenv_fake_plugin")
    assert "[agentenv_local.task_steps]" in eps and "fake_echo" in eps and "fake-hello" in eps
    return site


RIVAL_PYPROJECT = """
[build-system]
requires = ["hatchling>=1.25"]
build-backend = "hatchling.build"

[project]
name = "agentenv-fake-rival"
version = "2.0.0"

[project.entry-points."agentenv_local.task_steps"]
fake_echo = "agentenv_fake_rival:RivalEcho"
review = "agentenv_fake_rival:RivalReview"

[project.entry-points."agentenv_local.cli"]
rival-not-a-command = "agentenv_fake_rival:not_a_command"

[tool.hatch.build.targets.wheel]
packages = ["agentenv_fake_rival"]
"""

RIVAL_MODULE = """
from typing import ClassVar

from agentenv_local.tasks.step import Step


class RivalEcho(Step):
    type: ClassVar[str] = "fake_echo"


class RivalReview(Step):
    type: ClassVar[str] = "review"


def not_a_command():  # registered as a CLI command, but a plain function
    pass
"""


@pytest.fixture(scope="session")
def rival_site(tmp_path_factory) -> Path:
    """A second distribution claiming the fake plugin's `fake_echo` and the built-in `review`,
    and registering a CLI "command" that is not a click command."""
    root = tmp_path_factory.mktemp("rival-plugin")
    source = root / "src"
    (source / "agentenv_fake_rival").mkdir(parents=True)
    (source / "pyproject.toml").write_text(textwrap.dedent(RIVAL_PYPROJECT))
    (source / "agentenv_fake_rival" / "__init__.py").write_text(textwrap.dedent(RIVAL_MODULE))
    site = root / "site"
    pip_install_target(source, site)
    assert "review = agentenv_fake_rival:RivalReview" in entry_points_of(site, "agentenv_fake_rival")
    return site


def agentenv(*args: str, sites: tuple[Path, ...] = (), cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    paths = [str(s) for s in sites] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    env.pop("PYTHONPATH", None)
    if paths:
        env["PYTHONPATH"] = os.pathsep.join(paths)
    return subprocess.run([sys.executable, "-m", "agentenv_local.cli.main", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def plugin_json(*sites: Path, extra: tuple[str, ...] = ()) -> dict:
    done = agentenv("plugin", "list", "--json", *extra, sites=sites)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def contributions(report: dict, dist: str) -> dict[tuple[str, str], dict]:
    (plugin,) = [p for p in report["plugins"] if p["name"] == dist]
    return {(c["group"], c["name"]): c for c in plugin["contributions"]}


# -- the CLI, in a subprocess -------------------------------------------------------------

def test_plugin_list_json_shows_the_fake_plugin_and_the_builtins(fake_site):
    report = plugin_json(fake_site)
    assert report["format_version"] == 1
    assert report["agentenv"] == {"version": __version__, "python": sys.prefix}

    (fake,) = [p for p in report["plugins"] if p["name"] == FAKE_DIST]
    assert fake["version"] == FAKE_VERSION
    mine = contributions(report, FAKE_DIST)
    echo = mine[("task_steps", "fake_echo")]
    assert echo == {"group": "task_steps", "name": "fake_echo", "value": "agentenv_fake_plugin.steps:FakeEchoStep",
                    "status": "active", "reason": None, "builtin": False}
    broken = mine[("task_steps", "fake_broken")]
    assert broken["status"] == "failed" and not broken["builtin"]
    assert broken["reason"].startswith("ImportError:") and "unobtainium" in broken["reason"]
    assert mine[("cli", "fake-hello")]["status"] == "active"
    assert mine[("agents", "fake-shout")]["status"] == "active"
    assert mine[("cli", "fake-broken")]["status"] == "failed"

    builtins = contributions(report, "agentenv-local")
    for key in [("task_steps", "verify_sandbox"), ("task_steps", "review"), ("sandbox_providers", "process"),
                ("stores", "duckdb")]:
        assert builtins[key]["builtin"] is True
        assert builtins[key]["status"] == "active", builtins[key]
    assert all(c["builtin"] for c in builtins.values())


def test_plugin_list_table(fake_site):
    done = agentenv("plugin", "list", sites=(fake_site,))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"agentenv {__version__} · python at {sys.prefix}"
    header = next(line for line in lines if line.startswith("DISTRIBUTION"))
    assert header.split() == ["DISTRIBUTION", "VERSION", "GROUP", "NAME", "STATUS", "REASON"]
    broken = next(line for line in lines if "fake_broken" in line)
    assert broken.split()[:5] == [FAKE_DIST, FAKE_VERSION, "task_steps", "fake_broken", "failed"]
    assert "ImportError: agentenv_fake_plugin.broken needs the 'unobtainium' package" in broken
    verify = next(line for line in lines if " verify_sandbox " in line)
    assert verify.startswith("agentenv-local (built-in)") and " active" in verify
    assert any(" process " in line and "(built-in)" in line for line in lines)


def test_no_load_lists_without_importing(fake_site):
    mine = contributions(plugin_json(fake_site, extra=("--no-load",)), FAKE_DIST)
    assert mine[("task_steps", "fake_echo")]["status"] == "unloaded"
    assert mine[("task_steps", "fake_broken")]["status"] == "unloaded"


def test_the_plugin_cli_command_runs_through_agentenv(fake_site, tmp_path):
    done = agentenv("fake-hello", "--name", "tests", sites=(fake_site,), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "hello tests from agentenv-fake-plugin"


def test_a_plugin_agent_is_named_like_a_built_in_and_answers_in_a_run(fake_site, tmp_path):
    listed = agentenv("agent", "list", "--json", sites=(fake_site,), cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    rows = {r["id"]: r for r in json.loads(listed.stdout)}
    assert rows["fake-shout"]["kind"] == "plugin (agentenv_fake_plugin.agent:ShoutAgent)"
    assert rows["scripted"]["kind"] == "built-in"
    bundle = tmp_path / "shout"
    (bundle / "tasks").mkdir(parents=True)
    steps = []
    for runtime in ("in_hub", "subprocess"):  # the hub imports it, or a process of its own does
        steps += [{"id": f"agent_{runtime}", "type": "deploy_agent", "a2a_agent_id": "fake-shout",
                   "agent_name": f"loud_{runtime}", "runtime": runtime},
                  {"id": f"ask_{runtime}", "type": "prompt_agent", "agent_name": f"loud_{runtime}",
                   "prompt": f"quiet please, {runtime}", "depends_on": [f"agent_{runtime}"]}]
    (bundle / "tasks" / "shout.json").write_text(json.dumps(steps))
    done = agentenv("run", str(bundle), "--json", sites=(fake_site,), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    answers = sorted(r["response"] for r in json.loads(done.stdout)[0]["context"]["prompt_responses"])
    assert answers == ["QUIET PLEASE, IN_HUB", "QUIET PLEASE, SUBPROCESS"]


def test_a_broken_plugin_does_not_break_help(fake_site, tmp_path):
    done = agentenv("--help", sites=(fake_site,), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "fake-hello" in done.stdout and "Say hello from the fake plugin." in done.stdout
    assert "fake-broken" in done.stdout and "plugin failed to load" in done.stdout
    assert "plugin" in done.stdout.split() and "run" in done.stdout.split()


def test_a_broken_plugin_command_fails_with_a_reason_not_a_traceback(fake_site, tmp_path):
    done = agentenv("fake-broken", sites=(fake_site,), cwd=tmp_path)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "'fake-broken' failed to load" in done.stderr and "unobtainium" in done.stderr


def test_plugin_check_fails_because_of_the_broken_contributions(fake_site):
    done = agentenv("plugin", "check", sites=(fake_site,))
    assert done.returncode == 1, done.stdout
    assert "fake_broken" in done.stdout and "fake-broken" in done.stdout
    assert "ImportError" in done.stdout
    assert "'fake_echo'" not in done.stdout and "fake-hello" not in done.stdout
    assert "2 problems" in done.stdout


def test_plugin_check_passes_with_only_the_builtins(tmp_path):
    done = agentenv("plugin", "check", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("ok: ") and "all active" in done.stdout


def test_name_conflicts_and_builtin_names(fake_site, rival_site):
    report = plugin_json(fake_site, rival_site)
    mine = contributions(report, FAKE_DIST)
    rival = contributions(report, "agentenv-fake-rival")
    assert mine[("task_steps", "fake_echo")]["status"] == "conflict"
    assert "agentenv-fake-rival" in mine[("task_steps", "fake_echo")]["reason"]
    assert rival[("task_steps", "fake_echo")]["status"] == "conflict"
    assert FAKE_DIST in rival[("task_steps", "fake_echo")]["reason"]
    blocked = rival[("task_steps", "review")]
    assert blocked["status"] == "blocked" and "built-in" in blocked["reason"]
    assert contributions(report, "agentenv-local")[("task_steps", "review")]["status"] == "active"

    done = agentenv("plugin", "check", sites=(fake_site, rival_site))
    assert done.returncode == 1
    assert "conflict: task_steps 'fake_echo'" in done.stdout and "blocked: task_steps 'review'" in done.stdout


def test_a_cli_contribution_that_is_not_a_click_command_does_not_break_help(rival_site, tmp_path):
    done = agentenv("--help", sites=(rival_site,), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "rival-not-a-command" in done.stdout
    done = agentenv("rival-not-a-command", sites=(rival_site,), cwd=tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "not a click command" in done.stderr


# -- the registry, in this process --------------------------------------------------------

@pytest.fixture
def on_sys_path():
    """Put site dirs on sys.path for one test; restore sys.path and sys.modules afterwards."""
    saved_path = list(sys.path)
    saved_modules = set(sys.modules)

    def add(*sites: Path) -> None:
        sys.path[:0] = [str(s) for s in sites]
        importlib.invalidate_caches()

    yield add
    sys.path[:] = saved_path
    for name in set(sys.modules) - saved_modules:
        if name.startswith(("agentenv_fake_plugin", "agentenv_fake_rival")):
            del sys.modules[name]
    importlib.invalidate_caches()


def test_registry_resolves_the_fake_step_to_a_step_subclass(fake_site, on_sys_path):
    on_sys_path(fake_site)
    reg = PluginRegistry()
    cls = reg.get("task_steps", "fake_echo")
    assert isinstance(cls, type) and issubclass(cls, Step) and cls.type == "fake_echo"
    c = reg.contributions("task_steps")["fake_echo"]
    assert (c.distribution, c.version, c.status, c.builtin) == (FAKE_DIST, FAKE_VERSION, "active", False)

    step = cls(id="say", text="hi there")
    ctx = StepContext(services=None, run_id="r1", step=step, state=new_state())
    asyncio.run(step.execute(ctx))
    asyncio.run(cls(id="again", text="twice").execute(ctx))
    assert ctx.metadata["fake_echo"] == ["hi there", "twice"]
    assert step.to_json()["type"] == "fake_echo"

    assert reg.get("task_steps", "fake_broken") is None
    assert "ImportError" in reg.failure("task_steps", "fake_broken")
    available = reg.available("task_steps")
    assert "fake_echo" in available and "fake_broken" not in available and "verify_sandbox" in available


def test_registry_disables_both_claimants_and_never_replaces_a_builtin(fake_site, rival_site, on_sys_path):
    on_sys_path(fake_site, rival_site)
    reg = PluginRegistry()
    assert reg.get("task_steps", "fake_echo") is None
    assert "also claimed by agentenv-fake-rival" in reg.failure("task_steps", f"{FAKE_DIST}:fake_echo")
    review = reg.get("task_steps", "review")
    assert review is not None and review.__module__ == "agentenv_local.steps.review"
    assert reg.contributions("task_steps")["agentenv-fake-rival:review"].status == "blocked"


def test_code_registration_wins_over_entry_points():
    reg = PluginRegistry()

    class Mine(Step):
        type = "mine"

    reg.register("task_steps", "verify_sandbox", Mine)
    assert reg.get("task_steps", "verify_sandbox") is Mine
    assert reg.available("task_steps")["verify_sandbox"] is Mine
    with pytest.raises(KeyError, match="unknown plugin group"):
        reg.contributions("nope")
