"""Runner tests: the helpers live next to the hub tests (agentenv_hub_testkit)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "hub"))
