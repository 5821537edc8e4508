"""A planted secret (in the secrets file, referenced from config, and in the environment of the
commands, which do not pass it on to sandboxed steps) is never written to the store, the objects, the
logs or any output."""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

from kits.hub import bash_check, clean_env, cli, deploy, runs_json, store_text, write_bundle


def _files(root: Path, skip: set[Path]) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and p not in skip)


def test_a_planted_secret_is_never_stored_or_printed(tmp_path):
    project = tmp_path / "proj"
    state = project / ".agentenv"
    state.mkdir(parents=True)
    planted = f"sk-planted-{secrets.token_hex(12)}"
    canary = f"canary-{secrets.token_hex(12)}"  # stored on purpose: proves the scans can see a value
    (state / "config.toml").write_text('[model]\napi_key = "secret:PLANTED"\n')
    secrets_file = state / "secrets.toml"
    secrets_file.write_text(f'PLANTED = "{planted}"\n')
    os.chmod(secrets_file, 0o600)
    env = clean_env({"AGENTENV_TEST_SECRET": planted})

    (tmp_path / "canary.txt").write_text(canary)
    write_bundle(project, "sec", {"sec": [
        deploy(),
        bash_check("home", 'echo "home is $HOME"', sandbox_name="box"),
        # A sandboxed command gets a minimal environment: our env var secret never reaches it.
        bash_check("no_secret", 'test -z "$AGENTENV_TEST_SECRET"', sandbox_name="box"),
        {"id": "canary", "type": "load_artifact", "artifact_id": "canary", "sandbox_name": "box"},
    ]}, artifacts={"note": {"note.txt": "nothing secret here"}})

    outputs = []

    def run(*args, expect=0):
        proc = cli(project, *args, env=env)
        outputs.append(proc.stdout + proc.stderr)
        assert proc.returncode == expect, f"agentenv {' '.join(args)}: {proc.stdout}\n{proc.stderr}"
        return proc

    run("artifact", "put", str(tmp_path / "canary.txt"), "--id", "canary")
    run("-vv", "run", "hello")
    run("-vv", "run", "./sec")
    run("run", "./sec", "--json")
    shown = run("config", "show")
    assert "model.api_key" in shown.stdout and "***" in shown.stdout
    shown_json = json.loads(run("config", "show", "--json").stdout)
    assert planted not in json.dumps(shown_json)
    run("config", "explain", "model.api_key")
    for row in runs_json(project, env=env):
        run("runs", "show", row["run_id"], "--json")
        run("runs", "show", row["run_id"])
    run("artifact", "list", "--json")
    run("up", "--detach")  # a long-lived hub writes its log under .agentenv/logs
    try:
        run("-vv", "run", "./sec")
        run("runs", "list", "--json")
        # While the hub holds the store, recent writes sit in DuckDB's WAL: scan it too.
        wal = state / "store.duckdb.wal"
        assert wal.exists()
        open_files = _files(state, {secrets_file})
        assert wal in open_files
        assert [str(p) for p in open_files if planted.encode() in p.read_bytes()] == []
    finally:
        run("down")
    assert [r["status"] for r in runs_json(project, env=env)] == ["passed"] * 4

    # The secret really was in play: the config resolves it (in code, never printed).
    from agentenv_local.config import load_config

    assert load_config(project, environ=env).get("model.api_key") == planted

    skip = {secrets_file}
    scanned = _files(state, skip)
    names = {p.relative_to(state).parts[0] for p in scanned}
    assert {"store.duckdb", "objects", "logs"} <= names
    blobs = {p: p.read_bytes() for p in scanned}
    assert any(canary.encode() in b for b in blobs.values())  # the byte scan sees stored values
    leaks = [str(p.relative_to(state)) for p, b in blobs.items() if planted.encode() in b]
    assert leaks == []
    db_text = store_text(state / "store.duckdb")
    assert canary in db_text or any(canary.encode() in b for p, b in blobs.items() if "objects" in p.parts)
    assert "home is" in db_text  # step output is stored (so a printed secret would have been)
    assert planted not in db_text
    for text in outputs:
        assert planted not in text
