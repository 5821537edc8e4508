"""The TUI's actions (cancel, resume, review, advance a clock) reach a real hub over its socket through the
typed hub methods, and the hub's errors come back as themselves."""

from __future__ import annotations

import pytest
from kits.hub import InProcessHub, bash_check, deploy, gate, step_status, wait_until

from agentenv_local.errors import AgentenvError, HubError
from tui.data import HubSource


def test_cancel_resume_review_and_clock_from_a_client_source(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    release = tmp_path / "release"
    hub = InProcessHub(project)
    source = HubSource.connect(start=project)
    try:
        assert not source.session.is_hub
        run_id = hub.submit(hub.task([deploy(), bash_check("wait", gate(release, 60), sandbox_name="box")]))
        wait_until(lambda: step_status(hub.store.runs.get(run_id), "wait") == "running", what="the slow step")
        assert source.cancel(run_id) == {"run_id": run_id, "status": "cancelling"}
        assert hub.wait(run_id)["status"] == "cancelled"
        resumed = source.resume(run_id)  # goes again from its journal
        assert resumed["run_id"] == run_id
        wait_until(lambda: step_status(hub.store.runs.get(run_id), "wait") == "running", what="the step again")
        release.touch()
        assert hub.wait(run_id)["status"] == "passed"
        with pytest.raises(HubError, match="not running; nothing to cancel"):
            source.cancel(run_id)
        with pytest.raises(HubError, match="no review 'rv-none' is pending"):
            source.review("rv-none", "continue")
        with pytest.raises(AgentenvError, match="env instance 'no-such-instance' is not running in this hub"):
            source.advance_clock("no-such-instance", 60)
    finally:
        release.touch()
        source.close()
        hub.close()
