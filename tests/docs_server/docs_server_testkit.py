"""Helpers shared by the docs server tests (imported by name: `from docs_server_testkit import ...`)."""

from __future__ import annotations

from pathlib import Path

from testkit_servers import agentenv_exe

ROOT = Path(__file__).resolve().parents[2]

__all__ = ["ROOT", "agentenv_exe"]
