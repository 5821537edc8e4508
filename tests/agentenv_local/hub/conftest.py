"""Hub tests: real `agentenv` subprocesses and real DuckDB files in tmp_path."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
