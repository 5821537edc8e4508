"""The sandbox boundary (issue 12, slice B), with real sandboxes, real Podman and the real CLI:

- the host never follows a link a sandbox swapped in: a container (or a process sandbox) races a folder
  against a symlink to a host folder while the host writes and reads through it; nothing lands outside
  and no outside byte is read;
- Podman: /app is mounted nosuid,nodev and, rootful, the container's root is not this machine's root, so
  a setuid binary left in /app is not a setuid-root file on the host; the CPU limit is in the cgroup;
- hostile project folder names ($(...), backticks, quotes, ;, spaces, unicode) run `run hello`, and
  never execute anything;
- bundle/folder artifacts: symlinks leaving the bundle, links into /proc, FIFOs and non-UTF-8 names are
  refused naming the file, nothing is stored; an explicit --follow-external-links allows outside links;
- env.toml `module` outside the env's folder is refused naming env.toml and the field.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
from pathlib import Path

import pytest
from kits.hub import clean_env, cli, write_bundle

RACE_SECONDS = 6


def run(coro):
    return asyncio.run(coro)


# -- sandboxes ------------------------------------------------------------------------------------
@pytest.fixture
def podman_provider(tmp_path, podman_base_image):
    from sandboxes.podman import PodmanSandboxProvider

    provider = PodmanSandboxProvider(tmp_path / ".agentenv", {"pool_size": 0})
    yield provider
    for row in provider.containers():
        provider.remove_sync(row["sandbox_id"])
    run(provider.aclose())


@pytest.fixture
def process_provider(tmp_path):
    from sandboxes.process import ProcessSandboxProvider

    return ProcessSandboxProvider(tmp_path / ".agentenv")


KINDS = ["process", pytest.param("podman", marks=pytest.mark.podman)]


def provider_of(request, kind):
    return request.getfixturevalue(f"{kind}_provider")


def spec(**fields):
    from agentenv_local.sandbox_api import SandboxSpec

    return SandboxSpec(name="boundary", **fields)


SWAPPER = """
import ctypes, os, sys, time
name, outside, fill = sys.argv[1:4]
real, link = f"/app/{name}", f"/app/.{name}-link"
os.makedirs(real, exist_ok=True)
if fill:
    open(f"{real}/secret.txt", "w").write(fill)
os.symlink(outside, link)
libc = ctypes.CDLL(None, use_errno=True)
def exchange():  # renameat2(RENAME_EXCHANGE): /app/<name> is always a folder or the link, never missing
    if libc.renameat2(-100, real.encode(), -100, link.encode(), 2) != 0:
        raise OSError(ctypes.get_errno(), "renameat2")
end = time.time() + float(sys.argv[4])
while time.time() < end:
    exchange()
