"""`agentenv docs serve|search|read|list`: the user docs, offline, as an MCP server or in the terminal.

Needs no hub, no project and no network: the docs ship inside the package. mcp and uvicorn are imported
only by `serve`.
"""

from __future__ import annotations

import sys

import click


def _docs_error(exc: Exception) -> None:
    click.echo(f"Error: {exc}", err=True)
    sys.exit(1)


@click.group("docs")
def docs_group() -> None:
    """Search and read the agentenv docs, or serve them over MCP for editors and agents.

    The docs ship inside the package: no hub, no network. `agentenv docs serve` is an MCP server
    (stdio by default, --http for streamable HTTP) with the tools search_docs, read_doc and
    list_docs, and every page as a resource agentenv-docs://PAGE. See
    docs/reference/mcp-docs-server.md.
    """


@docs_group.command("serve")
@click.option("--http", "http", is_flag=True, help="Serve MCP over streamable HTTP at /mcp instead of stdio.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind with --http.")
@click.option("--port", type=click.IntRange(0, 65535), default=18770, show_default=True,
              help="Port to bind with --http (0 = any free port).")
def serve(http: bool, host: str, port: int) -> None:
    """Serve the docs as an MCP server: stdio by default (what editors start), or --http.

    With --http it prints its URL (`agentenv docs serving on http://127.0.0.1:18770/mcp`) to
    stderr once it listens. Example for Claude Code: `claude mcp add agentenv-docs -- agentenv
    docs serve`.
    """
    from agentenv_local.docs_server import server

    try:
        server.warm_up()
    except FileNotFoundError as e:
        _docs_error(e)
    if http:
        server.serve_http(host, port)
    else:
        server.serve_stdio()


@docs_group.command("search")
@click.argument("query", nargs=-1, required=True)
@click.option("-n", "--limit", type=click.IntRange(1, 50), default=5, show_default=True, help="How many hits.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def search(query: tuple[str, ...], limit: int, as_json: bool) -> None:
    """Ranked full-text search over the docs' sections (best first).

    Each hit is a page and section anchor; read it with `agentenv docs read PAGE ANCHOR`.
    """
    from agentenv_local.docs_server.server import DocsError, dumps, search_docs

    try:
        hits = search_docs(" ".join(query), limit)
    except (DocsError, FileNotFoundError) as e:
        _docs_error(e)
        return
    if as_json:
        click.echo(dumps(hits))
        return
    if not hits:
        click.echo("no matches", err=True)
        sys.exit(1)
    for i, hit in enumerate(hits, 1):
        click.echo(f"{i}. {hit['page']}#{hit['anchor']}  {hit['section']}  (score {hit['score']})")
        click.echo(f"   {hit['snippet']}")


@docs_group.command("read")
@click.argument("page")
@click.argument("section", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def read(page: str, section: str | None, as_json: bool) -> None:
    """Print a docs page's markdown, or one SECTION of it (an anchor or the heading's text).

    PAGE is a path as `agentenv docs list` shows it (`environments/rbac.md`; `.md` is optional).
    """
    from agentenv_local.docs_server.server import DocsError, dumps, read_doc

    try:
        doc = read_doc(page, section)
    except (DocsError, FileNotFoundError) as e:
        _docs_error(e)
        return
    click.echo(dumps(doc) if as_json else doc["text"])


@docs_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_pages(as_json: bool) -> None:
    """Every docs page with its title and one-line summary."""
    from agentenv_local.docs_server.server import dumps, list_docs

    try:
        pages = list_docs()
    except FileNotFoundError as e:
        _docs_error(e)
        return
    if as_json:
        click.echo(dumps(pages))
        return
    width = max(len(p["page"]) for p in pages)
    for p in pages:
        click.echo(f"{p['page'].ljust(width)}  {p['title']}")
