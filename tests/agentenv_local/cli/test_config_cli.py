"""`agentenv config show|explain` through the real CLI (CliRunner and a real subprocess)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner
from kits.config import write_config

from agentenv_local.cli.main import cli

PLANTED = "sk-PLANTED-cli-9d8e7f"
AGENTENV = Path(sys.executable).parent / "agentenv"



def invoke(args, cwd: Path, monkeypatch):
    monkeypatch.chdir(cwd)
    return CliRunner().invoke(cli, args)


def test_show_with_no_file(tmp_path, monkeypatch):
    result = invoke(["config", "show"], tmp_path, monkeypatch)
    assert result.exit_code == 0, result.output
    assert "(none: every value is a built-in default)" in result.output
    assert "runner.concurrency" in result.output and "= 4  (default)" in result.output
    assert "sandbox.default" in result.output


def test_show_json_and_sources(tmp_path, monkeypatch):
    path = write_config(tmp_path, "[runner]\nconcurrency = 5\n")
    monkeypatch.setenv("AGENTENV_HUB_LINGER_S", "3")
    monkeypatch.setenv("AGENTENV_NOT_A_KEY", "1")
    result = invoke(["config", "show", "--json"], tmp_path, monkeypatch)
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["file"] == str(path)
    assert data["keys"]["runner.concurrency"] == {"value": 5, "source": f"file:{path}"}
    assert data["keys"]["hub.linger_s"] == {"value": 3.0, "source": "env:AGENTENV_HUB_LINGER_S"}
    assert any("AGENTENV_NOT_A_KEY" in w for w in data["warnings"])

    text = invoke(["config", "show"], tmp_path, monkeypatch)
    assert f"config file: {path}" in text.output
    assert "Warnings:" in text.output and "AGENTENV_NOT_A_KEY" in text.output


def test_explain_shows_winner_and_shadowed(tmp_path, monkeypatch):
    path = write_config(tmp_path, "[runner]\nconcurrency = 5\n")
    monkeypatch.setenv("AGENTENV_RUNNER_CONCURRENCY", "6")
    result = invoke(["config", "explain", "runner.concurrency"], tmp_path, monkeypatch)
    assert result.exit_code == 0, result.output
    out = result.output
    assert "runner.concurrency = 6" in out
    assert "source:   env:AGENTENV_RUNNER_CONCURRENCY" in out
    assert f"5  (file:{path})" in out and "4  (default)" in out

    data = json.loads(invoke(["config", "explain", "runner.concurrency", "--json"], tmp_path, monkeypatch).stdout)
    assert data["value"] == 6
    assert data["source"] == "env:AGENTENV_RUNNER_CONCURRENCY"
    assert [s["source"] for s in data["shadowed"]] == [f"file:{path}", "default"]


def test_explain_a_section(tmp_path, monkeypatch):
    result = invoke(["config", "explain", "runner"], tmp_path, monkeypatch)
    assert result.exit_code == 0, result.output
    assert "runner.concurrency = 4" in result.output and "runner.step_concurrency = 8" in result.output


def test_explain_unknown_path_lists_valid_keys(tmp_path, monkeypatch):
    result = invoke(["config", "explain", "runner.concurency"], tmp_path, monkeypatch)
    assert result.exit_code == 1
    assert "Error: unknown config key 'runner.concurency'" in result.stderr
    assert "runner.concurrency, runner.step_concurrency" in result.stderr
    assert "did you mean 'runner.concurrency'" in result.stderr
    assert "Traceback" not in result.output


def test_unknown_key_in_file_exits_1_with_the_valid_keys(tmp_path, monkeypatch):
    path = write_config(tmp_path, "[hub]\nlinger = 2\n")
    result = invoke(["config", "show"], tmp_path, monkeypatch)
    assert result.exit_code == 1
    assert "unknown key 'hub.linger'" in result.stderr and str(path) in result.stderr
    assert "start_timeout_s, linger_s" in result.stderr
    assert "Traceback" not in result.output


def test_wrong_type_exits_1(tmp_path, monkeypatch):
    write_config(tmp_path, '[runner]\nconcurrency = "many"\n')
    result = invoke(["config", "show"], tmp_path, monkeypatch)
    assert result.exit_code == 1
    assert "'runner.concurrency' must be an integer from 1 to 1000, got \"many\"" in result.stderr


def test_malformed_toml_exits_1(tmp_path, monkeypatch):
    path = write_config(tmp_path, "[runner\n")
    result = invoke(["config", "show"], tmp_path, monkeypatch)
    assert result.exit_code == 1
    assert str(path) in result.stderr and "line 1" in result.stderr


def _plant(tmp_path: Path) -> None:
    write_config(tmp_path, """
