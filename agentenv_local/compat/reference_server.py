"""Run a reference env's `server.py` as `python server.py` would, with our SDK standing in for
`agentenv_protocol` when the real one is not importable in this interpreter:

    python -m agentenv_local.compat.reference_server server.py
    python -m agentenv_local.compat.reference_server /app/server.py --wait-for /app/.ready   # in a container

The stand-in (`compat/shims/agentenv_protocol`) goes on this process's import path only then, so a real
install always wins. Its `serve()` is our env runtime's: MCP over streamable HTTP on $MCP_HOST:$MCP_PORT at
/mcp, the card, the data plane and the admin token the hub passes, as for our own env servers."""

from __future__ import annotations

import argparse
import importlib.util
import os
import runpy
import sys
import time
from pathlib import Path

SHIMS = Path(__file__).resolve().parent / "shims"
WAIT_S = 120.0  # how long a container's server waits for the hub to write the env's files into it


def needs_stand_in() -> bool:
    """Whether this interpreter lacks the real `agentenv_protocol`."""
    return importlib.util.find_spec("agentenv_protocol") is None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agentenv_local.compat.reference_server",
                                     description="Run a reference env's server.py as `python server.py` would.")
    parser.add_argument("server", help="the env folder's server.py")
    parser.add_argument("--wait-for", metavar="PATH",
                        help="start once PATH exists (the hub writes it after the env's files, in a container)")
    args = parser.parse_args(argv)
    if args.wait_for:
        deadline = time.monotonic() + WAIT_S
        while not os.path.exists(args.wait_for):
            if time.monotonic() > deadline:
                print(f"{args.wait_for}: not written within {WAIT_S:g}s (the env's files never came)", file=sys.stderr)
                return 2
            time.sleep(0.05)
    server = Path(args.server).resolve()
    if not server.is_file():
        print(f"{args.server}: no such file (the env folder's server.py)", file=sys.stderr)
        return 2
    # As `python server.py`: its own folder first on the import path and as the working folder, its path as argv[0].
    os.chdir(server.parent)
    sys.path.insert(0, str(server.parent))
    if needs_stand_in():
        sys.path.insert(1, str(SHIMS))
    sys.argv = [str(server)]
    runpy.run_path(str(server), run_name="__main__")
    return 0

if __name__ == "__main__":
    sys.exit(main())
