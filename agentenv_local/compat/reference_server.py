"""Run a reference env's `server.py` as `python server.py` would, with our SDK standing in for
`agentenv_protocol` when the real one is not importable in this interpreter:

    python -m agentenv_local.compat.reference_server server.py

The stand-in (`compat/shims/agentenv_protocol`) goes on this process's import path only then, so a real
install always wins. Its `serve()` is our env runtime's: MCP over streamable HTTP on $MCP_HOST:$MCP_PORT at
/mcp, the card, the data plane and the admin token the hub passes, as for our own env servers."""

from __future__ import annotations

import importlib.util
import runpy
import sys
from pathlib import Path

SHIMS = Path(__file__).resolve().parent / "shims"


def needs_stand_in() -> bool:
    """Whether this interpreter lacks the real `agentenv_protocol`."""
    return importlib.util.find_spec("agentenv_protocol") is None


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m agentenv_local.compat.reference_server SERVER.py", file=sys.stderr)
        return 2
    server = Path(args[0]).resolve()
    if not server.is_file():
        print(f"{args[0]}: no such file (the env folder's server.py)", file=sys.stderr)
        return 2
    # As `python server.py`: its own folder first on the import path, its path as argv[0].
    sys.path.insert(0, str(server.parent))
    if needs_stand_in():
        sys.path.insert(1, str(SHIMS))
    sys.argv = [str(server)]
    runpy.run_path(str(server), run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
