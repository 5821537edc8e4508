"""The docs as an MCP server (mcp 2.x low-level `Server`): three tools and one resource per page.

Tools
- `search_docs(query, limit=5)`: ranked full-text search; each hit has page, section title, anchor, score
  and a snippet.
- `read_doc(page, section=None)`: a page's markdown, or one section of it (by anchor or heading text).
- `list_docs()`: every page with its title, summary, resource URI and section headings.

Resources: `agentenv-docs://PAGE` (for example `agentenv-docs://environments/rbac.md`), text/markdown.

Transports: stdio (`serve_stdio`, what editors start) and streamable HTTP (`serve_http`, `/mcp`). Nothing
here needs the hub or the network. mcp is imported when the server is built, not when this module is.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import sys
from typing import Any

from .corpus import URI_SCHEME, Page, Section, load_pages, normalize_page

SERVER_NAME = "agentenv-docs"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 18770
INSTRUCTIONS = ("The agentenv-local user docs. Call search_docs first with a few keywords, then read_doc on "
                "the page (and section anchor) of the best hit; list_docs shows every page.")

TOOLS: list[dict] = [
    {
        "name": "search_docs",
        "title": "Search the agentenv docs",
        "description": "Ranked full-text search (BM25) over every section of the agentenv-local docs. Returns "
                       "the best sections first: page, section title, anchor, score and a snippet. Then call "
                       "read_doc with the page and anchor to read the whole section.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "keywords or a question, e.g. 'virtual clock'"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 5,
                          "description": "how many sections to return"},
            },
            "required": ["query"],
        },
    },
    {
        "name": "read_doc",
        "title": "Read a docs page or section",
        "description": "The markdown of one docs page (e.g. 'environments/rbac.md'), or of one section of it "
                       "when `section` is given (an anchor from search_docs, or the heading's text).",
        "inputSchema": {
            "type": "object",
            "properties": {
                "page": {"type": "string", "description": "page path as list_docs shows it"},
                "section": {"type": ["string", "null"], "default": None,
                            "description": "anchor or heading text; omit for the whole page"},
            },
            "required": ["page"],
        },
    },
    {
        "name": "list_docs",
        "title": "List the docs pages",
        "description": "Every docs page: path, title, one-line summary, resource URI and its section headings.",
        "inputSchema": {"type": "object", "properties": {}},
    },
]


class DocsError(ValueError):
    """A bad request (an unknown page or section); its message says what exists instead."""


# --- the tools' logic, shared by the MCP server and the CLI ---------------------------------------------------

def search_docs(query: str, limit: int = 5) -> list[dict]:
    from .search import get_index

    if not isinstance(query, str) or not query.strip():
        raise DocsError("query must be a non-empty string")
    limit = max(1, min(int(limit), 50))
    return [hit.as_dict() for hit in get_index().search(query, limit)]


def find_page(name: str) -> Page:
    pages = {p.page: p for p in load_pages()}
    key = normalize_page(name)
    if key in pages:
        return pages[key]
    by_stem = [p for p in pages.values() if p.page.rsplit("/", 1)[-1] == key.rsplit("/", 1)[-1]]
    if len(by_stem) == 1:
        return by_stem[0]
    close = difflib.get_close_matches(key, list(pages), n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else "; list_docs shows every page"
    raise DocsError(f"no docs page {(key or name)!r}{hint}")


def find_section(page: Page, section: str) -> Section:
    wanted = section.strip().lstrip("#")
    for s in page.sections:
        if s.level and s.anchor == wanted:
            return s
    lowered = wanted.lower().replace("`", "")
    for s in page.sections:
        if s.level and s.title.lower().replace("`", "") == lowered:
            return s
    for s in page.sections:
        if s.level and lowered and lowered in s.title.lower().replace("`", ""):
            return s
    anchors = [s.anchor for s in page.sections if s.level]
    close = difflib.get_close_matches(wanted, anchors, n=3, cutoff=0.4)
    hint = f"; did you mean {', '.join(close)}?" if close else f"; its sections: {', '.join(anchors)}"
    raise DocsError(f"{page.page} has no section {section!r}{hint}")


def section_with_children(page: Page, section: Section) -> str:
    """A section's text including its subsections (up to the next heading of the same or a higher level)."""
    out, inside = [], False
    for s in page.sections:
        if s is section:
            inside = True
        elif inside and s.level <= section.level:
            break
        if inside:
            out.append(s.text)
    return "\n\n".join(out)


def read_doc(page: str, section: str | None = None) -> dict:
    found = find_page(page)
    if section:
        s = find_section(found, section)
        return {"page": found.page, "title": found.title, "section": s.title, "anchor": s.anchor,
                "text": section_with_children(found, s)}
    return {"page": found.page, "title": found.title, "section": None, "anchor": None, "text": found.text}


def list_docs() -> list[dict]:
    return [{"page": p.page, "title": p.title, "summary": p.summary, "uri": p.uri,
             "sections": [s.title for s in p.sections if s.level >= 2]} for p in load_pages()]


# --- MCP ------------------------------------------------------------------------------------------------------

def _tool_result(payload: Any, text: str) -> dict:
    return {"content": [{"type": "text", "text": text}], "structuredContent": payload, "isError": False,
            "resultType": "complete"}


def _tool_error(message: str) -> dict:
    return {"content": [{"type": "text", "text": message}], "isError": True, "resultType": "complete"}


