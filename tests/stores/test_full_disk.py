"""A full disk: the failing write says so, and what was stored before stays intact.

The state dir lives on a small tmpfs mounted for the test (needs root, as on CI); elsewhere
the test is skipped rather than faked.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

AGENTENV = [sys.executable, "-m", "agentenv_local.cli.main"]


@pytest.fixture
def tiny_disk(tmp_path):
    mount = tmp_path / "tiny"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def agentenv(*args, home: Path, cwd: Path):
    env = {**os.environ, "AGENTENV_HOME": str(home)}
    return subprocess.run([*AGENTENV, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)


def test_artifact_put_on_a_full_disk_fails_cleanly_and_keeps_what_was_there(tiny_disk, tmp_path):
    home = tiny_disk / "state"
    small = tmp_path / "small.bin"
    small.write_bytes(os.urandom(100_000))
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(6_000_000))  # more than the 4 MiB disk

    assert agentenv("artifact", "put", str(small), "--id", "small", home=home, cwd=tmp_path).returncode == 0
    done = agentenv("artifact", "put", str(big), "--id", "big", home=home, cwd=tmp_path)
    assert done.returncode == 1
    assert "No space left on device" in done.stderr and "disk is full" in done.stderr
    assert "Traceback" not in done.stderr
    assert not list((home / "objects" / "tmp").iterdir()), "a half-written temp file was left behind"

    listed = agentenv("artifact", "list", "--json", home=home, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert [a["id"] for a in __import__("json").loads(listed.stdout)] == ["small"]
    out = tmp_path / "out"
    assert agentenv("artifact", "get", "--id", "small", "--output-dir", str(out), home=home,
                    cwd=tmp_path).returncode == 0
    assert (out / "small.bin").read_bytes() == small.read_bytes()
