"""Where a run executed, in one line (for `agentenv runs show` and the TUI's run screen)."""

from __future__ import annotations

from typing import Any


def where_text(run: dict[str, Any]) -> str | None:
    """"Ray node 1a2b3c4d (host, pid 123), attempt 2 (1 lost)" for a run a Ray worker executed, "worker process
    pid 123" for one of the hub's worker processes; None for a run the hub executed itself."""
    executor = run.get("executor")
    if not isinstance(executor, dict) or executor.get("kind") not in ("ray", "workers"):
        return None
    if executor["kind"] == "workers":
        text = f"worker process pid {executor.get('pid')}"
    else:
        text = (f"Ray node {str(executor.get('node_id') or '?')[:8]} ({executor.get('host')}, "
                f"pid {executor.get('pid')})")
    lost = executor.get("attempts") or []
    if lost:
        text += f", attempt {int(executor.get('attempt') or 0) + 1} ({len(lost)} lost)"
    return text
