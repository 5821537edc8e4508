"""A project's own step types (`[task_steps] impls` in its config) are known to `agentenv run`, which parses
the bundle before it connects to the hub, and steps see the run's options typed (`ctx.options`), after a
resume too: real `agentenv` subprocesses, the step type a module on PYTHONPATH."""

from __future__ import annotations

import json

STAMP_MODULE = '''
from pathlib import Path
from typing import ClassVar

from agentenv_local.errors import StepError
from agentenv_local.tasks.step import Step


class Stamp(Step):
    """Records the options it sees; fails the first time when given a marker path (to be resumed)."""

    type: ClassVar[str] = "stamp_options"
    marker: str = ""

    async def execute(self, ctx) -> None:
        o = ctx.options
        ctx.metadata["stamp"] = {"sandbox": o.sandbox, "agent": o.agent, "keep": o.keep}
        if self.marker and not Path(self.marker).exists():
            Path(self.marker).write_text("failed once")
            raise StepError("fails the first time")
'''


def _project_with_stamp(project, monkeypatch, marker: str = "") -> None:
    modules = project.root / "mods"
    modules.mkdir()
    (modules / "stampsteps.py").write_text(STAMP_MODULE)
    monkeypatch.setenv("PYTHONPATH", str(modules))
    project.write(".agentenv/config.toml", '[task_steps]\nimpls = ["stampsteps:Stamp"]\n')
    project.write("b/README.md", "# b\n")
    project.write("b/tasks/t.json", json.dumps([
        {"id": "box", "type": "deploy_sandbox", "sandbox_name": "box", "sandbox_type": "no-such-provider"},
        {"id": "stamp", "type": "stamp_options", "marker": marker}]))


def test_a_config_declared_step_type_runs_and_sees_the_run_options(project, monkeypatch):
    _project_with_stamp(project, monkeypatch)
    # Parsed before any hub registered the config's step types:
    project.cli("run", "./b", "--dry-run", "--sandbox", "process")
    [run] = project.json("run", "./b", "--sandbox", "process", "--agent", "scripted")
    assert run["status"] == "passed", run
    metadata = run["context"]["metadata"]
    assert metadata["stamp"] == {"sandbox": "process", "agent": "scripted", "keep": False}
    assert metadata["user_overrides"] == {"sandbox": "process", "agent": "scripted"}  # stored as before


def test_resume_rebuilds_the_run_options(project, monkeypatch):
    marker = project.root / "failed-once"
    _project_with_stamp(project, monkeypatch, marker=str(marker))
    [first] = project.json("run", "./b", "--sandbox", "process", "--keep", code=1)
    assert first["status"] in ("failed", "error") and marker.exists(), first

    project.cli("runs", "resume", first["run_id"])
    resumed = project.json("runs", "show", first["run_id"])
    assert resumed["status"] == "passed", resumed
    assert resumed["context"]["metadata"]["stamp"] == {"sandbox": "process", "agent": None, "keep": True}
    assert [s["sandbox_type"] for s in resumed["context"]["deployed_sandboxes"]] == ["process"]