"""


async def swap_loop(sandbox, name: str, outside: Path, fill: str = "") -> asyncio.Future:
    """Keep swapping /app/<name> between a folder and a link to the host folder `outside` (atomically);
    returns once the swapping runs."""
    swapper = asyncio.ensure_future(sandbox.exec(
        [sandbox.python_executable, "-c", SWAPPER, name, str(outside), fill, str(RACE_SECONDS)], timeout=60))
    for _ in range(1000):
        if swapper.done() or await sandbox.exists(f"/app/.{name}-link"):
            return swapper
        await asyncio.sleep(0.01)
    raise AssertionError("the swapper did not start")


@pytest.mark.parametrize("kind", KINDS)
def test_writes_never_follow_a_link_the_sandbox_swaps_in(request, kind, tmp_path):
    from agentenv_local.errors import AgentenvError

    outside = tmp_path / "host-folder"
    outside.mkdir()
    provider = provider_of(request, kind)

    async def go():
        sandbox = await provider.create(spec())
        swapper = await swap_loop(sandbox, "d", outside)
        tries = refused = 0
        while not swapper.done() and tries < 20_000:
            tries += 1
            try:  # the way load_artifact writes: parents made as needed, then the file
                await sandbox.write_file(f"/app/d/sub/f{tries}.txt", b"x")
                await sandbox.write_file(f"/app/d/g{tries}.txt", b"x")
            except AgentenvError:
                refused += 1
            await asyncio.sleep(0)  # let the swapper's exec make progress
        swapped = await swapper
        assert swapped.ok, swapped.stderr
        await sandbox.terminate()
        return tries, refused

    tries, _refused = run(go())
    assert tries > 20
    assert sorted(p.name for p in outside.rglob("*")) == [], f"host writes landed outside ({tries} tries)"


@pytest.mark.parametrize("kind", KINDS)
def test_reads_never_follow_a_link_the_sandbox_swaps_in(request, kind, tmp_path):
    from agentenv_local.errors import AgentenvError

    outside = tmp_path / "host-folder"
    outside.mkdir()
    (outside / "secret.txt").write_text("HOST SECRET")
    provider = provider_of(request, kind)

    async def go():
        sandbox = await provider.create(spec())
        swapper = await swap_loop(sandbox, "r", outside, "inside")
        seen: set[bytes] = set()
        tries = 0
        while not swapper.done() and tries < 20_000:
            tries += 1
            try:  # the way collect_artifacts reads: list, then read each file
                for rel in await sandbox.list_files("/app/r"):
                    seen.add(await sandbox.read_file(f"/app/r/{rel}"))
            except AgentenvError:
                pass
            await asyncio.sleep(0)
        swapped = await swapper
        assert swapped.ok, swapped.stderr
        await sandbox.terminate()
        return tries, seen

    tries, seen = run(go())
    assert tries > 20
    assert not any(b"HOST SECRET" in data for data in seen), f"read a host file through a link ({tries} tries)"


@pytest.mark.parametrize("kind", KINDS)
def test_links_fifos_and_devices_in_the_folder_are_refused_by_name(request, kind, tmp_path):
    from agentenv_local.errors import NotFoundError, StepError

    (tmp_path / "outside.txt").write_text("HOST SECRET")
    provider = provider_of(request, kind)

    async def go():
        sandbox = await provider.create(spec())
        made = await sandbox.exec(f"mkdir -p /app/a && mkfifo /app/a/pipe && ln -s {tmp_path}/outside.txt "
                                  f"/app/a/link && ln -s {tmp_path} /app/dirlink && echo ok > /app/a/plain")
        assert made.ok, made.stderr
        with pytest.raises(StepError, match=r"'pipe' is a FIFO"):  # would hang the host if opened
            await sandbox.read_file("/app/a/pipe")
        with pytest.raises(StepError, match=r"'/app/a/link'.*'link' is a symbolic link"):
            await sandbox.read_file("/app/a/link")
        with pytest.raises(StepError, match=r"'link' is a symbolic link"):
            await sandbox.write_file("/app/a/link", b"overwrite?")
        with pytest.raises(StepError, match=r"'dirlink' is a symbolic link"):
            await sandbox.write_file("/app/dirlink/new.txt", b"x")
        with pytest.raises(StepError, match=r"'dirlink' is a symbolic link"):
            await sandbox.list_files("/app/dirlink/")
        with pytest.raises(NotFoundError):
            await sandbox.read_file("/app/a")
        assert await sandbox.list_files("/app/a") == ["link", "pipe", "plain"]  # listed, never followed
        assert await sandbox.exists("/app/a/link", "file") and not await sandbox.exists("/app/dirlink", "dir")
        assert await sandbox.read_file("/app/a/plain") == b"ok\n"
        await sandbox.terminate()

    run(go())
    assert (tmp_path / "outside.txt").read_text() == "HOST SECRET"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != ".agentenv") == ["outside.txt"]


def test_loaded_files_keep_their_mode_but_never_a_setuid_bit(process_provider):
    async def go():
        sandbox = await process_provider.create(spec())
        assert (await sandbox.exec("echo '#!/bin/sh' > /app/run.sh && chmod 4755 /app/run.sh")).ok
        await sandbox.write_file("/app/run.sh", b"#!/bin/sh\necho replaced\n")
        mode = os.stat(sandbox.root / "run.sh").st_mode
        out = await sandbox.exec("/app/run.sh")
        await sandbox.terminate()
        return mode, out

    mode, out = run(go())
    assert out.stdout == "replaced\n"
    assert stat.S_IMODE(mode) == 0o755


# -- Podman: setuid in /app, the CPU limit --------------------------------------------------------------
@pytest.mark.podman
def test_a_setuid_binary_left_in_app_is_not_setuid_root_on_the_host(podman_provider):
    async def go():
        sandbox = await podman_provider.create(spec())
        made = await sandbox.exec("cp /bin/ls /app/ls && chmod u+s /app/ls && grep ' /app ' /proc/mounts")
        assert made.ok, made.stderr
        return sandbox, made.stdout

    sandbox, mounts = run(go())
    options = mounts.split()[3].split(",")
    assert "nosuid" in options and "nodev" in options, mounts
    st = os.stat(sandbox.app_dir / "ls")
    assert not (st.st_mode & stat.S_ISUID and st.st_uid == 0), "a setuid-root file on the host"
    if os.geteuid() == 0:  # rootful: the container's root is an unprivileged uid here
        assert st.st_uid != 0 and sandbox.app_owner == (st.st_uid, st.st_gid)
    # and nobody else on this machine can even reach the sandbox's folder
    assert stat.S_IMODE(os.stat(sandbox.folder).st_mode) == 0o700
    run(sandbox.terminate())


@pytest.mark.podman
def test_files_the_host_loads_belong_to_the_containers_root(podman_provider):
    async def go():
        sandbox = await podman_provider.create(spec())
        await sandbox.write_file("/app/in/deep/file.txt", b"loaded")
        edited = await sandbox.exec("echo edited >> /app/in/deep/file.txt && touch /app/in/deep/new && id -u")
        data = await sandbox.read_file("/app/in/deep/file.txt")
        await sandbox.terminate()
        return edited, data

    edited, data = run(go())
    assert edited.ok, edited.stderr
    assert edited.stdout.strip() == "0" and data == b"loadededited\n"


@pytest.mark.podman
def test_the_cpu_limit_is_in_the_containers_cgroup(podman_provider):
    async def go():
        sandbox = await podman_provider.create(spec(cpu=0.5))
        out = await sandbox.exec("cat /sys/fs/cgroup/cpu.max 2>/dev/null || "
                                 "cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us /sys/fs/cgroup/cpu/cpu.cfs_period_us")
        await sandbox.terminate()
        return out

    out = run(go())
    assert out.ok, out.stderr
    quota, period = (int(x) for x in out.stdout.split())
    assert quota > 0 and quota / period == 0.5, out.stdout


# -- hostile project folder names --------------------------------------------------------------------
HOSTILE_NAMES = ["inj$(cd;touch PWNED)", "tick`cd;touch PWNED`", "a space", "quo'te", 'dq"uote', "semi;colon",
                 "ünïcødé 名前"]


def _run_hello(tmp_path: Path, name: str, sandbox: str):
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    project = tmp_path / name
    project.mkdir()
    env = clean_env({"HOME": str(home), "AGENTENV_SANDBOX_DEFAULT": sandbox})
    try:
        done = cli(project, "run", "hello", "--sandbox", sandbox, env=env, timeout=110)
    finally:
        cli(project, "down", env=env, timeout=60)
    return home, done


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_run_hello_in_a_hostile_folder_name_with_the_process_sandbox(tmp_path, name):
    home, done = _run_hello(tmp_path, name, "process")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "passed (hello: 1)" in done.stdout
    assert not (home / "PWNED").exists(), "the folder name ran as a command"


@pytest.mark.podman
def test_run_hello_in_a_hostile_folder_name_with_podman(tmp_path_factory, podman_base_image):
    # a short parent: the hub's socket path (<project>/.agentenv/hub.sock) must stay under 108 bytes
    home, done = _run_hello(tmp_path_factory.mktemp("h"), "$(cd;touch PWNED)`cd;touch PWNED`;'\" ü", "podman")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "passed (hello: 1)" in done.stdout
    assert not (home / "PWNED").exists()


# -- bundle and folder artifacts ---------------------------------------------------------------------
def _project(tmp_path: Path) -> Path:
    project = tmp_path / "proj"
    project.mkdir(exist_ok=True)
    return project


def _artifacts(project: Path) -> list:
    listed = cli(project, "artifact", "list", "--json")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    return json.loads(listed.stdout)


def _linked_bundle(tmp_path: Path, target: Path | str) -> Path:
    bundle = write_bundle(tmp_path, "linked", {"t": [{"id": "box", "type": "deploy_sandbox"}]},
                          {"data": {"real.txt": "in the bundle"}})
    os.symlink(target, bundle / "artifacts" / "data" / "leak.txt")
    return bundle


LINK_TARGETS = {"a host file": "host", "/etc/hostname": "/etc/hostname", "/proc/self/environ": "/proc/self/environ",
                "a missing file": "missing"}


@pytest.mark.parametrize("case", sorted(LINK_TARGETS))
def test_a_bundle_artifact_linking_outside_the_bundle_is_refused(tmp_path, case):
    secret = tmp_path / "id_rsa"
    secret.write_text("PRIVATE KEY")
    target = {"host": secret, "missing": tmp_path / "gone"}.get(LINK_TARGETS[case], LINK_TARGETS[case])
    project = _project(tmp_path)
    done = cli(project, "run", str(_linked_bundle(tmp_path, target)), env=clean_env({"SECRET_X": "leakme"}))
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "artifacts/data/leak.txt" in out and "Traceback" not in out
    assert _artifacts(project) == []


def test_follow_external_links_allows_an_outside_file_but_never_proc(tmp_path):
    secret = tmp_path / "shared.txt"
    secret.write_text("shared on purpose")
    project = _project(tmp_path)
    bundle = _linked_bundle(tmp_path, secret)
    refused = cli(project, "run", str(bundle))
    assert refused.returncode == 1 and "--follow-external-links" in refused.stdout + refused.stderr
    allowed = cli(project, "run", str(bundle), "--follow-external-links")
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    (bundle / "artifacts" / "data" / "leak.txt").unlink()
    os.symlink("/proc/self/environ", bundle / "artifacts" / "data" / "leak.txt")
    never = cli(project, "run", str(bundle), "--follow-external-links")
    assert never.returncode == 1 and "never read" in never.stdout + never.stderr


def test_links_inside_the_bundle_are_fine(tmp_path):
    bundle = write_bundle(tmp_path, "inside", {"t": [{"id": "box", "type": "deploy_sandbox"}]},
                          {"data": {"real.txt": "in the bundle"}})
    (bundle / "shared.txt").write_text("shared")
    os.symlink("../../shared.txt", bundle / "artifacts" / "data" / "link.txt")
    done = cli(_project(tmp_path), "run", str(bundle))
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_fifo_in_a_bundle_artifact_is_refused_not_read(tmp_path):
    bundle = write_bundle(tmp_path, "fifo", {"t": [{"id": "box", "type": "deploy_sandbox"}]},
                          {"data": {"real.txt": "x"}})
    os.mkfifo(bundle / "artifacts" / "data" / "pipe")
    project = _project(tmp_path)
    done = cli(project, "run", str(bundle), timeout=60)  # reading it would hang
    assert done.returncode == 1 and "artifacts/data/pipe" in done.stdout + done.stderr
    assert _artifacts(project) == []


def test_artifact_put_of_a_folder_refuses_outside_links_unless_told(tmp_path):
    secret = tmp_path / "id_rsa"
    secret.write_text("PRIVATE KEY")
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "a.txt").write_text("a")
    os.symlink(secret, folder / "key")
    project = _project(tmp_path)
    refused = cli(project, "artifact", "put", str(folder), "--id", "f")
    out = refused.stdout + refused.stderr
    assert refused.returncode == 1 and f"{folder}/key" in out and "--follow-external-links" in out, out
    assert _artifacts(project) == []
    allowed = cli(project, "artifact", "put", str(folder), "--id", "f", "--follow-external-links")
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr


def test_a_file_name_that_is_not_utf8_is_refused_naming_its_bytes(tmp_path):
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "ok.txt").write_text("ok")
    with open(os.path.join(os.fsencode(folder), b"caf\xe9.txt"), "wb") as f:
        f.write(b"latin-1 name")
    project = _project(tmp_path)
    done = cli(project, "artifact", "put", str(folder), "--id", "f")
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "caf\\xe9.txt" in out and "not valid UTF-8" in out and "Traceback" not in out
    assert _artifacts(project) == []


def test_collecting_a_sandbox_file_whose_name_is_not_utf8_fails_the_step_clearly(tmp_path):
    bundle = write_bundle(tmp_path, "collect", {"t": [
        {"id": "box", "type": "deploy_sandbox", "sandbox_name": "box"},
        {"id": "make", "type": "verify_sandbox", "sandbox_name": "box", "criteria": [
            {"type": "bash_cmd_succeeds", "bash_cmd": "mkdir -p /app/artifact && echo x > /app/artifact/$'caf\\xe9'"}]},
        {"id": "grab", "type": "collect_artifacts", "sandbox_name": "box"}]})
    done = cli(_project(tmp_path), "run", str(bundle))
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "step 'grab' failed" in out and "caf\\xe9" in out and "Traceback" not in out


# -- env.toml module ---------------------------------------------------------------------------------
@pytest.mark.parametrize("module", ["{outside}:Outside", "../outside.py:Outside", "~/outside.py:Outside"])
def test_an_env_module_outside_the_env_folder_is_refused(tmp_path, module):
    (tmp_path / "outside.py").write_text("raise SystemExit('imported code that is not pinned')\n")
    bundle = write_bundle(tmp_path, "envb", {"t": [{"id": "env", "type": "deploy_env", "env_id": "x"}]})
    (bundle / "envs" / "x").mkdir(parents=True)
    (bundle / "envs" / "x" / "env.toml").write_text(f'module = "{module.format(outside=tmp_path / "outside.py")}"\n')
    project = _project(tmp_path)
    done = cli(project, "run", str(bundle))
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "envs/x/env.toml" in out and "module" in out and "outside the env's folder" in out
    assert "imported code" not in out and "Traceback" not in out
