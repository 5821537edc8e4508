"""For every test: no AGENTENV_* setting of the developer's shell leaks in. Tests find their project
from tmp_path (and subprocesses inherit the cleaned environment).

Runs use the `process` sandbox provider unless a test says otherwise: the default (`auto`) would pick
Podman wherever it answers, which the Podman tests under tests/sandboxes/podman ask for explicitly.

This folder is on sys.path, so every test imports the shared kits as `from kits.<area> import ...` (tests/kits/).

The suite runs in parallel (pytest-xdist, `--dist loadgroup`, docs/testing.md): tests that share something
costly or machine-wide run on one worker, in a group named here (`pytest_collection_modifyitems`)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

HERE = str(Path(__file__).resolve().parent)
# Read before the autouse fixture below clears AGENTENV_*: .ci/run sets it so Podman tests fail, not skip.
REQUIRE_PODMAN = os.environ.get("AGENTENV_REQUIRE_PODMAN") == "1"
if HERE not in sys.path:
    sys.path.insert(0, HERE)


def _stray_project_above(folder: Path) -> Path | None:
    """A `.agentenv/` in a parent of the tests' temporary folders: every test project without its own would
    find it walking up, and the tests would share one store and hub."""
    for parent in folder.resolve().parents:
        if (parent / ".agentenv").is_dir():
            return parent / ".agentenv"
    return None


# Machine-wide things some tests start and stop, so every test of theirs runs on one worker: Ray (`ray stop
# --force` ends every Ray process on the machine, and a Ray driver whose cluster went away ends its own process: a
# pytest worker).
MACHINE_WIDE_GROUPS = {
    "tests/executors/": "ray",
}
# Modules whose per-session fixtures are safe and cheap to make once per worker, so their slow tests spread over
# the workers: the coding-CLI agent images are built under a machine-wide lock (sandboxes/podman/images.py
# build_lock) by the first worker that needs one, and found by their tag by the others.
SPREAD_OVER_WORKERS = {
    "tests/agents_cli/test_cli_agent_images.py",
}


def _shares_a_fixture(item: pytest.Item) -> bool:
    """Whether the test uses a module-scoped fixture, or a session-scoped one its own module defines: made once
    per worker, so the module's tests stay on one worker and make it once."""
    info = getattr(item, "_fixtureinfo", None)
    for defs in (info.name2fixturedefs.values() if info is not None else ()):
        last = defs[-1]
        if last.scope == "module" or (last.scope == "session" and last.baseid.endswith(".py")):
            return True
    return False


# What a test needs beyond Python, by folder; `scripts/check.sh --quick` leaves these out (`-m "not podman and not
# agent_cli and not ray"`). A test anywhere that uses the `podman_base_image` fixture is marked `podman` too.
NEEDS_BY_FOLDER = {
    "tests/sandboxes/podman/": "podman",
    "tests/agents_cli/": "agent_cli",
    "tests/executors/": "ray",
}


def _mark_needs(item: pytest.Item, path: str) -> None:
    for prefix, need in NEEDS_BY_FOLDER.items():
        if path.startswith(prefix):
            item.add_marker(need)
    if "podman_base_image" in getattr(item, "fixturenames", ()) and item.get_closest_marker("podman") is None:
        item.add_marker("podman")


# Seconds each test took in a full run (setup, call and teardown; by scripts/test_durations.py from a timeline,
# AGENTENV_TEST_TIMELINE below): for --quick, and with TESTS_LONGEST_FIRST=1 to hand the longest work out first (off
# by default: ciU, longest first, took 1,404 s of pytest against ciT's 1,303 s in xdist's own order, the heavy
# tests all starting together). A test not listed counts as DEFAULT_S.
DURATIONS_FILE = Path(__file__).parent / "durations.json"
DEFAULT_S = 1.0


# `scripts/check.sh --quick` (the inner loop) also leaves out the tests that took longer than this in the last
# measured run (tests/durations.json): a kill -9 and resume, a Ray cluster, a coding CLI in Podman. CI runs all.
QUICK_MAX_S = 2.0


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--quick", action="store_true",
                     help=f"leave out the tests that took over {QUICK_MAX_S:.0f} s in tests/durations.json's run")


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the groups into the test ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--quick"):
        _leave_out_the_slow(config, items)
    groups: dict[str, str | None] = {}
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        _mark_needs(item, path)
        group = next((name for prefix, name in MACHINE_WIDE_GROUPS.items() if path.startswith(prefix)), None)
        if group is None and path not in SPREAD_OVER_WORKERS and _shares_a_fixture(item):
            group = path
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
        groups[item.nodeid] = group
    if os.environ.get("TESTS_LONGEST_FIRST") == "1":
        _longest_first(items, groups)


def _recorded_seconds() -> dict[str, float]:
    import json

    try:
        return {str(k): float(v) for k, v in json.loads(DURATIONS_FILE.read_text()).items()}
    except (OSError, ValueError, TypeError, AttributeError):
        return {}


def _leave_out_the_slow(config: pytest.Config, items: list[pytest.Item]) -> None:
    seconds = _recorded_seconds()
    slow = [item for item in items if seconds.get(item.nodeid, 0.0) > QUICK_MAX_S]
    if slow:
        config.hook.pytest_deselected(items=slow)
        left = set(map(id, slow))
        items[:] = [item for item in items if id(item) not in left]


