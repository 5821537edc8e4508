"""The docs ship inside the wheel (agentenv_local/_docs) and the docs server reads them from there: build the
wheel offline, unpack it, and search it with the checkout out of the way."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def test_installed_wheel_serves_its_own_docs(tmp_path):
    pytest.importorskip("hatchling")
    wheels = tmp_path / "wheels"
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           "-w", str(wheels), str(ROOT)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    (wheel,) = wheels.glob("agentenv_local-*.whl")
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        z.extractall(site)
    for page in ("index.md", "environments/composing.md", "reference/mcp-docs-server.md", "llms.txt",
                 "llms-full.txt"):
        assert f"agentenv_local/_docs/{page}" in names
    assert "agentenv_local/docs_server/server.py" in names

    code = ("import json; from agentenv_local.docs_server import docs_dir, search_docs; "
            "print(json.dumps([str(docs_dir()), search_docs('virtual clock', 1)[0]['page']]))")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTENV_")}
    env["PYTHONPATH"] = str(site)  # ahead of the editable install's path to the checkout
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    where, page = json.loads(done.stdout)
    assert Path(where) == site / "agentenv_local" / "_docs"
    assert page == "environments/virtual-clock.md"
