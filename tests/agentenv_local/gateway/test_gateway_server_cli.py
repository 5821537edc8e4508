"""`python -m agentenv_local.gateway`: a gateway for manual use, with an env file run as a subprocess child."""

from __future__ import annotations

import subprocess
import sys
import time

import httpx2
from kits.gateway import ECHO, NOTES, ROOT, free_port


def test_module_cli_serves_children_and_stops_them():
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "agentenv_local.gateway", "--name", "demo",
                             "--child", f"echo={ECHO}", "--child", f"notes={NOTES}", "--mode", "consistent",
                             "--port", str(port)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    try:
        assert f"serving on http://127.0.0.1:{port}" in proc.stderr.readline()
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        with httpx2.Client(base_url=base, timeout=10) as h:
            while True:
                try:
                    if h.get("/state").status_code == 200:
                        break
                except httpx2.HTTPError:
                    pass
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.1)
            assert h.get("/.well-known/agent-env.json").json()["name"] == "demo"
            r = h.post("/step", json={"action": "call_tool", "tool_name": "echo", "arguments": {"text": "cli"}})
            assert r.json()["structuredContent"] == {"result": "cli"}
            assert [s["name"] for s in h.get("/state").json()["mcp_servers"]] == ["echo", "notes"]
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    assert proc.returncode is not None


def test_module_cli_refuses_a_malformed_child():
    out = subprocess.run([sys.executable, "-m", "agentenv_local.gateway", "--child", "nothing"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 2 and "expected NAME=URL or NAME=PATH" in out.stderr
