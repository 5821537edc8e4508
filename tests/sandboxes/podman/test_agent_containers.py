"""deploy_agent with runtime "container": the scripted agent in a Podman container (the env runtime image),
reaching the run's env gateway on this machine's loopback, prompted over its published A2A port."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from kits.hub import cli, runs_json, show_json, write_bundle
from kits.podman import containers_left

ROOT = Path(__file__).resolve().parents[3]


def test_a_scripted_agent_in_a_container_uses_the_env_through_the_gateway(tmp_path, podman_base_image):
    project = tmp_path / "proj"
    project.mkdir()
    write_bundle(project, "b", {"t": [
        {"id": "env", "type": "deploy_env", "env_id": "echo"},
        {"id": "agent", "type": "deploy_agent", "agent_name": "solver", "runtime": "container",
         "env_ids": ["echo"], "role": "support", "ready_timeout_seconds": 120,
         "config": {"plan": [{"tool": "echo", "args": {"text": "hi {input}"}, "save_as": "e"},
                             {"tool": "whoami", "save_as": "w"},
                             {"reply": "echoed: {e} as {w.role}"}]}},
        {"id": "ask", "type": "prompt_agent", "agent_name": "solver", "prompt": "there", "timeout_seconds": 60},
    ]})
    env = project / "b" / "envs" / "echo"
    env.mkdir(parents=True)
    shutil.copy(ROOT / "examples" / "envs" / "echo" / "server.py", env / "server.py")
    (env / "env.toml").write_text('module = "server.py:Echo"\n')
    try:
        out = cli(project, "run", "./b", "--sandbox", "podman", timeout=600)
        assert out.returncode == 0, out.stdout + out.stderr
        context = show_json(project, runs_json(project)[0]["run_id"])["context"]
        assert context["prompt_responses"][0]["response"] == "echoed: hi there as support"
        agent = context["deployed_agents"][0]
        assert agent["runtime"] == "container" and agent["sandbox_type"] == "podman" and not agent["on_host"]
        assert agent["a2a_url"].startswith("http://127.0.0.1:")
    finally:
        project_id = hashlib.sha256(str((project / ".agentenv").resolve()).encode()).hexdigest()[:12]
        assert containers_left(project_id) == []
        json.dumps({})
