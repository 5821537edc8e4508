"""The example sandbox provider package examples/plugins/bwrap (`agentenv-bwrap`, provider `bwrap`).

Two halves:
- the provider itself (the conformance suite, tests/kits/sandbox_conformance.py, and the hostile cases) is imported
  from the package's folder (examples/plugins/bwrap/src on sys.path) and driven in this process against real
  bubblewrap: the same code the installed package runs, without a subprocess per assertion;
- the package as a user gets it: `pip install` of the folder into a PluginVenv (tests/kits/plugin_venv.py), then
  `agentenv plugin list/show` and bundles run through the CLI with `--sandbox bwrap` / `sandbox_type = "bwrap"`.

Without bwrap, or where user namespaces are off, everything is skipped with the reason, unless
AGENTENV_REQUIRE_BWRAP=1, which turns the skip into a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from kits.plugin_venv import PLUGINS, ROOT, PluginVenv
from kits.sandbox_conformance import SandboxConformance, Target, run
from kits.servers import accepting

from agentenv_local.errors import NotFoundError, StepError
from agentenv_local.sandbox_api import NetworkPolicy

FOLDER = PLUGINS / "bwrap"
sys.path.insert(0, str(FOLDER / "src"))

from agentenv_bwrap import BwrapSandboxProvider  # noqa: E402
from agentenv_bwrap.provider import probe  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def bwrap_usable() -> None:
    reason = probe("bwrap")
    if reason:
        if os.environ.get("AGENTENV_REQUIRE_BWRAP") == "1":
            pytest.fail(f"AGENTENV_REQUIRE_BWRAP=1 but {reason}")
        pytest.skip(reason)


@pytest.fixture
def target(tmp_path: Path) -> Target:
    return Target(lambda: BwrapSandboxProvider(tmp_path / "state"), spec_defaults={"memory_mb": 1024})


class TestBwrapConformance(SandboxConformance):
    pass


# -- the hostile cases --------------------------------------------------------------------------------
def test_a_link_in_app_cannot_reach_outside_from_inside(target: Target, tmp_path: Path) -> None:
    secret = tmp_path / "host-secret.txt"
    secret.write_text("host secret")
    sandbox = target.create()
    result = run(sandbox.exec(f"ln -s {secret} /app/link && cat /app/link; ln -s / /app/root; ls /app/root/"))
    assert "host secret" not in result.stdout and "No such file" in result.stderr
    # the sandbox's / is its own: the host's /work, /root and /tmp are not there
    listed = set(result.stdout.split())
    assert {"work", "root", "home"}.isdisjoint(listed) and {"usr", "etc", "app"} <= listed
    with pytest.raises(StepError, match="'root' is a symbolic link"):
        run(sandbox.write_file("/app/root/tmp/planted", b"no"))


def test_a_setuid_binary_gains_nothing(target: Target) -> None:
    sandbox = target.create()
    status = run(sandbox.exec("grep -E '^(NoNewPrivs|CapEff):' /proc/self/status; id -u"))
    lines = dict(line.split(":\t") for line in status.stdout.splitlines()[:2])
    assert lines == {"CapEff": "0000000000000000", "NoNewPrivs": "1"}
    assert status.stdout.splitlines()[2] == "1000"
    su = run(sandbox.exec("su -c 'id -u' root < /dev/null"))
    assert su.exit_code != 0 and "0\n" not in su.stdout
    if os.geteuid() == 0:  # a setuid-root copy owned by a host uid other than the sandbox's: runs as the caller
        app = Path(sandbox.to_record()["root"])
        shutil.copy("/usr/bin/id", app / "suid-id")
        os.chown(app / "suid-id", 0, 0)
        os.chmod(app / "suid-id", 0o6755)
        assert run(sandbox.exec(["/app/suid-id", "-u"])).stdout == "1000\n"
        os.chown(app / "suid-id", 12345, 12345)
        os.chmod(app / "suid-id", 0o6755)
        assert run(sandbox.exec(["/app/suid-id", "-u"])).stdout == "1000\n"


def _listen() -> socket.socket:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    return listener


PROBE = ("import socket,sys\n"
         "try:\n    socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=3); print('reached')\n"
         "except OSError as e: print('blocked', e)\n")


def test_no_network_by_default_and_allow_all_shares_the_hosts(target: Target) -> None:
    listener = _listen()
    port = str(listener.getsockname()[1])
    with accepting(listener) as accepted:
        closed = run(target.create().exec(["python3", "-c", PROBE, port]))
        assert closed.stdout.startswith("blocked") and not accepted
        shared = target.create(network_policy=NetworkPolicy(mode="allow_all"))
        assert run(shared.exec(["python3", "-c", PROBE, port])).stdout == "reached\n"
    with pytest.raises(StepError, match="allowlist"):
        target.create(network_policy=NetworkPolicy(mode="allowlist", allow_hosts=["pypi.org"]))
    with pytest.raises(StepError, match="cannot expose ports"):
        target.create(exposed_ports=[8000])


def test_proc_shows_only_the_sandboxs_processes(target: Target) -> None:
    host = subprocess.Popen(["sleep", "60"])
    try:
        result = run(target.create().exec("ls /proc | grep '^[0-9]*$'; echo pid=$$"))
    finally:
        host.kill()
        host.wait()
    pids = [int(p) for p in result.stdout.split() if p.isdigit()]
    assert host.pid not in pids and os.getpid() not in pids
    assert len(pids) <= 4 and max(pids) <= 10  # bwrap's init, the shell, ls, grep
    assert "pid=2\n" in result.stdout or "pid=1\n" in result.stdout


def test_writing_outside_app_fails(target: Target) -> None:
    sandbox = target.create()
    result = run(sandbox.exec("for p in /usr/x /etc/x /x /home/x; do touch $p 2>&1 || echo refused $p; done"))
    assert result.stdout.count("refused") == 4 and result.stdout.count("Read-only file system") >= 3
    assert not Path("/usr/x").exists() and not Path("/x").exists()
    # /tmp is writable but fresh for every command
    assert run(sandbox.exec("echo t > /tmp/t && cat /tmp/t")).stdout == "t\n"
    assert run(sandbox.exec("cat /tmp/t")).exit_code != 0
    with pytest.raises(StepError, match="outside sandbox"):
        run(sandbox.write_file("/etc/x", b"no"))


FORK_BOMB = ("import os, time\nn = 0\nfor _ in range(300):\n    try:\n        pid = os.fork()\n"
             "    except OSError:\n        break\n    if pid == 0:\n        time.sleep(5); os._exit(0)\n    n += 1\n"
             "print(n)\n")


def test_a_fork_bomb_is_capped_by_nproc(target: Target) -> None:
    sandbox = target.create(pids=32)
    result = run(sandbox.exec(["python3", "-c", FORK_BOMB], timeout=60))
    assert result.ok, result.stderr
    assert int(result.stdout) < 32  # without the limit all 300 forks succeed
    assert run(sandbox.exec(["echo", "still here"])).stdout == "still here\n"


def test_memory_is_capped_by_the_address_space_limit(target: Target) -> None:
    sandbox = target.create(memory_mb=256)
    result = run(sandbox.exec(["python3", "-c", "x = bytearray(1024 * 1024 * 1024); print('survived')"]))
    assert result.exit_code != 0 and "MemoryError" in result.stderr and "survived" not in result.stdout


def test_found_again_from_a_fresh_process_and_terminate_cleans_up(target: Target) -> None:
    provider = target.make()
    sandbox = target.create(provider)
    run(sandbox.write_file("/app/mark", b"from the parent"))
    code = ("import asyncio, json, sys\nfrom pathlib import Path\n"
            f"sys.path.insert(0, {str(FOLDER / 'src')!r})\n"
            "from agentenv_bwrap import BwrapSandboxProvider\n"
            "async def main():\n"
            f"    sb = await BwrapSandboxProvider(Path({str(provider.state_dir)!r})).get({sandbox.sandbox_id!r})\n"
            "    r = await sb.exec('cat /app/mark; echo -n \" $AGENTENV_SANDBOX\"')\n"
            "    await sb.write_file('/app/from_child', b'child')\n"
            "    print(json.dumps(r.stdout))\n"
            "asyncio.run(main())\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == f"from the parent {sandbox.sandbox_id}"
    assert run(sandbox.exec(["cat", "/app/from_child"])).stdout == "child"
    folder = Path(sandbox.to_record()["root"]).parent
    run(provider.terminate(sandbox.sandbox_id))
    assert not folder.exists()
    with pytest.raises(NotFoundError):
        run(sandbox.read_file("mark"))


# -- the package, pip-installed, through the CLI ------------------------------------------------------
@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> PluginVenv:
    v = PluginVenv.create(tmp_path_factory.mktemp("bwrap-venv") / "venv")
    v.install(FOLDER)
    assert v.has("agentenv-bwrap")
    return v


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    return project


def test_installed_package_shows_its_provider_active(venv: PluginVenv, tmp_path: Path) -> None:
    project = _project(tmp_path)
    listed = json.loads(venv.agentenv("plugin", "list", "--json", cwd=project).stdout)
    ours = [d for d in listed["plugins"] if d["name"] == "agentenv-bwrap"]
    assert len(ours) == 1 and ours[0]["version"] == "0.1.0"
    assert [(c["group"], c["name"], c["status"]) for c in ours[0]["contributions"]] == [
        ("sandbox_providers", "bwrap", "active")]
    shown = json.loads(venv.agentenv("plugin", "show", "agentenv-bwrap", "--json", cwd=project).stdout)
    assert shown["groups"] == {"sandbox_providers": [{"name": "bwrap", "value": "agentenv_bwrap:BwrapSandboxProvider",
                                                      "status": "active", "reason": None}]}
    assert "bwrap" in venv.agentenv("plugin", "show", "agentenv-bwrap", cwd=project).stdout


def test_hello_runs_in_bwrap_through_the_cli(venv: PluginVenv, tmp_path: Path) -> None:
    project = _project(tmp_path)
    out = venv.agentenv("run", "hello", "--sandbox", "bwrap", cwd=project)
    assert "tasks/hello.json v1: passed (hello: 1)" in out.stdout, out.stdout + out.stderr
    assert not list((project / ".agentenv" / "sandboxes" / "bwrap").glob("bwrap-*"))  # torn down


def test_the_example_bundle_checks_the_jail_through_the_cli(venv: PluginVenv, tmp_path: Path) -> None:
    project = _project(tmp_path)
    out = venv.agentenv("run", str(FOLDER / "bundle"), cwd=project)
    assert "tasks/jailed.json v1: passed (jail: 1)" in out.stdout, out.stdout + out.stderr
    # the process provider cannot hold the jail: the same task fails its checks there
    failed = venv.agentenv("run", str(FOLDER / "bundle"), "--sandbox", "process", cwd=project, code=1)
    assert "tasks/jailed.json v1: failed" in failed.stdout, failed.stdout + failed.stderr


def test_container_mode_is_refused_clearly(tmp_path: Path) -> None:
    sandbox_provider = BwrapSandboxProvider(tmp_path / "state")
    with pytest.raises(StepError, match="cannot create a 'container' sandbox"):
        run(sandbox_provider.create(Target(lambda: sandbox_provider).spec(mode="container", image="x")))
    assert run(sandbox_provider.list()) == []


def test_a_policy_it_cannot_enforce_fails_the_run_clearly(venv: PluginVenv, tmp_path: Path) -> None:
    project = _project(tmp_path)
    bundle = tmp_path / "bundle"
    (bundle / "tasks").mkdir(parents=True)
    (bundle / "tasks" / "allowlist.json").write_text(json.dumps([
        {"id": "box", "type": "deploy_sandbox", "sandbox_name": "box", "sandbox_type": "bwrap",
         "network_policy": {"mode": "allowlist", "allow_hosts": ["pypi.org"]}},
        {"id": "check", "type": "verify_sandbox", "sandbox_name": "box",
         "criteria": [{"type": "bash_cmd_succeeds", "bash_cmd": "true"}]}]))
    out = venv.agentenv("run", str(bundle), cwd=project, code=1)
    assert "cannot enforce a network allowlist" in out.stdout + out.stderr, out.stdout + out.stderr
    assert "tasks/allowlist.json v1: error" in out.stdout
    assert not list((project / ".agentenv" / "sandboxes" / "bwrap").glob("bwrap-*"))  # nothing made, nothing left
    listed = venv.agentenv("sandbox", "list", cwd=project)
    assert "No live sandboxes" in listed.stdout
