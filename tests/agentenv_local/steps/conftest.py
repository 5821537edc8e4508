"""Shared helpers for step tests: a real DuckDB store in tmp_path, RunServices, StepContexts.

`run` (a StepRun) holds one run's state; `run.step({...})` builds a step from task JSON through
the real entry-point registry, `run.execute(step)` / `run.teardown(step)` run it.
"""

from __future__ import annotations

import asyncio

import pytest
from kits.config import DictConfig

from agentenv_local.artifacts import put_artifact
from agentenv_local.errors import ValidationError
from agentenv_local.paths import ProjectPaths
from agentenv_local.plugins import registry
from agentenv_local.tasks.context import StepContext, new_state
from agentenv_local.tasks.services import RunServices
from stores.database import DuckDBStore


class StepRun:
    def __init__(self, services: RunServices, run_id: str = "run-0001"):
        self.services = services
        self.run_id = run_id
        self.state = new_state()
        self.executed = []

    @property
    def store(self):
        return self.services.store

    @property
    def metadata(self) -> dict:
        return self.state["metadata"]

    def step(self, data: dict):
        """A step from its task-JSON form, the way the task loader builds one."""
        data = dict(data)
        cls = registry().get("task_steps", data.pop("type"))
        assert cls is not None
        step = cls.model_validate(data)
        return step

    def ctx(self, step) -> StepContext:
        return StepContext(self.services, self.run_id, step, self.state)

    def execute(self, step):
        problems = step.config_problems()
        if problems:
            raise ValidationError(f"step {step.id!r} is invalid", problems=problems)
        self.executed.append(step)
        asyncio.run(step.execute(self.ctx(step)))
        return self.state

    def teardown(self, step=None):
        for s in ([step] if step else list(reversed(self.executed))):
            asyncio.run(s.teardown(self.ctx(s)))

    def record(self, name: str = "sandbox") -> dict:
        return next(r for r in self.state["deployed_sandboxes"] if r["sandbox_name"] == name)

    def sandbox(self, name: str = "sandbox"):
        record = self.record(name)
        provider = self.services.sandbox_provider(record["sandbox_type"])
        return asyncio.run(provider.get(record["sandbox_id"]))

    def put_artifact(self, artifact_id: str, files: dict[str, bytes], **kw) -> dict:
        return put_artifact(self.store, artifact_id, files, **kw)


@pytest.fixture
def paths(tmp_path) -> ProjectPaths:
    return ProjectPaths(tmp_path / ".agentenv").ensure()


@pytest.fixture
def store(paths):
    s = DuckDBStore(paths.store_file, paths.objects_dir)
    yield s
    s.close()


@pytest.fixture
def config() -> DictConfig:
    # The process provider: these tests look into sandbox folders (the default, auto, may pick Podman).
    return DictConfig({"sandbox": {"default": "process"}})


@pytest.fixture
def services(store, config, paths) -> RunServices:
    return RunServices(store, config, paths)


@pytest.fixture
def run(services):
    r = StepRun(services)
    yield r
    r.teardown()  # never leave sandboxes (or their processes) behind


@pytest.fixture
def deployed(run):
    """A run with one process sandbox named "sandbox" deployed."""
    run.execute(run.step({"id": "sb", "type": "deploy_sandbox"}))
    return run
