"""The project's docs, searchable and readable offline: as an MCP server (`agentenv docs serve`) and from the
terminal (`agentenv docs search|read|list`). See docs/reference/mcp-docs-server.md.

The docs ship inside the wheel as `agentenv_local/_docs`; in a checkout they are read from `docs/`.
Importing this package imports neither mcp nor the index: both load on first use.
"""

from __future__ import annotations

from .corpus import Page, Section, docs_dir, load_pages

__all__ = ["Page", "Section", "docs_dir", "list_docs", "load_pages", "read_doc", "search_docs"]


def search_docs(query: str, limit: int = 5) -> list[dict]:
    from .server import search_docs as _search

    return _search(query, limit)


def read_doc(page: str, section: str | None = None) -> dict:
    from .server import read_doc as _read

    return _read(page, section)


def list_docs() -> list[dict]:
    from .server import list_docs as _list

    return _list()
