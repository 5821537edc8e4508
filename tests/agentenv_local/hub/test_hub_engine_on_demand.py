"""A one-shot command's hub builds what executing work needs (hub/engine.py) only when a call needs it, so a
command that only reads the store never imports the step types, pydantic or the hosting code; a hub that finds
instances a dead hub left running builds it at once, and sweeps them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kits.hub import InProcessHub

NOTHING = [{"id": "s", "type": "teardown_sandboxes"}]  # nothing deployed: a step that does nothing

_REPORT = ("import sys\nfrom agentenv_local.cli.main import main\ntry:\n    main()\nfinally:\n"
           "    print('HEAVY', sorted(m for m in ('pydantic', 'agentenv_local.tasks.runner', "
           "'agentenv_local.hosting.envs.manager') if m in sys.modules), file=sys.stderr)\n")


def _heavy_modules_after(project: Path, *argv: str) -> str:
    proc = subprocess.run([sys.executable, "-c", _REPORT, *argv], cwd=project, capture_output=True, text=True,
                          timeout=60)
    line = [ln for ln in proc.stderr.splitlines() if ln.startswith("HEAVY")]
    assert line, proc.stderr
    # nothing else on stderr: a hub loop left to the garbage collector at exit printed "Exception ignored in
    # BaseEventLoop.__del__ ... Invalid file descriptor: -1" after the report
    assert proc.stderr.strip() == line[-1], proc.stderr
    return line[-1]


def test_reading_commands_never_build_the_engine(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    (project / ".agentenv").mkdir()
    for argv in (("runs", "list"), ("task", "list")):
        assert _heavy_modules_after(project, *argv) == "HEAVY []", argv
    # `run` needs it, and gets it on its first call
    assert "agentenv_local.tasks.runner" in _heavy_modules_after(project, "run", "hello")


def test_the_engine_is_built_on_the_first_call_that_needs_it(tmp_path):
    hub = InProcessHub(tmp_path)
    try:
        local_hub = hub.session.hub
        assert local_hub._engine is None
        hub.store.documents.query({"collection": "tasks"})
        assert local_hub._engine is None
        assert local_hub.call("hub.status")["active_runs"] == []
        assert local_hub._engine is None  # nothing could be running yet
        run_id = hub.submit(hub.task(NOTHING))
        assert local_hub._engine is not None
        assert hub.wait(run_id)["status"] == "passed"
    finally:
        hub.close()
