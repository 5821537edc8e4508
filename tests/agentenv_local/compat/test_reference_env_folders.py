"""Env folders as the reference writes them (server.py written with `agentenv_protocol`, requirements.txt, a
Dockerfile, no env.toml), copied unchanged out of the installed reference: each is an mcp_server env whose
server.py runs with our SDK standing in for `agentenv_protocol`, reached through a real gateway by a real MCP
client; the stand-in goes on the import path only where the real package is missing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx2
import pytest
from kits.env_deploy import call_tool, on_hub, result_text
from kits.hub import cli
from kits.reference_bundles import copy_reference_bundle
from kits.servers import REF_PYTHON

from agentenv_local.errors import ValidationError

REPO = Path(__file__).resolve().parents[3]
SHIMS = REPO / "agentenv_local" / "compat" / "shims"
CALLS = {"echo-mcp": ("echo", "echo", {"text": "said back"}, "said back"),
         "mail-mcp": ("mail", "search_emails", {"query": "invoice"}, "INV-1042")}


@pytest.fixture
def session(tmp_path):
    from kits.env_deploy import open_hub_session

    with open_hub_session(tmp_path) as s:
        yield s


def _store_folder(store, env_id: str, folder: Path) -> dict:
    """Store an env folder as `agentenv env put` does: its record from load_env_folder, its files."""
    from agentenv_local.artifacts import read_folder
    from agentenv_local.hosting.envs import load_env_folder
    from agentenv_local.hosting.envs.store import env_body

    env, _raw, _declared = load_env_folder(folder)
    body = env_body(store, env_id, env, read_folder(folder), default_name=env_id)
    return store.documents.put("envs", env_id, body)


def test_a_server_py_folder_is_an_mcp_server_env_that_says_where_it_came_from(tmp_path):
    from agentenv_local.hosting.envs import McpServerEnv, load_env_folder

    bundle = copy_reference_bundle("echo-mcp", tmp_path)
    assert not (bundle / "envs" / "echo" / "env.toml").exists()
    env, raw, declared = load_env_folder(bundle / "envs" / "echo")
    assert isinstance(env, McpServerEnv) and env.type == "mcp_server" and declared is None
    assert env.command == ["python", "-m", "agentenv_local.compat.reference_server", "server.py"]
    assert "the reference's env folder (server.py, no env.toml)" in env.description
    assert raw["command"] == env.command


def test_a_folder_with_neither_env_toml_nor_server_py_still_says_so(tmp_path):
    from agentenv_local.hosting.envs import load_env_folder

    (tmp_path / "envs" / "x").mkdir(parents=True)
    (tmp_path / "envs" / "x" / "Dockerfile").write_text("FROM scratch\n")
    with pytest.raises(ValidationError) as caught:
        load_env_folder(tmp_path / "envs" / "x")
    assert caught.value.message == "envs/x: no env.toml"
    assert "server.py" in (caught.value.hint or "")


@pytest.mark.parametrize("name", sorted(CALLS))
def test_the_reference_env_deploys_in_the_hub_and_answers_through_the_gateway(session, tmp_path, name):
    """In the hub (issue 16): its server.py starts nothing at import and it has no env_vars. The subprocess it
    runs as otherwise answers the same (test_reference_env_in_hub.py)."""
    env_name, tool, args, expected = CALLS[name]
    bundle = copy_reference_bundle(name, tmp_path)
    _store_folder(session.store, env_name, bundle / "envs" / env_name)
    record = on_hub(session, session.hub.envs.deploy(env_name))
    [child] = record["children"]
    assert child == {"name": env_name, "kind": "in_process"}
    assert record["environment_card"]["name"] == env_name
    names, result = call_tool(record["mcp_url"], tool, args)
    assert names == [tool]
    assert expected in result_text(result)
    on_hub(session, session.hub.envs.teardown(record["instance_id"]))


def _which_protocol(python: str, folder: Path) -> subprocess.CompletedProcess:
    """Run a server.py that reports which agentenv_protocol it imported, through the launcher."""
    (folder / "server.py").write_text("import agentenv_protocol\nprint(agentenv_protocol.__file__)\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}  # the launcher is stdlib only, so any interpreter runs it
    return subprocess.run([python, "-m", "agentenv_local.compat.reference_server", "server.py"], cwd=folder,
                          env=env, capture_output=True, text=True, timeout=60)


def test_the_stand_in_is_on_the_path_only_where_the_real_sdk_is_missing(tmp_path):
    ours = _which_protocol(sys.executable, tmp_path)
    assert ours.returncode == 0, ours.stderr
    assert Path(ours.stdout.strip()).parent.parent == SHIMS
    if not REF_PYTHON.is_file():
        pytest.skip("the reference is not installed in .venv-ref: run scripts/setup.sh --test")
    real = _which_protocol(str(REF_PYTHON), tmp_path)
    assert real.returncode == 0, real.stderr
    assert ".venv-ref" in real.stdout and str(SHIMS) not in real.stdout


def test_a_name_the_stand_in_lacks_fails_with_what_to_do(tmp_path):
    (tmp_path / "server.py").write_text("from agentenv_protocol import ToolSession\n")
    done = subprocess.run([sys.executable, "-m", "agentenv_local.compat.reference_server", "server.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "agentenv_protocol.ToolSession is not in agentenv's stand-in" in done.stderr
    assert "pip install agentenv-framework-protocol" in done.stderr


def test_a_requirement_not_installed_here_is_named_with_how_to_install_it(tmp_path):
    bundle = copy_reference_bundle("echo-mcp", tmp_path)
    requirements = bundle / "envs" / "echo" / "requirements.txt"
    requirements.write_text(requirements.read_text() + "no-such-dist-for-agentenv==1.0\n")
    done = cli(tmp_path, "run", "./echo-mcp", "--dry-run")
    assert done.returncode == 1
    out = done.stdout + done.stderr
    assert "envs/echo/requirements.txt: 'no-such-dist-for-agentenv' is not installed" in out
    assert "pip install no-such-dist-for-agentenv" in out
    assert "agentenv-framework-protocol" not in out and "'mcp'" not in out  # the stand-in and ours cover those
    assert not (tmp_path / ".agentenv" / "store.duckdb").exists() or "v1 (new)" not in out


def test_a_requirements_line_agentenv_cannot_read_is_refused(tmp_path):
    bundle = copy_reference_bundle("mail-mcp", tmp_path)
    (bundle / "envs" / "mail" / "requirements.txt").write_text("-r other.txt\nmcp\n")
    done = cli(tmp_path, "run", "./mail-mcp", "--dry-run")
    assert done.returncode == 1
    assert "envs/mail/requirements.txt:1: '-r other.txt' is not a plain requirement" in done.stdout + done.stderr


NOTES_SERVER = '''"""A notes env written the reference's way: data plane and ToolContext from agentenv_protocol."""
from typing import Annotated

