"""`agentenv docs serve` driven by an mcp 2.x client, over stdio (spawned as editors do) and over streamable
HTTP: the tools, ranked search, reading pages and sections, resources, and errors."""

from __future__ import annotations

import asyncio
import json

import pytest
from kits.docs_server import agentenv_exe

# (query, the page that must come first)
QUERIES = [
    ("virtual clock", "environments/virtual-clock.md"),
    ("rbac", "environments/rbac.md"),
    ("how do I compose environments", "environments/composing.md"),
]


def _client(transport: str, cwd, url: str | None):
    from mcp import Client, StdioServerParameters
    from mcp.client.streamable_http import streamable_http_client

    if transport == "stdio":
        return Client(StdioServerParameters(command=agentenv_exe(), args=["docs", "serve"], cwd=str(cwd)))
    assert url is not None, "the http transport needs the server's URL"
    return Client(streamable_http_client(url))


async def _session(client) -> dict:
    out: dict = {}
    async with client as c:
        out["tools"] = {t.name: t for t in (await c.list_tools()).tools}
        out["search"] = {}
        for query, _ in QUERIES:
            result = await c.call_tool("search_docs", {"query": query, "limit": 3})
            assert not result.is_error, result.content
            out["search"][query] = result
        out["page"] = await c.call_tool("read_doc", {"page": "environments/composing.md"})
        out["section"] = await c.call_tool("read_doc", {"page": "environments/rbac", "section": "survives-a-restart"})
        out["by_heading"] = await c.call_tool("read_doc", {"page": "docs/environments/rbac.md",
                                                           "section": "Survives a restart"})
        out["bad_page"] = await c.call_tool("read_doc", {"page": "environments/nope.md"})
        out["bad_section"] = await c.call_tool("read_doc", {"page": "environments/rbac.md", "section": "zzz"})
        out["empty_query"] = await c.call_tool("search_docs", {"query": "  "})
        out["list"] = await c.call_tool("list_docs", {})
        out["resources"] = (await c.list_resources()).resources
        out["resource"] = await c.read_resource("agentenv-docs://environments/virtual-clock.md")
        with pytest.raises(Exception) as missing:
            await c.read_resource("agentenv-docs://environments/nope.md")
        out["missing_resource"] = str(missing.value)
    return out


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_docs_server_over_mcp(transport, tmp_path, request):
    url = request.getfixturevalue("docs_url") if transport == "http" else None
    out = asyncio.run(_session(_client(transport, tmp_path, url)))

    assert set(out["tools"]) == {"search_docs", "read_doc", "list_docs"}
    assert out["tools"]["search_docs"].input_schema["required"] == ["query"]

    for query, page in QUERIES:
        hits = out["search"][query].structured_content["results"]
        assert hits, query
        assert hits[0]["page"] == page, (query, [h["page"] for h in hits])
        assert set(hits[0]) == {"page", "page_title", "section", "anchor", "score", "snippet"}
        assert hits[0]["score"] >= hits[-1]["score"]
        assert page in out["search"][query].content[0].text  # the text content lists the hits too

    page = out["page"].structured_content
    assert page["title"] == "Composing environments" and page["text"].startswith("# Composing environments")
    section = out["section"].structured_content
    assert section["anchor"] == "survives-a-restart" and section["text"].startswith("## Survives a restart")
    assert "## Roles" not in section["text"]
    assert out["by_heading"].structured_content == section

    assert out["bad_page"].is_error and "no docs page 'environments/nope.md'" in out["bad_page"].content[0].text
    assert out["bad_section"].is_error and "survives-a-restart" in out["bad_section"].content[0].text
    assert out["empty_query"].is_error

    pages = out["list"].structured_content["pages"]
    names = [p["page"] for p in pages]
    assert names[0] == "index.md" and "environments/composing.md" in names and "reference/mcp-docs-server.md" in names
    assert all(p["title"] and p["uri"] == f"agentenv-docs://{p['page']}" for p in pages)

    uris = {str(r.uri) for r in out["resources"]}
    assert uris == {f"agentenv-docs://{name}" for name in names}
    clock = next(r for r in out["resources"] if str(r.uri).endswith("virtual-clock.md"))
    assert clock.mime_type == "text/markdown" and clock.title == "Virtual clock"
    contents = out["resource"].contents[0]
    assert contents.text.startswith("# Virtual clock") and contents.mime_type == "text/markdown"
    assert "no docs page" in out["missing_resource"]


def test_legacy_handshake_over_stdio(tmp_path):
    """An mcp client that speaks the handshake revisions (as mcp 1.x clients and most editors do)."""
    from mcp import Client, StdioServerParameters

    async def go():
        params = StdioServerParameters(command=agentenv_exe(), args=["docs", "serve"], cwd=str(tmp_path))
        async with Client(params, mode="legacy") as c:
            tools = [t.name for t in (await c.list_tools()).tools]
            hit = await c.call_tool("search_docs", {"query": "triggers", "limit": 1})
            return c.protocol_version, tools, hit

    version, tools, hit = asyncio.run(go())
    assert version == "2025-11-25"
    assert tools == ["search_docs", "read_doc", "list_docs"]
    assert hit.structured_content["results"][0]["page"] == "environments/triggers.md"
    assert json.loads(json.dumps(hit.structured_content))  # plain JSON


def test_http_ready_route(docs_url):
    import httpx2

    ready = httpx2.get(docs_url.rsplit("/mcp", 1)[0] + "/ready")
    assert ready.status_code == 200 and ready.json()["ok"] is True and ready.json()["pages"] > 20