[model]
api_key = "secret:OPENAI_KEY"
base_url = "https://alice:pw-in-url-123@llm.example/v1"

[model.headers]
X-Extra = "header-literal-456"
""")
    secrets = tmp_path / ".agentenv" / "secrets.toml"
    secrets.write_text(f'OPENAI_KEY = "{PLANTED}"\n')
    secrets.chmod(0o600)


def test_secrets_never_appear_in_cli_output(tmp_path, monkeypatch):
    _plant(tmp_path)
    monkeypatch.delenv("OPENAI_KEY", raising=False)
    outputs = []
    for args in (["config", "show"], ["config", "show", "--json"], ["config", "explain", "model.api_key"],
                 ["config", "explain", "model.api_key", "--json"], ["config", "explain", "model"],
                 ["config", "explain", "model.headers", "--json"], ["config", "explain", "model.base_url"]):
        result = invoke(args, tmp_path, monkeypatch)
        assert result.exit_code == 0, result.output
        outputs.append(result.output)
    everything = "\n".join(outputs)
    for secret in (PLANTED, "pw-in-url-123", "header-literal-456"):
        assert secret not in everything
    assert "model.api_key" in everything and "***" in everything
    assert "secret:OPENAI_KEY" in everything  # the reference is shown, not what it points at
    assert "https://***@llm.example/v1" in everything


def test_group_secrets_file_is_refused_in_show_without_crashing(tmp_path, monkeypatch):
    _plant(tmp_path)
    (tmp_path / ".agentenv" / "secrets.toml").chmod(0o644)
    monkeypatch.delenv("OPENAI_KEY", raising=False)
    result = invoke(["config", "show"], tmp_path, monkeypatch)
    assert result.exit_code == 0
    assert "chmod 600" in result.output
    assert PLANTED not in result.output


def _subprocess_env(extra: dict | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTENV_")}
    env.pop("OPENAI_KEY", None)
    env.update(extra or {})
    return env


def test_real_subprocess_show(tmp_path):
    _plant(tmp_path)
    sub = tmp_path / "nested" / "dir"
    sub.mkdir(parents=True)
    proc = subprocess.run([str(AGENTENV), "config", "show"], cwd=sub, capture_output=True, text=True,
                          env=_subprocess_env({"AGENTENV_RUNNER_CONCURRENCY": "7"}), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert f"config file: {tmp_path / '.agentenv' / 'config.toml'}" in proc.stdout
    assert "= 7  (env:AGENTENV_RUNNER_CONCURRENCY)" in proc.stdout
    assert PLANTED not in proc.stdout + proc.stderr
    assert "pw-in-url-123" not in proc.stdout + proc.stderr


def test_real_subprocess_errors_have_no_traceback(tmp_path):
    proc = subprocess.run([str(AGENTENV), "config", "show"], cwd=tmp_path, capture_output=True, text=True,
                          env=_subprocess_env({"AGENTENV_CONFIG": str(tmp_path / "missing.toml")}), timeout=60)
    assert proc.returncode == 1
    assert "AGENTENV_CONFIG points to a missing file" in proc.stderr
    assert "Traceback" not in proc.stderr

    write_config(tmp_path, "[runner]\nwokers = 2\n")
    proc = subprocess.run([str(AGENTENV), "config", "explain", "runner.workers"], cwd=tmp_path,
                          capture_output=True, text=True, env=_subprocess_env(), timeout=60)
    assert proc.returncode == 1
    assert "unknown key 'runner.wokers'" in proc.stderr
    assert "Traceback" not in proc.stderr
