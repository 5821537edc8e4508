"""A real two-node Ray cluster on 127.0.0.1 for the executor's tests: a head and a second node with a resource
of its own, each started with `ray start` from this venv, stopped with `ray stop` at the end."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

RAY = Path(sys.executable).parent / "ray"


def ray_available() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return RAY.exists()


def require_ray() -> None:
    """Skip without Ray, unless AGENTENV_REQUIRE_RAY=1 (then fail: CI's setup installs it)."""
    if ray_available():
        return
    if os.environ.get("AGENTENV_REQUIRE_RAY") == "1":
        pytest.fail("Ray is not installed but AGENTENV_REQUIRE_RAY=1: run scripts/setup.sh --test")
    pytest.skip("Ray is not installed (pip install 'agentenv-local[ray]')")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ray_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTENV_", "RAY_"))}
    env.update(RAY_USAGE_STATS_ENABLED="0", RAY_DEDUP_LOGS="0")
    return env


@dataclass
class Cluster:
    address: str
    temp_dir: Path

    def ray(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
        return subprocess.run([str(RAY), *args], env=ray_env(), capture_output=True, text=True, timeout=timeout)


def short_temp_dir() -> Path:
    """A folder for a cluster's sessions directly under /tmp: Ray puts unix sockets under it (session_<time>/
    sockets/plasma_store.1), and a parallel worker's pytest folder (/tmp/pytest-of-root/pytest-N/popen-gwK/...)
    makes those paths longer than AF_UNIX's 107 bytes. `stop_cluster` removes it."""
    import tempfile

    return Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))


def start_cluster(temp_dir: Path) -> Cluster:
    """A head (1 CPU) and a second node (1 CPU, resource `second`): two runs at once land on two nodes. `temp_dir`:
    a short_temp_dir()."""
    port = free_port()
    address = f"127.0.0.1:{port}"
    cluster = Cluster(address, temp_dir)
    try:
        head = cluster.ray("start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}", "--num-cpus=1",
                           "--include-dashboard=false", f"--temp-dir={temp_dir}", "--disable-usage-stats")
        assert head.returncode == 0, head.stdout + head.stderr
        second = cluster.ray("start", f"--address={address}", "--node-ip-address=127.0.0.1", "--num-cpus=1",
                             '--resources={"second": 1}', "--disable-usage-stats")
        assert second.returncode == 0, second.stdout + second.stderr
    except BaseException:
        stop_cluster(cluster)  # what started of it goes: a half-started cluster must not outlive the test
        raise
    return cluster


def stop_cluster(cluster: Cluster) -> None:
    import shutil

    cluster.ray("stop", "--force", timeout=120)
    shutil.rmtree(cluster.temp_dir, ignore_errors=True)