def _longest_first(items: list[pytest.Item], groups: dict[str, str | None]) -> None:
    """Order the work so the longest goes out first: a group (one worker's, in one piece) or a lone test, by its
    seconds in the last measured run. xdist hands out work in this order as workers come free, so a long group
    found last no longer runs on one worker while the others wait (the tail of a run)."""
    seconds = _recorded_seconds()
    cost: dict[str, float] = {}
    for item in items:
        unit = groups[item.nodeid] or item.nodeid
        cost[unit] = cost.get(unit, 0.0) + float(seconds.get(item.nodeid, DEFAULT_S))
    first_seen = {unit: index for index, unit in reversed(list(enumerate(groups[i.nodeid] or i.nodeid
                                                                          for i in items)))}
    items.sort(key=lambda i: (-cost[groups[i.nodeid] or i.nodeid], first_seen[groups[i.nodeid] or i.nodeid]))


# AGENTENV_TEST_TIMELINE=FILE: each test's worker, start and end appended to FILE as JSON lines (by the controller,
# from the workers' reports), to see how the workers' time is spent (docs/testing.md: the tail of a run).
TIMELINE = os.environ.get("AGENTENV_TEST_TIMELINE")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if not TIMELINE or not hasattr(report, "node"):  # `node`: the worker a report came from (on the controller)
        return
    import json

    row = {"worker": report.node.gateway.id, "test": report.nodeid, "when": report.when,
           "start": report.start, "stop": report.stop}
    with open(TIMELINE, "a") as out:
        out.write(json.dumps(row) + "\n")


@pytest.fixture(scope="session", autouse=True)
def _session_leaves_nothing(tmp_path_factory):
    """At the end of the session (of each worker, run in parallel): stop the Podman services one-shot commands
    left running (by design: each serves the project's next command, then exits by itself after its idle time),
    then fail on anything else a test left: threads, processes, hubs, listening ports, containers
    (tests/kits/leaks.py). Whatever is found is cleaned up too, so the machine is left clean."""
    from kits.leaks import Snapshot, left_behind

    before = Snapshot()
    yield
    from agentenv_local import script_worker

    script_worker.stop()  # this process's warm script worker lives as long as the process, by design
    from kits import warm_cli

    warm_cli.stop()  # so does the warm process the test kits fork `agentenv` commands from
    folder = tmp_path_factory.getbasetemp()
    if shutil.which("podman") is not None:
        from kits.podman import clean_up_podman_under, stop_podman_services_under

        stop_podman_services_under(folder)
    leaks = left_behind(before, folder)
    if shutil.which("podman") is not None:
        clean_up_podman_under(folder)
    assert not leaks, "tests left these behind (find the test that started each):\n  " + "\n  ".join(leaks)


@pytest.fixture(scope="session", autouse=True)
def _tests_share_no_project(tmp_path_factory):
    stray = _stray_project_above(tmp_path_factory.getbasetemp())
    if stray is not None:
        pytest.exit(f"{stray} makes every test project share one store: remove it (after `agentenv down` there)",
                    returncode=3)
    yield
    left = _stray_project_above(tmp_path_factory.getbasetemp())
    assert left is None, f"a test left {left} above the temporary folders: it must make its project in tmp_path"


@pytest.fixture(autouse=True)
def _model_proxies_closed(monkeypatch):
    """A coding-CLI agent starts its model proxy (a server thread and a loopback port) on its first turn and closes
    it in `shutdown()`, which the agent's server calls when it stops. Tests that make an agent and never shut it
    down left one proxy each running for the rest of the worker's life (22 of them in a full run): each one a
    test started is closed at that test's end."""
    from agentenv_local.agents.cli_agents.model_proxy import ModelProxy

    made: list[ModelProxy] = []
    construct = ModelProxy.__init__

    def recorded(self: ModelProxy) -> None:
        construct(self)
        made.append(self)

    monkeypatch.setattr(ModelProxy, "__init__", recorded)
    yield
    for proxy in made:
        proxy.close()


@pytest.fixture(autouse=True)
def _no_agentenv_settings(monkeypatch):
    for key in list(os.environ):
        if key.startswith("AGENTENV_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("AGENTENV_SANDBOX_DEFAULT", "process")


@pytest.fixture(scope="session")
def podman_base_image():
    """The base image ref, with Podman set up (base image built once, machine fixes probed)."""
    if shutil.which("podman") is None:
        if REQUIRE_PODMAN:
            pytest.fail("AGENTENV_REQUIRE_PODMAN=1 but podman is not installed (scripts/setup.sh --test installs it)")
        pytest.skip("podman is not installed (scripts/setup.sh --test installs it)")
    from sandboxes.podman import images
    from sandboxes.podman.engine import auto_conf_path, configure

    base = images.ensure_base_image({})
    marker = auto_conf_path().with_suffix(".probed")
    if not marker.exists():
        configure(base, {})
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text("{}")
    return base


@pytest.fixture
def hub(tmp_path):
    """This test process as the hub (an InProcessHub, tests/kits/hub.py) of a
    project in tmp_path/proj: a real DuckDB file and the real runner."""
    from kits.hub import InProcessHub

    project = tmp_path / "proj"
    project.mkdir()
    h = InProcessHub(project)
    yield h
    h.close()