from pydantic import Field

from agentenv_protocol import (AgentEnvEnvironment, DataPart, ToolContext, add_data, environment_card, get_data,
                               reset_data, tool)


@environment_card(name="notes", description="Notes someone left.")
class NotesEnv(AgentEnvEnvironment):
    def __init__(self):
        self.notes = []

    @reset_data
    def reset(self):
        self.notes = []

    @add_data
    def add(self, parts):
        self.notes += [part.data["note"] for part in parts]

    @get_data
    def get(self):
        return [DataPart(data={"notes": self.notes})]

    @tool(name="read_notes")
    def read_notes(self, ctx: ToolContext,
                   prefix: Annotated[str, Field(description="What each note returned starts with.")] = "") -> str:
        """The notes that start with the prefix, and who asked."""
        return f"{ctx.role}: " + "; ".join(n for n in self.notes if n.startswith(prefix))


if __name__ == "__main__":
    NotesEnv().serve()
'''


def test_the_sdk_surface_a_reference_env_uses_maps_onto_ours(session, tmp_path):
    from kits.data_plane import rpc
    from kits.env_deploy import admin

    folder = tmp_path / "envs" / "notes"
    folder.mkdir(parents=True)
    (folder / "server.py").write_text(NOTES_SERVER)
    _store_folder(session.store, "notes", folder)
    record = on_hub(session, session.hub.envs.deploy("notes"))
    data_plane = f"{record['gateway_url']}/svc/mcp-notes/agentenv"
    headers = admin(session, record)
    for note in ("buy milk", "call Dana", "buy stamps"):
        answer = rpc(data_plane, "data/add", {"parts": [{"kind": "data", "data": {"note": note}}]}, headers=headers)
        assert answer.get("result") == {}, answer
    assert rpc(data_plane, "data/get", {}, headers=headers)["result"]["parts"] == [
        {"kind": "data", "data": {"notes": ["buy milk", "call Dana", "buy stamps"]}}]
    assert record["environment_card"]["name"] == "notes"
    card = httpx2.get(f"{record['gateway_url']}/svc/mcp-notes/.well-known/agent-env.json", headers=headers,
                      timeout=10).json()
    assert card["description"] == "Notes someone left."
    [listed] = card["capabilities"]["tools"]
    assert list(listed["inputSchema"]["properties"]) == ["prefix"]  # the ToolContext is never advertised
    _names, result = call_tool(record["mcp_url"], "read_notes", {"prefix": "buy"})
    assert result_text(result).endswith(": buy milk; buy stamps")
    assert rpc(data_plane, "data/reset", {}, headers=headers).get("result") == {}
    assert rpc(data_plane, "data/get", {}, headers=headers)["result"]["parts"] == [
        {"kind": "data", "data": {"notes": []}}]
    on_hub(session, session.hub.envs.teardown(record["instance_id"]))


def test_the_stand_in_answers_hasattr_for_private_names_and_import_error_for_public_ones(monkeypatch):
    import importlib

    monkeypatch.syspath_prepend(str(SHIMS))
    monkeypatch.delitem(sys.modules, "agentenv_protocol", raising=False)
    try:
        stand_in = importlib.import_module("agentenv_protocol")
        assert str(SHIMS) in (stand_in.__file__ or "")
        assert not hasattr(stand_in, "__release_hook__") and not hasattr(stand_in, "_private")
        with pytest.raises(ImportError, match="not in agentenv's stand-in"):
            stand_in.ToolSession  # noqa: B018
    finally:  # never leave the stand-in imported for the tests that follow
        for name in [m for m in sys.modules if m == "agentenv_protocol" or m.startswith("agentenv_protocol.")]:
            del sys.modules[name]
