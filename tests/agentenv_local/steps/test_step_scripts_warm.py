"""run_code and env_outcome_verifier scripts on this machine: the same results, errors and process conditions in a
fork of the warm script worker as in a fresh interpreter (`[scripts] warm = false`), the reference's mcp 1.x
verifier on both paths, the switch, and the fallback to a fresh interpreter when the worker can't start."""

from __future__ import annotations

import os
import re

import pytest
from kits.env_steps import deployed_env
from kits.gateway import load
from kits.reference_bundles import copy_reference_bundle

from agentenv_local import script_worker
from agentenv_local.errors import StepError

PROBE = b'''
import os, sys

def run(input):
    print("noise on stdout")
    return {"cwd": os.getcwd(), "argv": sys.argv, "path": sys.path, "environ": dict(os.environ),
            "fds": sorted(os.listdir("/proc/self/fd")), "main": sys.modules["__main__"].__file__,
            "session_leader": os.getsid(0) == os.getpid(), "args": input["args"], "results": sorted(input["results"])}
'''

SCENARIOS = {
    "probe": ({"probe.py": PROBE}, {"args": {"a": 1}}),
    "async bundle": ({"main.py": b"import asyncio\nfrom helper import double\n\nasync def main(input):\n"
                                 b"    await asyncio.sleep(0)\n    return [double(x) for x in input['args']]\n",
                      "helper.py": b"def double(x):\n    return 2 * x\n"}, {"entrypoint": "main", "args": [1, 2]}),
    "exception": ({"boom.py": b"def helper():\n    raise ValueError('bad input 42')\n\ndef run(input):\n"
                              b"    helper()\n"}, {}),
    "not json": ({"odd.py": b"def run(input):\n    return {1, 2}\n"}, {}),
    "no entrypoint": ({"odd.py": b"def run(input):\n    return 1\n"}, {"entrypoint": "go"}),
    "exit without result": ({"quit.py": b"import sys\nprint('bye', file=sys.stderr)\nsys.exit(3)\n"}, {}),
    "timeout": ({"slow.py": b"import time\ndef run(input):\n    time.sleep(60)\n"}, {"timeout_seconds": 1.5}),
    "too big": ({"big.py": b"def run(input):\n    return 'x' * (51 * 1024 * 1024)\n"}, {}),
}


def set_warm(run, warm: bool) -> None:
    run.services.config.values["scripts"] = {"warm": warm}


def outcome(run, step_id: str, files: dict[str, bytes], fields: dict, warm: bool):
    """The step's stored result or its error message, with the per-run temporary folder named <folder>."""
    set_warm(run, warm)
    run.put_artifact(f"a-{step_id}", files)
    try:
        run.execute(run.step({"id": step_id, "type": "run_code", "script_artifact_id": f"a-{step_id}", **fields}))
    except StepError as exc:
        text = f"error: {exc.message}"
    else:
        text = repr(run.metadata["script_results"].pop(step_id))  # the next script sees the same results
    text = re.sub(r"/[^'\" ]*?agentenv-run-code-[A-Za-z0-9_]+", "<folder>", text)
    return text.replace(f"'{step_id}'", "<id>").replace(f"a-{step_id}", "<artifact>")


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_run_code_gives_the_same_outcome_warm_and_cold(run, name):
    files, fields = SCENARIOS[name]
    run.metadata.setdefault("script_results", {})["earlier"] = 1
    warm = outcome(run, "w", files, fields, warm=True)
    cold = outcome(run, "c", files, fields, warm=False)
    assert warm == cold
    assert "<folder>" in warm if name == "probe" else True  # the probe's paths were all the folder's


def test_the_switch_picks_the_warm_worker_or_a_fresh_interpreter(run):
    run.put_artifact("parent", {"p.py": b"import os\ndef run(input):\n    return os.getppid()\n"})
    for warm in (True, False):
        set_warm(run, warm)
        run.execute(run.step({"id": f"p{warm}", "type": "run_code", "script_artifact_id": "parent"}))
    assert run.metadata["script_results"]["pTrue"] == script_worker.worker_pid()
    assert run.metadata["script_results"]["pFalse"] == os.getpid()  # run_process's child: a fresh interpreter


def test_a_worker_that_cannot_start_means_a_fresh_interpreter_and_one_log_line(run, monkeypatch):
    script_worker.stop()
    monkeypatch.setattr(script_worker, "_failure", None)
    monkeypatch.setattr(script_worker, "WORKER_MODULE", "agentenv_local.no_such_worker")
    run.put_artifact("parent", {"p.py": b"import os\ndef run(input):\n    return os.getppid()\n"})
    run.execute(run.step({"id": "p", "type": "run_code", "script_artifact_id": "parent"}))
    assert run.metadata["script_results"]["p"] == os.getpid()
    notes = [e["body"]["message"] for e in run.store.events.query(run_id=run.run_id, kinds=["step.log"])
             if "warm script worker" in e["body"]["message"]]
    assert len(notes) == 1 and "\n" not in notes[0] and "No module named 'agentenv_local.no_such_worker'" in notes[0]


ECHO_ENV = '''
from agentenv_local.env import Env, environment_card, tool


@environment_card(name="inbox")
class Inbox(Env):
    @tool()
    def echo(self, text: str) -> str:
        """Return the text it's sent."""
        return text
'''


def test_the_references_mcp1_verifier_gives_the_same_verification_warm_and_cold(run, tmp_path):
    server = tmp_path / "echo_server.py"
    server.write_text(ECHO_ENV)
    script = copy_reference_bundle("echo-mcp", tmp_path / "ref") / "artifacts" / "check_echo" / "verify.py"
    run.put_artifact("check_echo", {"verify.py": script.read_bytes()})
    rows = {}
    with deployed_env(run, "inbox", {"inbox": load(server)}):
        for warm in (True, False):
            set_warm(run, warm)
            run.execute(run.step({"id": f"v{warm}", "type": "env_outcome_verifier", "env_id": "inbox",
                                  "file_artifact_id": "check_echo"}))
            verification = run.metadata["verifications"][f"v{warm}"]
            rows[warm] = (verification["results"], verification["score"])
    assert rows[True] == rows[False] and rows[True][1] == 1.0
