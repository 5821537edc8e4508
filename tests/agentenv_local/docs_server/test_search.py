"""The search engine: sections and anchors, tokens and stems, ranking, snippets."""

from __future__ import annotations

import pytest

from agentenv_local.docs_server.corpus import load_pages, split_sections
from agentenv_local.docs_server.search import (
    DocsIndex,
    get_index,
    snippet,
    stem,
    tokens,
)


def test_sections_follow_headings_outside_code_and_number_repeated_anchors():
    text = "# Title\n\nintro\n\n## Step `one`\n\n```\n# not a heading\n```\n\n## Step one\n\n### Deeper\n\nx\n"
    sections = split_sections("p.md", text)
    assert [(s.level, s.title, s.anchor) for s in sections] == [
        (1, "Title", "title"), (2, "Step `one`", "step-one"), (2, "Step one", "step-one-1"), (3, "Deeper", "deeper")]
    assert "# not a heading" in sections[1].text
    assert sections[3].parents == ("Title", "Step one")


def test_stems_fold_word_forms():
    assert stem("composing") == stem("composed") == stem("composes") == stem("compose")
    assert stem("environments") == stem("environment")
    assert stem("running") == stem("runs") == "run"
    assert "sync_env_clock" in tokens("the `sync_env_clock` step") and "clock" in tokens("sync_env_clock")
    assert tokens("How do I do it?") == []  # stop words only


@pytest.mark.parametrize(("query", "page"), [
    ("virtual clock", "environments/virtual-clock.md"),
    ("rbac", "environments/rbac.md"),
    ("how do I compose environments", "environments/composing.md"),
    ("tool name clashes prefixes", ("environments/composing.md", "environments/gateway.md")),
    ("multi env mcp_server_envs", ("environments/composing.md", "bundles.md")),
    ("environment card fields", "environments/card.md"),
    ("hot reload", "environments/hot-reload.md"),
    ("sync_env_clock", "tasks/steps.md"),
    ("prompt_agent", "tasks/steps.md"),
    ("snapshot_env artifact", "tasks/steps.md"),
    ("artifact kinds", "artifacts.md"),
    ("resume a run", ("tasks/running.md", "reference/troubleshooting.md")),
    ("secret references", "configuration.md"),
    ("docs mcp server tools", "reference/mcp-docs-server.md"),
    ("gateway or server topology", "environments/topology.md"),
])
def test_the_right_page_comes_first(query, page):
    hits = get_index().search(query, 5)
    pages = page if isinstance(page, tuple) else (page,)
    assert hits and hits[0].page in pages, [(h.page, h.anchor, round(h.score, 2)) for h in hits]


def test_scores_descend_and_limit_holds():
    hits = get_index().search("gateway triggers clock", 7)
    assert len(hits) == 7
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert get_index().search("zzqqxx") == [] and get_index().search("the a of") == []


def test_snippet_shows_the_matching_stretch():
    text = "## Head\n\n" + "filler words here. " * 40 + "The virtual clock moves in stepped mode. " + "more. " * 40
    out = snippet(text, tokens("stepped clock"))
    assert "stepped" in out and out.startswith("...") and len(out) < 260


def test_index_is_built_once_per_process():
    assert get_index() is get_index()
    index = DocsIndex(load_pages())
    assert len(index.sections) > 200
