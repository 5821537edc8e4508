"""Every user-facing name has a docs entry; this test fails when one is added without docs.

An **entry** is concrete: the name appears on the page that should document it either as a heading (`#`...
line, backticks ignored) or inside backticks (`` `name` ``, or a code span that starts with it):

| What | Where its entry must be |
|---|---|
| every CLI command and subcommand (walked from `agentenv_local.cli.main:cli`, core commands only) | a `## agentenv ...` heading in reference/cli.md, and each top-level command (`agentenv run`, `agentenv docs`...) also in backticks on some guide page (any page but reference/cli.md and llms*.txt) |
| every built-in step type (the `agentenv_local.task_steps` entry points of this distribution) | a heading in tasks/steps.md that starts with the type |
| every config key (each leaf and table of `agentenv_local.config.schema`) | `` `section.key` `` in configuration.md, and each section as a heading (`` ### `[runner]` ``) |
| every plugin entry-point group (in pyproject.toml, and `agentenv_local.plugins.GROUPS`) | `` `agentenv_local.<group>` `` in plugins.md |
"""  # noqa: E501 - a Markdown table: its rows cannot wrap

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def _page(rel: str) -> str:
    return (DOCS / rel).read_text(encoding="utf-8")


def _headings(text: str) -> list[str]:
    out, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line):
            out.append(line.lstrip("#").strip().replace("`", ""))
    return out


def _code_spans(text: str) -> set[str]:
    return {m.strip() for m in re.findall(r"`([^`\n]+)`", text)}


def _has_entry(text: str, name: str) -> bool:
    if any(h == name or h.startswith(name + " ") for h in _headings(text)):
        return True
    return any(span == name or span.startswith(name + " ") for span in _code_spans(text))


def _cli_paths() -> list[str]:
    from agentenv_local.cli.main import cli, core_commands

    paths = []

    def walk(cmd: click.Command, ctx: click.Context, names: list[str]) -> None:
        paths.append(ctx.command_path)
        if isinstance(cmd, click.Group):
            for name in names:
                sub = cmd.get_command(ctx, name)
                if sub is None or sub.hidden:
                    continue
                sub_ctx = click.Context(sub, info_name=name, parent=ctx)
                walk(sub, sub_ctx, sub.list_commands(sub_ctx) if isinstance(sub, click.Group) else [])

    root = click.Context(cli, info_name="agentenv")
    core = [n for n in cli.list_commands(root) if n in core_commands() or n in cli.commands]
    walk(cli, root, core)
    return paths[1:]


def test_every_cli_command_has_an_entry():
    reference = _page("reference/cli.md")
    guides = "\n".join(p.read_text(encoding="utf-8") for p in DOCS.rglob("*.md") if p != DOCS / "reference" / "cli.md")
    paths = _cli_paths()
    assert "agentenv docs serve" in paths and "agentenv run" in paths
    missing = [p for p in paths if p not in _headings(reference)]
    assert not missing, f"commands with no heading in docs/reference/cli.md (run scripts/gen_cli_docs.py): {missing}"
    top = sorted({" ".join(p.split()[:2]) for p in paths})
    unguided = [p for p in top if not _has_entry(guides, p)]
    assert not unguided, f"top-level commands no guide page mentions in backticks: {unguided}"


def _step_types() -> list[str]:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return sorted(pyproject["project"]["entry-points"]["agentenv_local.task_steps"])


def test_every_builtin_step_type_has_an_entry():
    types = _step_types()
    assert {"deploy_sandbox", "prompt_agent", "deploy_env"} <= set(types)
    headings = _headings(_page("tasks/steps.md"))
    missing = [t for t in types if not any(h == t or h.startswith(t + " ") for h in headings)]
    assert not missing, f"step types with no heading in docs/tasks/steps.md: {missing}"


def test_every_config_key_has_an_entry():
    from agentenv_local.config import schema

    page = _page("configuration.md")
    spans = _code_spans(page)
    nodes = schema.all_nodes()
    keys = [n.dotted for n in nodes if n.kind in ("leaf", "table")]
    assert "runner.concurrency" in keys and "model.endpoints" in keys
    missing = [k for k in keys if k not in spans]
    assert not missing, f"config keys not in backticks on docs/configuration.md: {missing}"
    sections = [n.dotted for n in nodes if n.kind == "section" and len(n.path) == 1]
    headings = _headings(page)
    missing = [s for s in sections if f"[{s}]" not in headings]
    assert not missing, f"config sections with no heading on docs/configuration.md: {missing}"


def test_every_plugin_group_has_an_entry():
    from agentenv_local.plugins import GROUPS

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    groups = set(pyproject["project"]["entry-points"]) | set(GROUPS.values())
    assert "agentenv_local.task_steps" in groups
    page = _page("plugins.md")
    missing = sorted(g for g in groups if not _has_entry(page, g))
    assert not missing, f"plugin groups not documented on docs/plugins.md: {missing}"


def test_the_coverage_check_notices_a_missing_entry():
    """The rules above really fail: a name absent from a page is not an entry."""
    text = "# Page\n\n## `known_step`\n\nUse `agentenv known` here.\n\n```\n## not_a_heading\n```\n"
    assert _has_entry(text, "known_step") and _has_entry(text, "agentenv known")
    assert not _has_entry(text, "not_a_heading") and not _has_entry(text, "unknown_step")
