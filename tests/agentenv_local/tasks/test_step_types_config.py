"""step_types(config) knows the step types a project's config declares (`[task_steps] impls`) because it is
given the config, not because some earlier call happened to load it: checked in a fresh interpreter (a
real subprocess, so the plugin registry starts empty) with the project as its working folder."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

PROBE = textwrap.dedent('''
    import json, sys
    from agentenv_local.config import load_config
    from agentenv_local.errors import ValidationError
    from agentenv_local.tasks.model import parse_task, step_types

    steps = [{"id": "s", "type": "project_step", "word": "hi"}]
    out = {"without": "project_step" in step_types(None)}
    try:
        parse_task(steps, "t")
    except ValidationError as exc:
        out["parse_without"] = exc.problems
    config = load_config()
    out["with"] = "project_step" in step_types(config)
    out["parsed"] = [s.type for s in parse_task(steps, "t", config=config).steps]
    print(json.dumps(out))
''')

MODULE = textwrap.dedent('''
    from typing import ClassVar

    from agentenv_local.tasks.step import Step


    class ProjectStep(Step):
        type: ClassVar[str] = "project_step"
        word: str

        async def execute(self, ctx) -> None:
            ctx.log(self.word)
''')


def test_a_config_declared_step_type_is_known_when_the_config_is_given(tmp_path: Path):
    (tmp_path / "projsteps.py").write_text(MODULE)
    (tmp_path / ".agentenv").mkdir()
    (tmp_path / ".agentenv" / "config.toml").write_text('[task_steps]\nimpls = ["projsteps:ProjectStep"]\n')
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path), "HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["without"] is False  # nothing loads the project's config behind the caller's back
    assert any("'project_step' is not a known step type" in p for p in out["parse_without"]), out
    assert out["with"] is True
    assert out["parsed"] == ["project_step"]


def test_a_task_imports_only_the_step_types_it_names():
    """Parsing a task imports the modules of the step types it names and no other (importing all 49 built-in types
    was a quarter of a one-shot `agentenv run hello`); an unknown type's error still lists every known name."""
    import json
    import subprocess
    import sys

    code = """
import json, sys
from agentenv_local.errors import ValidationError
from agentenv_local.tasks.model import parse_task
parse_task([{"id": "gate", "type": "review", "label": "ok?"}], "t")
try:
    parse_task([{"id": "x", "type": "no_such_type"}], "t")
except ValidationError as exc:
    problems = exc.problems
print(json.dumps({"loaded": sorted(m for m in sys.modules if m.startswith("agentenv_local.steps.")),
                  "problems": problems}))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    seen = json.loads(out.stdout)
    assert "agentenv_local.steps.review" in seen["loaded"]
    assert "agentenv_local.steps.build_mcp_cli" not in seen["loaded"]
    assert "agentenv_local.steps.agent_checks" not in seen["loaded"]
    assert "build_mcp_cli" in seen["problems"][0] and "verify_a2a_agent_mcp" in seen["problems"][0]
