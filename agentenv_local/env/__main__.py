"""`python -m agentenv_local.env PATH/TO/server.py[:ClassName] [--stdio] [--port N]`: serve an env."""

import sys

from .serve import main

if __name__ == "__main__":
    sys.exit(main())
