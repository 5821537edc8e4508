"""`agentenv docs search|read|list|serve --help` in the terminal: no hub, no project, no network."""

from __future__ import annotations

import json
import os
import subprocess

from click.testing import CliRunner
from kits.docs_server import agentenv_exe

from agentenv_local.cli.main import cli


def run(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_search_prints_ranked_hits():
    result = run("docs", "search", "virtual", "clock")
    assert result.exit_code == 0, result.output
    first = result.output.splitlines()[0]
    assert first.startswith("1. environments/virtual-clock.md#")


def test_search_json():
    result = run("docs", "search", "how do I compose environments", "--json", "--limit", "2")
    assert result.exit_code == 0
    hits = json.loads(result.output)
    assert len(hits) == 2 and hits[0]["page"] == "environments/composing.md"
    assert {"page", "page_title", "section", "anchor", "score", "snippet"} <= set(hits[0])


def test_search_without_matches_exits_1():
    result = CliRunner().invoke(cli, ["docs", "search", "qwxzzy"])
    assert result.exit_code == 1
    assert "no matches" in result.output


def test_read_page_and_section():
    page = run("docs", "read", "environments/rbac")
    assert page.exit_code == 0 and page.output.startswith("# RBAC")
    section = run("docs", "read", "environments/rbac.md", "survives-a-restart")
    assert section.exit_code == 0 and section.output.startswith("## Survives a restart")
    assert "## Roles" not in section.output
    as_json = json.loads(run("docs", "read", "rbac", "Survives a restart", "--json").output)
    assert as_json["page"] == "environments/rbac.md" and as_json["anchor"] == "survives-a-restart"


def test_read_unknown_page_or_section_fails_with_a_hint():
    result = CliRunner().invoke(cli, ["docs", "read", "environments/rbca.md"])
    assert result.exit_code == 1 and "did you mean environments/rbac.md" in result.output
    result = CliRunner().invoke(cli, ["docs", "read", "environments/rbac.md", "nothing-like-this"])
    assert result.exit_code == 1 and "has no section" in result.output


def test_list():
    result = run("docs", "list")
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert lines[0].startswith("index.md")
    assert any(line.startswith("environments/composing.md") and "Composing environments" in line for line in lines)
    pages = json.loads(run("docs", "list", "--json").output)
    assert all({"page", "title", "summary", "uri", "sections"} <= set(p) for p in pages)


def test_real_executable_from_an_empty_folder_needs_no_project(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTENV_")}
    done = subprocess.run([agentenv_exe(), "docs", "search", "rbac", "--limit", "1"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("1. environments/rbac.md#")
    assert not (tmp_path / ".agentenv").exists()  # no hub, no store


def test_docs_dir_override(tmp_path, monkeypatch):
    from agentenv_local.docs_server import server
    from agentenv_local.docs_server.corpus import ENV_DOCS_DIR

    (tmp_path / "index.md").write_text("# Mine\n\nOnly page.\n\n## Widgets\n\nAll about widgets.\n")
    monkeypatch.setenv(ENV_DOCS_DIR, str(tmp_path))
    assert [p["page"] for p in server.list_docs()] == ["index.md"]
    done = subprocess.run([agentenv_exe(), "docs", "search", "widgets", "--json"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, env={**os.environ, ENV_DOCS_DIR: str(tmp_path)})
    assert json.loads(done.stdout)[0]["anchor"] == "widgets"