def call_tool(name: str, arguments: dict) -> dict:
    """One tool call as an MCP result dict (errors become isError results, not protocol errors)."""
    try:
        if name == "search_docs":
            hits = search_docs(arguments.get("query", ""), arguments.get("limit") or 5)
            text = "\n\n".join(f"{i}. {h['page']}#{h['anchor']} ({h['section']}, score {h['score']})\n"
                               f"   {h['snippet']}" for i, h in enumerate(hits, 1)) or "no matches"
            return _tool_result({"results": hits}, text)
        if name == "read_doc":
            if not isinstance(arguments.get("page"), str):
                raise DocsError("page must be a string, e.g. 'environments/rbac.md'")
            doc = read_doc(arguments["page"], arguments.get("section"))
            return _tool_result(doc, doc["text"])
        if name == "list_docs":
            pages = list_docs()
            text = "\n".join(f"- {p['page']}: {p['title']}. {p['summary']}" for p in pages)
            return _tool_result({"pages": pages}, text)
        return _tool_error(f"unknown tool {name!r}; the tools are search_docs, read_doc, list_docs")
    except (DocsError, TypeError, ValueError) as e:
        return _tool_error(str(e))


def build_server() -> Any:
    from mcp.server.lowlevel import Server

    from agentenv_local import __version__

    async def on_list_tools(ctx: Any, params: Any) -> dict:
        return {"tools": TOOLS, "resultType": "complete", "ttlMs": 0, "cacheScope": "public"}

    async def on_call_tool(ctx: Any, params: Any) -> dict:
        return call_tool(params.name, dict(params.arguments or {}))

    async def on_list_resources(ctx: Any, params: Any) -> dict:
        resources = [{"uri": p.uri, "name": p.page, "title": p.title, "description": p.summary,
                      "mimeType": "text/markdown", "size": len(p.text.encode())} for p in load_pages()]
        return {"resources": resources, "resultType": "complete", "ttlMs": 0, "cacheScope": "public"}

    async def on_read_resource(ctx: Any, params: Any) -> dict:
        from mcp.shared.exceptions import MCPError

        uri = str(params.uri)
        if not uri.startswith(f"{URI_SCHEME}://"):
            raise MCPError(-32602, f"not a docs resource: {uri} (expected {URI_SCHEME}://PAGE)")
        try:
            page = find_page(uri)
        except DocsError as e:
            raise MCPError(-32002, str(e)) from None
        return {"contents": [{"uri": page.uri, "mimeType": "text/markdown", "text": page.text}],
                "resultType": "complete", "ttlMs": 0, "cacheScope": "public"}

    @contextlib.asynccontextmanager
    async def lifespan(_server: Any):
        yield {}

    # mcp types these handlers' results as its models; its Server sends a plain dict as is, which keeps the
    # fields the models would drop (resultType, ttlMs, cacheScope)
    return Server(SERVER_NAME, version=__version__, title="agentenv-local docs", instructions=INSTRUCTIONS,
                  lifespan=lifespan,
                  on_list_tools=on_list_tools,  # type: ignore[arg-type]  # returns a plain dict (see above)
                  on_call_tool=on_call_tool,  # type: ignore[arg-type]  # returns a plain dict (see above)
                  on_list_resources=on_list_resources,  # type: ignore[arg-type]  # a plain dict (see above)
                  on_read_resource=on_read_resource)  # type: ignore[arg-type]  # a plain dict (see above)


def warm_up() -> None:
    """Read the pages and build the search index now, so the first request does not wait for it."""
    from .search import get_index

    get_index()


async def serve_stdio_async() -> None:
    from agentenv_local.mcp_stdio import run_over_stdio

    server = build_server()
    options = server.create_initialization_options()
    await run_over_stdio(server, options)  # requests piped in are answered even if stdin closes at once


def serve_stdio() -> None:
    import anyio

    anyio.run(serve_stdio_async)


def build_app() -> Any:
    from mcp.server.streamable_http_manager import (
        StreamableHTTPASGIApp,
        StreamableHTTPSessionManager,
    )
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    manager = StreamableHTTPSessionManager(
        app=build_server(), json_response=True,
        security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False))

    async def ready(request: Any) -> Any:
        return JSONResponse({"ok": True, "pages": len(load_pages())})

    @contextlib.asynccontextmanager
    async def lifespan(app: Any):
        async with manager.run():
            yield

    return Starlette(routes=[Route("/ready", ready, methods=["GET"]), Route("/mcp", StreamableHTTPASGIApp(manager))],
                     lifespan=lifespan)


def serve_http(host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, *, announce: bool = True) -> None:
    import uvicorn

    from agentenv_local.env.serve import bind_socket

    sock = bind_socket(host, port)
    port = sock.getsockname()[1]
    from agentenv_local.env.app import guarded

    # behind the HTTP guard (Host, Origin, body size), like every server agentenv starts
    server = uvicorn.Server(uvicorn.Config(guarded(build_app(), [host]), log_level="warning", lifespan="on",
                                           access_log=False, timeout_graceful_shutdown=3))
    if announce:
        shown = f"[{host}]" if ":" in host else host
        print(f"agentenv docs serving on http://{shown}:{port}/mcp", file=sys.stderr, flush=True)
    server.run(sockets=[sock])


def dumps(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)
