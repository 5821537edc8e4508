"""run_code: a script artifact's run(input) in a separate Python process."""

from __future__ import annotations

import pytest

from agentenv_local.errors import StepError

SCRIPT = b'''
import os

def run(input):
    args = input["args"]
    return {"sum": args["a"] + args["b"], "seen": sorted(input["results"]), "cwd": os.getcwd()}
'''

ASYNC_SCRIPT = b'''
import asyncio
from helper import double   # a sibling module of the bundle

async def main(input):
    await asyncio.sleep(0)
    return [double(x) for x in input["args"]]
'''


def test_result_goes_to_script_results(run):
    run.put_artifact("adder", {"adder.py": SCRIPT})
    run.metadata["script_results"]["earlier"] = {"x": 1}
    run.execute(run.step({"id": "add", "type": "run_code", "script_artifact_id": "adder", "args": {"a": 2, "b": 3}}))
    result = run.metadata["script_results"]["add"]
    assert result["sum"] == 5 and result["seen"] == ["earlier"]


def test_async_entrypoint_bundle_and_result_id(run):
    run.put_artifact("bundle", {"main.py": ASYNC_SCRIPT, "helper.py": b"def double(x):\n    return 2 * x\n"})
    run.execute(run.step({"id": "s", "type": "run_code", "script_artifact_id": "bundle", "entrypoint": "main",
                          "args": [1, 2, 3], "result_id": "doubled"}))
    assert run.metadata["script_results"]["doubled"] == [2, 4, 6]


def test_runs_in_the_sandbox_folder(deployed):
    deployed.put_artifact("writer", {"w.py": b'''
import os, pathlib
def run(input):
    pathlib.Path("out.txt").write_text(input["args"]["text"])
    print("noise on stdout is fine")
    return {"cwd": os.getcwd(), "sandbox": os.environ.get("AGENTENV_SANDBOX")}
'''})
    deployed.execute(deployed.step({"id": "w", "type": "run_code", "script_artifact_id": "writer",
                                    "sandbox_name": "sandbox", "args": {"text": "hi"}}))
    sandbox = deployed.sandbox()
    result = deployed.metadata["script_results"]["w"]
    assert result == {"cwd": str(sandbox.root), "sandbox": sandbox.sandbox_id}
    assert (sandbox.root / "out.txt").read_text() == "hi"
    scratch = sandbox.root / ".agentenv-run-code"
    assert not scratch.exists() or not any(scratch.iterdir())  # the runner's files are cleaned up


def test_script_exception_becomes_a_step_error_with_traceback(run):
    source = b"def helper():\n    raise ValueError('bad input 42')\n\ndef run(input):\n    helper()\n"
    run.put_artifact("boom", {"boom.py": source})
    with pytest.raises(StepError) as info:
        run.execute(run.step({"id": "b", "type": "run_code", "script_artifact_id": "boom"}))
    message = info.value.message
    assert "ValueError: bad input 42" in message and "in helper" in message and "boom.py" in message
    assert "b" not in run.metadata["script_results"]


def test_timeout_kills_the_script(run):
    run.put_artifact("slow", {"slow.py": b"import time\ndef run(input):\n    time.sleep(60)\n"})
    with pytest.raises(StepError, match="did not finish within 0.5s"):
        run.execute(run.step({"id": "s", "type": "run_code", "script_artifact_id": "slow", "timeout_seconds": 0.5}))


def test_timeout_in_a_sandbox(deployed):
    deployed.put_artifact("slow", {"slow.py": b"import time\ndef run(input):\n    time.sleep(60)\n"})
    with pytest.raises(StepError, match="did not finish"):
        deployed.execute(deployed.step({"id": "s", "type": "run_code", "script_artifact_id": "slow",
                                        "sandbox_name": "sandbox", "timeout_seconds": 0.5}))


def test_result_must_be_json_and_entrypoint_must_exist(run):
    run.put_artifact("odd", {"odd.py": b"def run(input):\n    return {1, 2}\n"})
    with pytest.raises(StepError, match="not JSON"):
        run.execute(run.step({"id": "o", "type": "run_code", "script_artifact_id": "odd"}))
    with pytest.raises(StepError, match="defines no function 'go'"):
        run.execute(run.step({"id": "o", "type": "run_code", "script_artifact_id": "odd", "entrypoint": "go"}))


def test_script_file_choice(run):
    run.put_artifact("two", {"a.py": b"def run(i):\n    return 'a'\n", "b.py": b"def run(i):\n    return 'b'\n"})
    with pytest.raises(StepError, match="say which one") as info:
        run.execute(run.step({"id": "x", "type": "run_code", "script_artifact_id": "two"}))
    assert "a.py, b.py" in info.value.hint
    run.execute(run.step({"id": "x", "type": "run_code", "script_artifact_id": "two", "script_file": "b.py"}))
    assert run.metadata["script_results"]["x"] == "b"
    with pytest.raises(StepError, match="no file 'c.py'"):
        run.execute(run.step({"id": "x", "type": "run_code", "script_artifact_id": "two", "script_file": "c.py"}))


def test_missing_artifact_and_missing_sandbox(run):
    with pytest.raises(StepError, match="artifact 'ghost' not found"):
        run.execute(run.step({"id": "g", "type": "run_code", "script_artifact_id": "ghost"}))
    run.put_artifact("adder", {"adder.py": SCRIPT})
    with pytest.raises(StepError, match="no sandbox named 'box'"):
        run.execute(run.step({"id": "g", "type": "run_code", "script_artifact_id": "adder", "sandbox_name": "box",
                              "args": {"a": 1, "b": 1}}))


def test_config_problems(run):
    def problems(**fields):
        return run.step({"id": "r", "type": "run_code", "script_artifact_id": "s", **fields}).config_problems()

    assert problems() == []
    assert problems(entrypoint="not a name") == ["entrypoint: 'not a name' is not a Python function name"]
    assert problems(script_file="../x.py") == ["script_file: '../x.py' must be a relative path inside the artifact"]
    assert problems(sandbox_name="s", env_id="e") == ["sandbox_name, env_id: run in one place per step"]
    assert run.step({"id": "r", "type": "run_code", "script_artifact_id": "s"}).artifact_ref_fields == (
        "script_artifact_id",)
