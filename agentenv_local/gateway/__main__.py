"""`python -m agentenv_local.gateway --child NAME=URL|PATH ... [--prefix-tools] [--mode consistent] --port N`:
serve a gateway in front of MCP servers (URLs of running servers, or env files run as subprocesses) for manual
use. Binds 127.0.0.1 unless --host says otherwise."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agentenv_local.gateway", description=__doc__)
    parser.add_argument("--child", action="append", default=[], metavar="NAME=URL|PATH",
                        help="a backing server: the URL of an MCP server (http://host:port/mcp) or an env's "
                             "server.py (run as a subprocess); repeat for several")
    parser.add_argument("--name", default="env", help="the env's name (the card's name); default: env")
    parser.add_argument("--prefix-tools", action="store_true",
                        help="serve each server's tools as <child>_<tool> (resolves tool-name clashes)")
    parser.add_argument("--mode", choices=["performance", "consistent"], default="performance")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=18765)
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args(argv)
    if not args.child:
        parser.error("give at least one --child NAME=URL|PATH")
    from .children import ChildSpec
    from .server import Gateway

    specs = []
    for item in args.child:
        name, sep, target = item.partition("=")
        if not sep or not name or not target:
            parser.error(f"--child {item!r}: expected NAME=URL or NAME=PATH")
        specs.append(ChildSpec(name, target))
    gateway = Gateway(args.name, specs, mode=args.mode, prefix_tools=args.prefix_tools)
    print(f"gateway {args.name!r} serving on http://{args.host}:{args.port} (MCP at /mcp)", file=sys.stderr,
          flush=True)
    gateway.serve(host=args.host, port=args.port, log_level=args.log_level)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
