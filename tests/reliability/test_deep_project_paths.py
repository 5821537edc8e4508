"""Projects in deep or oddly named folders (issue 12): a unix socket path is limited to about 108 bytes, so
a project deeper than that could not start its hub ('AF_UNIX path too long'). Its sockets now go to a
private folder of ours under $TMPDIR, which must really be private."""

from __future__ import annotations

import json
import os

import pytest
from kits.hub import cli


def test_a_project_deeper_than_a_socket_path_runs_hello(tmp_path):
    project = tmp_path / ("deep-" * 12) / ("é" * 20) / "project"
    (project / ".agentenv").mkdir(parents=True)
    assert len(os.fsencode(project / ".agentenv" / "hub.sock")) > 108
    done = cli(project, "run", "hello", "--sandbox", "process", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)[0]["status"] == "passed"
    listed = cli(project, "runs", "list", "--json")
    assert listed.returncode == 0 and len(json.loads(listed.stdout)) == 1, listed.stdout + listed.stderr


def test_a_deep_project_runs_with_a_deep_tmpdir_too(tmp_path):
    """The private folder for a deep project's sockets is under $TMPDIR; a TMPDIR itself too deep for a socket
    path (a test's own temporary folder, once the suite ran in parallel) failed with 'AF_UNIX path too long'."""
    from kits.hub import clean_env

    project = tmp_path / ("deep-" * 12) / "project"
    (project / ".agentenv").mkdir(parents=True)
    deep_tmp = tmp_path / ("t" * 90)
    deep_tmp.mkdir()
    done = cli(project, "run", "hello", "--sandbox", "process", "--json", env=clean_env({"TMPDIR": str(deep_tmp)}))
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)[0]["status"] == "passed"


def test_the_private_folder_must_be_ours_and_private(tmp_path, monkeypatch):
    from agentenv_local.errors import AgentenvError
    from agentenv_local.paths import private_dir

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
    folder = private_dir()
    assert folder.parent == tmp_path and (folder.stat().st_mode & 0o777) == 0o700
    folder.chmod(0o777)  # someone widened it
    with pytest.raises(AgentenvError, match="not a private folder"):
        private_dir()
    folder.rmdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    folder.symlink_to(elsewhere)  # someone planted a link
    with pytest.raises(AgentenvError, match="not a private folder"):
        private_dir()
