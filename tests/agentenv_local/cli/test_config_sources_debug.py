"""`agentenv config sources|debug` through the real console script, with real config files and variables."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from kits.warm_cli import run_agentenv

AGENTENV = Path(sys.executable).parent / "agentenv"
PLANTED = "sk-PLANTED-sources-5c4b3a2f1e"


def agentenv(cwd: Path, *args: str, code: int = 0, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("AGENTENV_")}
    proc = run_agentenv(list(args), cwd=cwd, env={**base, **env}, timeout=60)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == code, proc.stdout + proc.stderr
    return proc


def write_config(root: Path, text: str) -> Path:
    (root / ".agentenv").mkdir(parents=True, exist_ok=True)
    path = root / ".agentenv" / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_sources_lists_every_layer_in_precedence_order_found_or_not(tmp_path):
    layers = json.loads(agentenv(tmp_path, "config", "sources", "--json").stdout)["sources"]
    kinds = [layer["kind"] for layer in layers]
    assert kinds[0] == "default" and kinds[1] == "file" and kinds[-1] == "code"
    assert kinds.index("secrets") > max(i for i, k in enumerate(kinds) if k == "env")
    file_layer = layers[1]
    assert file_layer["present"] is False and file_layer["where"].endswith(".agentenv/config.toml")
    concurrency = next(x for x in layers if x["where"] == "$AGENTENV_RUNNER_CONCURRENCY")
    assert concurrency == {"kind": "env", "where": "$AGENTENV_RUNNER_CONCURRENCY", "present": False, "detail": "",
                           "shadows": ["runner.concurrency"]}

    path = write_config(tmp_path, f'[runner]\nconcurrency = 3\n[model]\napi_key = "{PLANTED}"\n')
    proc = agentenv(tmp_path, "config", "sources", AGENTENV_RUNNER_CONCURRENCY="5", AGENTENV_RUNER_X="1")
    lines = proc.stdout.splitlines()
    assert f"-> file     {path} -> [model.api_key, runner.concurrency]  (in the state dir)" in lines
    assert "-> env      $AGENTENV_RUNNER_CONCURRENCY -> [runner.concurrency]" in lines
    assert "-> env      $AGENTENV_RUNER_X  (ignored: matches no config key)" in lines
    assert "   env      $AGENTENV_SANDBOX_DEFAULT -> [sandbox.default]" in lines
    assert PLANTED not in proc.stdout


def test_sources_reports_a_bad_file_instead_of_failing(tmp_path):
    write_config(tmp_path, "[runner\n")
    layers = json.loads(agentenv(tmp_path, "config", "sources", "--json").stdout)["sources"]
    assert "unreadable: cannot parse" in layers[1]["detail"]
    assert "the config cannot be loaded" in layers[-2]["detail"]  # the secrets layer says why it is unknown
    other = tmp_path / "other.toml"
    other.write_text("[runner]\nconcurrency = 2\n")
    layers = json.loads(agentenv(tmp_path, "config", "sources", "--json", AGENTENV_CONFIG=str(other)).stdout)
    assert layers["sources"][1] == {"kind": "file", "where": str(other), "present": True,
                                    "detail": "from $AGENTENV_CONFIG", "shadows": ["runner.concurrency"]}


def test_debug_shows_the_search_path_and_each_value_with_its_source_masked(tmp_path):
    project = tmp_path / "proj"
    (project / "sub").mkdir(parents=True)
    path = write_config(project, f'[runner]\nconcurrency = 3\n[model]\napi_key = "{PLANTED}"\n')
    proc = agentenv(project / "sub", "config", "debug", AGENTENV_RUNNER_STEP_CONCURRENCY="2")
    lines = proc.stdout.splitlines()
    walking = "state dir, walking up from the working directory"
    assert f"   {project / 'sub' / '.agentenv'}  ({walking}, exists: no)" in lines
    assert f"-> {project / '.agentenv'}  (state dir, walking up from the working directory, exists: yes)" in lines
    assert f"-> {path}  (config file in the state dir, exists: yes)" in lines
    assert any(line.split() == ["runner.concurrency", "=", "3", f"(file:{path})"] for line in lines)
    assert any(line.split() == ["runner.step_concurrency", "=", "2", "(env:AGENTENV_RUNNER_STEP_CONCURRENCY)"]
               for line in lines)
    assert any(line.split() == ["model.api_key", "=", "***", f"(file:{path})"] for line in lines)
    assert PLANTED not in proc.stdout

    data = json.loads(agentenv(project / "sub", "config", "debug", "--json").stdout)
    assert [p["used"] for p in data["search_path"]] == [False, True, True]
    assert data["config"]["keys"]["model.api_key"] == {"value": "***", "source": f"file:{path}"}
    assert PLANTED not in json.dumps(data)

    write_config(project, "[runner]\nconcurency = 3\n")
    proc = agentenv(project, "config", "debug", code=1)
    assert "the config cannot be loaded: unknown key 'runner.concurency'" in proc.stdout
    assert "did you mean 'runner.concurrency'?" in proc.stdout
