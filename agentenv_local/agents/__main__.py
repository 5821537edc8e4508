"""``python -m agentenv_local.agents SPEC [--port N] [--config JSON] [--plan FILE]``: serve an agent over A2A."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
