"""Env records through the CLI and bundles: envs/<name>/env.toml stored as versioned records whose
files are pinned as an artifact; multi envs pinned to their servers' versions; bad env.toml refused."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

ECHO = Path(__file__).resolve().parents[3] / "examples" / "envs" / "echo" / "server.py"


def env_bundle(project, multi_refs=("echo",)):
    bundle = project.copy_hello("withenvs")
    (bundle / "envs" / "echo").mkdir(parents=True)
    shutil.copy(ECHO, bundle / "envs" / "echo" / "server.py")
    project.write("withenvs/envs/echo/env.toml", 'module = "server.py:Echo"\n')
    refs = ", ".join(f'"{r}"' for r in multi_refs)
    project.write("withenvs/envs/office/env.toml", f'type = "multi"\nmcp_server_envs = [{refs}]\n')
    return bundle


def test_a_bundle_stores_its_envs_and_pins_versions(project):
    bundle = env_bundle(project)
    out = project.cli("run", "./withenvs").stdout
    assert "envs/echo: v1 (new)" in out and "envs/office: v1 (new)" in out
    envs = {e["name"]: e for e in project.json("env", "list")}
    assert envs["echo"]["type"] == "mcp_server" and envs["office"]["type"] == "multi"
    echo = json.loads(project.cli("env", "get", "--id", envs["echo"]["id"]).stdout)
    assert echo["body"]["module"] == "server.py:Echo" and echo["body"]["environment_name"] == "echo"
    files = json.loads(project.cli("artifact", "get", "--id", echo["body"]["files"]["id"]).stdout)
    assert "server.py" in files["body"]["files"]
    office = json.loads(project.cli("env", "get", "--id", envs["office"]["id"]).stdout)
    assert office["body"]["mcp_server_envs"] == [{"env": envs["echo"]["id"], "version": 1}]

    again = project.cli("run", "./withenvs").stdout
    assert "envs/echo: v1, unchanged" in again and "envs/office: v1, unchanged" in again
    (bundle / "envs" / "echo" / "server.py").write_text(ECHO.read_text() + "\n# changed\n")
    changed = project.cli("run", "./withenvs").stdout
    # a server's new code makes a new server version, and the multi env that pins it follows
    assert "envs/echo: v2 (changed)" in changed and "envs/office: v2 (changed)" in changed


def test_bad_env_toml_is_refused_and_nothing_is_written(project):
    env_bundle(project, multi_refs=("echo", "nope"))
    project.write("withenvs/envs/broken/env.toml", 'modul = "server.py:Echo"\n')
    done = project.cli("run", "./withenvs", code=1)
    assert "envs/broken/env.toml: modul: unknown key" in done.stderr
    assert project.stored()["documents"] == set()
    shutil.rmtree(project.root / "withenvs" / "envs" / "broken")
    done = project.cli("run", "./withenvs", code=1)
    assert "mcp_server_envs: 'nope' is not in this bundle" in done.stderr
    assert project.stored()["documents"] == set()


def test_env_put_get_list(project):
    folder = project.root / "echo"
    folder.mkdir()
    shutil.copy(ECHO, folder / "server.py")
    project.write("echo/env.toml", 'module = "server.py:Echo"\nenvironment_name = "echo"\n')
    assert "Created mcp_server env my-echo v1." in project.cli("env", "put", "echo", "--id", "my-echo").stdout
    assert "v2" in project.cli("env", "put", "echo", "--id", "my-echo").stdout
    assert [(e["id"], e["version"]) for e in project.json("env", "list")] == [("my-echo", 2)]
    project.write("multi/env.toml", 'type = "multi"\nmcp_server_envs = ["my-echo", "ghost"]\n')
    done = project.cli("env", "put", "multi", "--id", "office", code=1)
    assert "not in the store: ghost" in done.stderr
    project.write("bad/env.toml", 'module = "server.py:Echo"\nurl = "http://127.0.0.1:1/mcp"\n')
    done = project.cli("env", "put", "bad", "--id", "bad", code=1)
    assert "give exactly one server source" in done.stderr
    assert project.cli("env", "get", "--id", "nope", code=1).stderr.count("agentenv env list") == 1
