"""The small libpod client (sandboxes/podman/libpod.py) that makes sandboxes without podman-py: it posts the
very SpecGenerator podman-py would (so every hardening flag stays), talks to the real service, and a one-shot
`run hello --sandbox podman` never imports podman-py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from kits.hub import clean_env
from kits.podman import containers_left

from sandboxes.podman.libpod import LibpodClient, LibpodError, create_spec
from sandboxes.podman.service import stop_project_service

ROOT = Path(__file__).resolve().parents[3]
IDMAP = [{"container_id": 0, "host_id": 1_000_000_000, "size": 65536}]
BASE = dict(name="podman-abc", labels={"agentenv.project": "p", "agentenv.pool": ""},
            mounts=[{"type": "tmpfs", "source": "tmpfs", "target": t} for t in ("/tmp", "/var/tmp", "/run")],
            volumes={"/s/app": {"bind": "/app", "extended_mode": ["rw", "nosuid", "nodev"]},
                     "/s/ctl": {"bind": "/.agentenv", "extended_mode": ["rw", "nosuid", "nodev"]}},
            network_mode="none", init=True, stop_timeout=1, read_only=True, cap_drop=["ALL"], no_new_privileges=True,
            mem_limit="512m", cpu_period=100_000, cpu_quota=150_000, pids_limit=512, environment={"A": "1"},
            working_dir="/app")
# the keyword sets the provider passes: a vm sandbox under a user namespace, a container-mode one publishing a
# port with host access, one on the bridge with nothing optional
CASES = [
    {**BASE, "command": ["python3", "-c", "agent"], "userns_mode": "private",
     "idmappings": {"UIDMap": IDMAP, "GIDMap": IDMAP}},
    {**BASE, "read_only": False, "mounts": [], "environment": {}, "network_mode": "slirp4netns",
     "network_options": {"slirp4netns": ["allow_host_loopback=true"]}, "ports": {"8080/tcp": ("127.0.0.1", 0)},
     "command": ["sleep", "9"]},
    {**BASE, "network_mode": "bridge", "labels": {}, "cpu_quota": 1000, "mem_limit": "2g"},
]


@pytest.mark.parametrize("kwargs", CASES)
def test_the_spec_is_what_podman_py_would_post(kwargs):
    from podman.api import prepare_body
    from podman.domain.containers_create import CreateMixin

    theirs = json.loads(prepare_body(CreateMixin._render_payload({"image": "localhost/x:1", "command": None,
                                                                   **kwargs})))
    assert create_spec("localhost/x:1", **kwargs) == theirs


def test_the_client_talks_to_the_real_service(provider_factory, podman_base_image):
    provider = provider_factory()
    api = provider.api()
    assert api.ping(3.0)
    assert api.image_exists(podman_base_image) and not api.image_exists("localhost/agentenv/no-such-image:0")
    with pytest.raises(LibpodError) as failed:
        api.create_container(create_spec("localhost/agentenv/no-such-image:0", **{**BASE, "volumes": {}}))
    assert "no-such-image" in failed.value.explanation and failed.value.status >= 400
    with pytest.raises(LibpodError) as missing:
        api.inspect_container("podman-never-made")
    assert missing.value.status == 404
    api.remove_container("podman-never-made")  # --ignore: gone already is fine
    name = f"podman-libpod-rm-{os.getpid()}"
    made = api.create_container(create_spec(podman_base_image, **{**BASE, "name": name, "volumes": {}, "labels": {},
                                                                   "working_dir": "/", "command": ["sleep", "600"]}))
    try:
        api.start_container(made)
        api.remove_container(name)  # running: killed at once, then removed
        with pytest.raises(LibpodError):
            api.inspect_container(made)
    finally:
        api.remove_container(name)


class _Removals:
    """A stand-in libpod client whose DELETEs answer the errors in `answers` in turn (None: removed)."""

    def __init__(self, *answers: LibpodError | None) -> None:
        self.answers, self.calls = list(answers), 0

    def remove_container(self, name: str) -> None:
        self.calls += 1
        answer = self.answers.pop(0)
        if answer is not None:
            raise answer


@pytest.mark.parametrize("answers, removed, calls", [
    # Podman leaves a container that exited while `rm --force` killed it, and says "container not running"
    # (CI run of stop 33: an OpenHands agent container outlived its run): the exited container is removed next
    ((LibpodError(500, "container not running"), None), True, 2),
    ((None,), True, 1),
    ((LibpodError(500, "something else"),), False, 1),  # not removed: `agentenv sandbox prune` finishes the job
])
def test_a_removal_that_races_the_container_exit_removes_the_exited_container(tmp_path, monkeypatch, answers,
                                                                               removed, calls):
    from sandboxes.podman import PodmanSandboxProvider

    provider = PodmanSandboxProvider(tmp_path / ".agentenv", {"pool_size": 0})
    api = _Removals(*answers)
    monkeypatch.setattr(provider, "api", lambda: api)
    (provider.root / "podman-abc").mkdir(parents=True)
    assert provider.remove_sync("podman-abc") is removed
    assert api.calls == calls and not (provider.root / "podman-abc").exists()


def test_nothing_answers_on_a_socket_without_a_service(tmp_path):
    with pytest.raises(OSError):
        LibpodClient(tmp_path / "none.sock").ping(1.0)


def test_a_one_shot_podman_run_never_imports_podman_py(tmp_path, podman_base_image):
    project = tmp_path / "proj"
    project.mkdir()
    marker = tmp_path / "imported"
    # a finder first on sys.meta_path notes any import of podman-py (the CLI may end with os._exit)
    script = textwrap.dedent(f"""
        import sys
        class Note:
            def find_spec(self, name, path=None, target=None):
                if name == "podman" or name.startswith("podman."):
                    open({str(marker)!r}, "a").write(name + "\\n")
                return None
        sys.meta_path.insert(0, Note())
        sys.argv = ["agentenv", "run", "hello", "--sandbox", "podman"]
        from agentenv_local.cli.main import main
        main()
    """)
    try:
        for _ in range(2):  # the first starts the project's service, the second finds it running
            proc = subprocess.run([sys.executable, "-c", script], cwd=project, env=clean_env(), capture_output=True,
                                  text=True, timeout=180, stdin=subprocess.DEVNULL)
            assert proc.returncode == 0 and "passed (hello: 1)" in proc.stdout, proc.stdout + proc.stderr
        assert not marker.exists(), marker.read_text()
    finally:
        stop_project_service(project / ".agentenv")
        from sandboxes.podman import PodmanSandboxProvider

        assert containers_left(PodmanSandboxProvider(project / ".agentenv").project) == []
