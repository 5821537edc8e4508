"""The sandbox steps on Podman containers, end to end through `agentenv run --sandbox podman`:
deploy_sandbox, load_artifact, run_code, run_container_unit_tests_verifier (a reward file, a
memory-hungry test killed at its limit), collect_artifacts, verify_sandbox, teardown."""

from __future__ import annotations

import hashlib
import json

from kits.hub import cli, show_json, write_bundle
from kits.podman import containers_left

TESTS = '''import unittest
from calc import add

class T(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)

if __name__ == "__main__":
    unittest.main()
'''

STEPS = [
    {"id": "box", "type": "deploy_sandbox", "sandbox_name": "box", "memory_mb": 160},
    {"id": "load", "type": "load_artifact", "artifact_id": "project", "sandbox_name": "box",
     "destination_path": "/app/project"},
    {"id": "tests", "type": "run_container_unit_tests_verifier", "sandbox_name": "box",
     "setup_commands": ["mkdir -p /app/out"],
     "command": "cd /app/project && python3 test_calc.py && echo 0.75 > /app/out/reward.txt"
                " && uname -a > /app/out/where.txt",
     "reward_path": "/app/out/reward.txt", "result_paths": ["/app/out/where.txt"]},
    {"id": "hungry", "type": "run_container_unit_tests_verifier", "sandbox_name": "box",
     "command": "python3 -c 'x = bytearray(400 * 1024 * 1024)'"},
    {"id": "collect", "type": "collect_artifacts", "sandbox_name": "box", "base_path": "/app/out"},
    {"id": "check", "type": "verify_sandbox", "sandbox_name": "box", "criteria": [
        {"type": "probe_file_exists", "paths": ["/app/out/where.txt"]},
        {"type": "bash_cmd_succeeds", "bash_cmd": "test ! -w /usr && grep -q '^CapEff:\\s*0*$' /proc/self/status"}]},
]


def test_sandbox_steps_run_in_a_container(tmp_path, podman_base_image):
    project = tmp_path / "proj"
    project.mkdir()
    write_bundle(project, "calc", {"calc": STEPS}, artifacts={"project": {
        "calc.py": "def add(a, b):\n    return a + b\n", "test_calc.py": TESTS}})
    try:
        out = cli(project, "run", "./calc", "--sandbox", "podman", timeout=300)
        runs = json.loads(cli(project, "runs", "list", "--json", check=True).stdout)
        run = show_json(project, runs[0]["run_id"])
        verifications = run["verifications"]
        assert verifications["tests"]["score"] == 0.75, out.stdout + out.stderr
        assert verifications["check"]["score"] == 1, verifications["check"]
        hungry = verifications["hungry"]["results"][0]
        assert verifications["hungry"]["score"] == 0 and "memory" in hungry["justification"]
        assert run["context"]["deployed_sandboxes"][0]["sandbox_type"] == "podman"
        collected = run["context"]["metadata"]["collected_artifacts"]["collect"]
        names = sorted(f["path"] if isinstance(f, dict) else f for f in collected["files"])
        assert names == ["reward.txt", "where.txt"], collected
        assert out.returncode == 1  # the hungry verifier scored 0, so the run fails: as it should
    finally:
        project_id = hashlib.sha256(str((project / ".agentenv").resolve()).encode()).hexdigest()[:12]
        assert containers_left(project_id) == []
