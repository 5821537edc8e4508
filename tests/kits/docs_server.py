"""Helpers shared by the docs server tests (`from kits.docs_server import ...`)."""

from __future__ import annotations

from pathlib import Path

from kits.servers import agentenv_exe

ROOT = Path(__file__).resolve().parents[2]

__all__ = ["ROOT", "agentenv_exe"]
