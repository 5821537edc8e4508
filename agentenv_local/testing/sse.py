"""Server-sent events as the model APIs send them: `event: NAME` (when named) and one `data:` JSON line."""

from __future__ import annotations

import json
from typing import Any


def sse_event(data: Any, event: str | None = None) -> bytes:
    """One SSE event; `data` is JSON-encoded unless it is already a str (OpenAI's `[DONE]`)."""
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


def pieces(text: str, size: int = 12) -> list[str]:
    """Split text into the small deltas a streaming API sends (at least one piece, maybe empty)."""
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]
