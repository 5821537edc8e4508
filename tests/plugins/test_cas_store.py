"""The example object store package examples/plugins/cas-store (`agentenv-cas-store`, object store `cas`).

Two halves:
- the package as a user gets it: `pip install` of the folder into a PluginVenv (tests/kits/plugin_venv.py), then
  `agentenv plugin list/show`, `agentenv store migrate-objects --to cas` of a project with artifacts, runs and
  `artifact get` on it, two projects sharing one CAS root, a migration killed part-way and resumed, a damaged
  blob, bad settings; every project is a fresh folder under the test's tmp_path, with HOME there too (the default
  root is ~/.cache/agentenv-cas), and the root is named in `[plugins.agentenv-cas-store]`;
- the shared root itself (blobs.py) imported from the package's folder: gc against concurrent puts, in-process.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from kits.plugin_venv import PLUGINS, PluginVenv

FOLDER = PLUGINS / "cas-store"
DIST = "agentenv-cas-store"
HANDBOOK = FOLDER / "handbook"
sys.path.insert(0, str(FOLDER / "src"))

from agentenv_cas_store.blobs import CasRoot, CorruptBlob  # noqa: E402


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> PluginVenv:
    v = PluginVenv.create(tmp_path_factory.mktemp("cas-store") / "venv")
    v.install(FOLDER)
    assert v.has(DIST)
    return v


class Project:
    """A fresh project folder whose config names the CAS root `root` (and `objects = "cas"` when asked)."""

    def __init__(self, venv: PluginVenv, folder: Path, root: Path, home: Path, *, cas: bool = False,
                 extra: str = "") -> None:
        self.venv, self.folder, self.root, self.home = venv, folder, root, home
        (folder / ".agentenv").mkdir(parents=True)
        store = '[store]\nobjects = "cas"\n\n' if cas else ""
        (folder / ".agentenv" / "config.toml").write_text(
            f'{store}[plugins.agentenv-cas-store]\nroot = "{root}"\n{extra}')

    def agentenv(self, *args: str, code: int | None = 0) -> subprocess.CompletedProcess[str]:
        return self.venv.agentenv(*args, cwd=self.folder, code=code, home=self.home)

    def json(self, *args: str) -> Any:
        return json.loads(self.agentenv(*args, "--json").stdout)

    def python(self, code: str) -> str:
        proc = subprocess.run([str(self.venv.python), "-c", code], cwd=self.folder, env=self.venv.environ(self.home),
                              capture_output=True, text=True, timeout=300, check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


def blob_files(root: Path) -> list[Path]:
    return sorted(p for p in (root / "blobs").glob("*/*") if p.is_file())


def artifact_files(project: Project, artifact_id: str, out: Path) -> dict[str, bytes]:
    project.agentenv("artifact", "get", "--id", artifact_id, "--output-dir", str(out))
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


# -- the package ------------------------------------------------------------------------------------------------
def test_plugin_list_and_show_have_the_store_and_the_command_active(venv: PluginVenv, tmp_path: Path,
                                                                     home: Path) -> None:
    project = Project(venv, tmp_path / "p", tmp_path / "cas", home)
    listed = project.json("plugin", "list")
    ours = [d for d in listed["plugins"] if d["name"] == DIST]
    assert len(ours) == 1 and ours[0]["version"] == "0.1.0"
    assert sorted((c["group"], c["name"], c["status"]) for c in ours[0]["contributions"]) == [
        ("cli", "cas", "active"), ("stores", "cas", "active")]
    shown = project.json("plugin", "show", DIST)
    assert shown["groups"]["stores"] == [{"name": "cas", "value": "agentenv_cas_store.store:CasObjectStore",
                                          "status": "active", "reason": None}]
    assert "cas" in project.agentenv("plugin", "show", DIST).stdout
    project.agentenv("plugin", "check")


# -- migrating a project ----------------------------------------------------------------------------------------
def test_migrate_a_project_with_runs_and_artifacts_to_cas_then_clean_up(venv: PluginVenv, tmp_path: Path,
                                                                        home: Path) -> None:
    root = tmp_path / "cas"
    project = Project(venv, tmp_path / "p", root, home)
    assert project.json("run", "hello")[0]["status"] == "passed"
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text("alpha\n")
    (data / "b.bin").write_bytes(bytes(range(256)) * 40)
    project.agentenv("artifact", "put", str(data), "--id", "dataset")
    before = artifact_files(project, "dataset", tmp_path / "before")
    local_blobs = sorted(p for p in (project.folder / ".agentenv" / "objects" / "sha256").rglob("*") if p.is_file())
    assert len(local_blobs) == 4  # hello's two files and the dataset's two

    plan = project.json("store", "migrate-objects", "--to", "cas", "--dry-run")
    assert (plan["keys"], plan["already_there"], plan["copied"]) == (4, 0, 0)
    assert plan["bytes"] == sum(p.stat().st_size for p in local_blobs)
    assert not root.exists() or blob_files(root) == []  # a dry run copies nothing
    assert "objects" not in (project.folder / ".agentenv" / "config.toml").read_text().split("[plugins")[0]

    done = project.json("store", "migrate-objects", "--to", "cas")
    assert (done["keys"], done["copied"], done["verified"]) == (4, 4, 4)
    assert done["cleanup"] == "agentenv store cleanup-objects --store local"
    config = (project.folder / ".agentenv" / "config.toml").read_text()
    assert config == f'[plugins.agentenv-cas-store]\nroot = "{root}"\n\n[store]\nobjects = "cas"\n'  # appended
    assert len(blob_files(root)) == 4
    assert all(p.exists() for p in local_blobs)  # the old bytes are kept until the cleanup

    # runs and artifact gets work on the new store
    assert project.json("run", "hello")[0]["status"] == "passed"
    assert artifact_files(project, "dataset", tmp_path / "after") == before
    assert project.json("store", "migrate-objects", "--to", "local", "--dry-run")["already_there"] == 4

    # the cleanup refuses the store in use, says what it would do, then removes the old copies
    refused = project.agentenv("store", "cleanup-objects", "--store", "cas", code=1)
    assert "is the object store in use" in refused.stderr
    assert "run again with --yes" in project.agentenv("store", "cleanup-objects", "--store", "local").stdout
    assert all(p.exists() for p in local_blobs)
    assert "Removed 4 key(s) and 4 file(s)" in project.agentenv("store", "cleanup-objects", "--store", "local",
                                                                "--yes").stdout
    assert not any(p.exists() for p in local_blobs)
    assert artifact_files(project, "dataset", tmp_path / "after-cleanup") == before
    assert project.json("run", "hello")[0]["status"] == "passed"


def test_two_projects_sharing_a_root_store_each_content_once_and_gc_frees_a_deleted_projects(
        venv: PluginVenv, tmp_path: Path, home: Path) -> None:
    root = tmp_path / "shared-cas"
    first = Project(venv, tmp_path / "one", root, home, cas=True)
    second = Project(venv, tmp_path / "two", root, home, cas=True)
    assert first.json("run", str(HANDBOOK))[0]["status"] == "passed"
    # policy.md and policy-copy.md are the same bytes: 3 files, 2 blobs
    assert len(blob_files(root)) == 2
    assert second.json("run", str(HANDBOOK))[0]["status"] == "passed"
    assert len(blob_files(root)) == 2  # the second project added no blob
    info = second.json("cas", "info")
    assert (info["blobs"], info["projects"]) == (2, 2)
    extra = tmp_path / "only-two.txt"
    extra.write_text("only the second project has this\n")
    second.agentenv("artifact", "put", str(extra), "--id", "only-two")
    assert len(blob_files(root)) == 3

    # nothing is unreferenced while both projects live
    assert first.json("cas", "gc")["removed"] == 0
    assert len(blob_files(root)) == 3
    # the second project is deleted: its own blob goes, the shared ones stay for the first
    import shutil

    shutil.rmtree(second.folder)
    plan = first.json("cas", "gc", "--dry-run")
    assert (plan["removed"], plan["projects_gone"]) == (1, 1)
    assert len(blob_files(root)) == 3
    report = first.json("cas", "gc")
    assert (report["removed"], report["projects"], report["projects_gone"]) == (1, 1, 1)
    assert len(blob_files(root)) == 2
    assert first.json("run", str(HANDBOOK))[0]["status"] == "passed"
    assert first.json("cas", "info")["projects"] == 1


def test_a_migration_killed_part_way_resumes_and_finishes(venv: PluginVenv, tmp_path: Path, home: Path) -> None:
    root = tmp_path / "cas"
    project = Project(venv, tmp_path / "p", root, home)
    count = 300
    project.python(
        "from agentenv_local.hub import connect\n"
        "with connect() as s:\n"
        f"    for i in range({count}):\n"
        "        s.store.objects.put(f'bulk/{i:04d}.txt', f'object {i}\\n'.encode() * 50, 'text/plain')\n")
    proc = subprocess.Popen(["agentenv", "store", "migrate-objects", "--to", "cas", "-v"], cwd=project.folder,
                            env=venv.environ(home), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    seen = [proc.stdout.readline() for _ in range(5)]
    assert all(line.startswith("copied bulk/") for line in seen), seen
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    proc.stdout.close()
    assert proc.stderr is not None
    proc.stderr.close()

    config = (project.folder / ".agentenv" / "config.toml").read_text()
    assert "[store]" not in config  # not switched: not every key was there
    plan = project.json("store", "migrate-objects", "--to", "cas", "--dry-run")
    assert plan["keys"] == count and 5 <= plan["already_there"] < count

    done = project.json("store", "migrate-objects", "--to", "cas")
    assert done["verified"] == count and done["copied"] == count - plan["already_there"]
    assert '[store]\nobjects = "cas"' in (project.folder / ".agentenv" / "config.toml").read_text()
    assert len(blob_files(root)) == count
    got = project.python(
        "from agentenv_local.hub import connect\n"
        "with connect() as s:\n"
        "    print(len(s.store.objects.list('bulk/')), s.store.objects.get('bulk/0299.txt')[:11].decode())\n")
    assert got.split() == [str(count), "object", "299"]


def test_a_damaged_blob_is_refused_on_read_and_putting_the_bytes_again_repairs_it(
        venv: PluginVenv, tmp_path: Path, home: Path) -> None:
    root = tmp_path / "cas"
    project = Project(venv, tmp_path / "p", root, home, cas=True)
    note = tmp_path / "note.txt"
    note.write_text("a note worth keeping\n" * 20)
    project.agentenv("artifact", "put", str(note), "--id", "note")
    sha = hashlib.sha256(note.read_bytes()).hexdigest()
    blob = root / "blobs" / sha[:2] / sha[2:]
    os.chmod(blob, 0o644)
    raw = bytearray(blob.read_bytes())
    raw[-3] ^= 0xFF  # one flipped byte inside the compressed stream
    blob.write_bytes(bytes(raw))

    failed = project.agentenv("artifact", "get", "--id", "note", "--output-dir", str(tmp_path / "out"), code=1)
    assert "is corrupt in the CAS root" in failed.stderr and str(blob) in failed.stderr
    assert "put the same bytes again" in failed.stderr
    assert not (tmp_path / "out" / "note.txt").exists()

    project.agentenv("artifact", "put", str(note), "--id", "note-again")  # same content: the blob is rewritten
    assert artifact_files(project, "note", tmp_path / "out2") == {"note.txt": note.read_bytes()}


def test_bad_store_names_and_settings_are_clear_errors_that_store_nothing(venv: PluginVenv, tmp_path: Path,
                                                                         home: Path) -> None:
    project = Project(venv, tmp_path / "p", tmp_path / "cas", home)
    assert project.json("run", "hello")[0]["status"] == "passed"
    unknown = project.agentenv("store", "migrate-objects", "--to", "s3", code=1)
    assert "'s3': no such object store" in unknown.stderr and "available: cas, local" in unknown.stderr
    same = project.agentenv("store", "migrate-objects", "--to", "local", code=1)
    assert "already 'local'" in same.stderr

    bad = Project(venv, tmp_path / "bad", tmp_path / "cas", home, cas=True,
                  extra='compression = "lzma"\nlevel = 40\ncolour = "blue"\n')
    failed = bad.agentenv("run", "hello", code=1)
    for part in ("[plugins.agentenv-cas-store] cannot configure the 'cas' object store",
                 "unknown setting(s) colour; accepted: compression, level, root",
                 "compression = 'lzma'", "level = 40"):
        assert part in failed.stderr, failed.stderr
    assert not (tmp_path / "cas" / "blobs").exists() or blob_files(tmp_path / "cas") == []

    wrong = Project(venv, tmp_path / "wrong", tmp_path / "cas", home, extra="")
    (wrong.folder / ".agentenv" / "config.toml").write_text('[store]\nobjects = "nope"\n')
    failed = wrong.agentenv("runs", "list", code=1)
    assert "[store] objects = 'nope': no such object store" in failed.stderr
    assert "available: cas, local" in failed.stderr


# -- the root itself ----------------------------------------------------------------------------------------------
def _live_project(tmp_path: Path, name: str) -> Path:
    state = tmp_path / name / ".agentenv"
    state.mkdir(parents=True)
    (state / "store.duckdb").write_bytes(b"")  # gc counts a project live while its store file exists
    return state


def test_gc_running_alongside_puts_never_loses_a_put(tmp_path: Path) -> None:
    root = CasRoot(tmp_path / "root")
    state = _live_project(tmp_path, "p")
    root.register("p", state)
    # the same contents written again and again (dedup: the put skips the write) while gc sweeps
    contents = [f"content {i}".encode() for i in range(20)]
    shas = [hashlib.sha256(c).hexdigest() for c in contents]
    stop = threading.Event()
    sweeps = []

    def sweeper() -> None:
        while not stop.is_set():
            sweeps.append(root.gc())

    thread = threading.Thread(target=sweeper)
    thread.start()
    try:
        for _ in range(30):
            for sha, data in zip(shas, contents):
                root.write(sha, data, "p")
                assert root.read(sha) == data
    finally:
        stop.set()
        thread.join()
    assert sweeps and all(s["removed"] == 0 for s in sweeps)
    assert sorted(p.parent.name + p.name for p in (root.path / "blobs").glob("*/*")) == sorted(shas)


def test_blobs_are_compressed_deduplicated_and_checked(tmp_path: Path) -> None:
    root = CasRoot(tmp_path / "root")
    data = b"the same line again\n" * 500
    sha = hashlib.sha256(data).hexdigest()
    assert root.write(sha, data, "a") is True
    assert root.write(sha, data, "b") is False  # another project: the blob is reused
    assert root.blob_path(sha).stat().st_size < len(data) // 10
    assert root.read(sha) == data
    noise = os.urandom(4096)  # incompressible: stored as it is, still under its header
    noise_sha = hashlib.sha256(noise).hexdigest()
    root.write(noise_sha, noise, "a")
    assert root.read(noise_sha) == noise
    path = root.blob_path(noise_sha)
    os.chmod(path, 0o644)
    damaged = bytearray(path.read_bytes())
    damaged[-1] ^= 0xFF
    path.write_bytes(bytes(damaged))
    with pytest.raises(CorruptBlob, match="sha256 no longer matches"):
        root.read(noise_sha)
    path.write_bytes(b"garbage")
    with pytest.raises(CorruptBlob, match="bad header"):
        root.read(noise_sha)
    assert root.write(noise_sha, noise, "a") is True  # a damaged copy is replaced by a sound one
    assert root.read(noise_sha) == noise
