"""The CLI reference's map to the reference framework's commands (scripts/gen_cli_docs.py): every `agent-env`
command is either mapped to one of ours that exists or listed as missing with a reason, and the page says so."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

import click
import pytest

ROOT = Path(__file__).resolve().parents[3]
REF_PYTHON = ROOT / ".venv-ref" / "bin" / "python"

WALK = """
import click
from agent_env.cli import cli

def walk(cmd, ctx):
    for name in cmd.list_commands(ctx):
        sub = cmd.get_command(ctx, name)
        if sub is None or sub.hidden:
            continue
        sub_ctx = click.Context(sub, info_name=name, parent=ctx)
        if isinstance(sub, click.Group):
            walk(sub, sub_ctx)
        else:
            print(sub_ctx.command_path.split(" ", 1)[1])

walk(cli, click.Context(cli, info_name="agent-env"))
"""


def gen_cli_docs():
    spec = importlib.util.spec_from_file_location("gen_cli_docs", ROOT / "scripts" / "gen_cli_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def our_commands() -> set[str]:
    from agentenv_local.cli.main import cli

    out: set[str] = set()

    def walk(cmd: click.Group, ctx: click.Context, prefix: str) -> None:
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            if sub is None:
                continue
            path = f"{prefix}{name}"
            out.add(path)
            if isinstance(sub, click.Group):
                walk(sub, click.Context(sub, info_name=name, parent=ctx), path + " ")

    walk(cli, click.Context(cli, info_name="agentenv"), "")
    return out


def test_every_reference_command_is_mapped_or_explained():
    if not REF_PYTHON.exists():
        pytest.skip("the reference is not installed in .venv-ref (setup.sh --test installs it)")
    proc = subprocess.run([str(REF_PYTHON), "-c", WALK], capture_output=True, text=True, timeout=120, check=True)
    reference = set(proc.stdout.split("\n")) - {""}
    gen = gen_cli_docs()
    mapped, missing = set(gen.REFERENCE_TO_OURS), set(gen.REFERENCE_MISSING)
    assert not mapped & missing, f"both mapped and listed as missing: {sorted(mapped & missing)}"
    assert sorted(reference - mapped - missing) == [], "reference commands neither mapped nor explained"
    assert sorted((mapped | missing) - reference) == [], "listed, but the reference has no such command"
    assert all(why.strip() for why in gen.REFERENCE_MISSING.values())


def test_every_mapped_command_of_ours_exists_and_the_page_says_so():
    gen = gen_cli_docs()
    ours = our_commands()
    assert sorted(set(gen.REFERENCE_TO_OURS.values()) - ours) == []
    page = (ROOT / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
    deploy = page.split("\n## agentenv agent deploy\n", 1)[1].split("\n## ", 1)[0]
    assert "Reference: `agent-env a2a-agent deploy`" in deploy
    put = page.split("\n## agentenv env put\n", 1)[1].split("\n## ", 1)[0]
    assert "`agent-env env mcp-server put`" in put and "`agent-env env multi put`" in put
    docs_list = page.split("\n## agentenv docs list\n", 1)[1].split("\n## ", 1)[0]
    assert "Reference: none (`agent-env` has no such command)" in docs_list
    assert "| `env website put` | a `website` env.toml is accepted, but website envs cannot deploy offline |" in page


def test_no_command_of_ours_is_listed_as_missing():
    # A reference command we have under the same name must be mapped, not explained away.
    gen = gen_cli_docs()
    assert sorted(set(gen.REFERENCE_MISSING) & our_commands()) == []
