"""An agent's conversation as OpenAI-style chat messages (`user`, `assistant` with `tool_calls`, `tool`).

Our agents' trajectories share a small vocabulary: a `turn` event opens each turn with the prompt, a
`tool_call` event holds one call with its result, and the text the agent said is a `reply` (scripted), a
`final` (tool loop) or an `assistant_text` (the coding CLIs). A turn whose trajectory holds none of that
text still ends with the reply the A2A task gave, so the messages always carry what the agent answered.
"""

from __future__ import annotations

import json
from typing import Any

TEXT_EVENTS = frozenset({"reply", "final", "assistant_text"})


def conversation_messages(turns: list[dict], trajectory: list[dict]) -> list[dict[str, Any]]:
    """The messages of one prompt_agent conversation: its `turns` (prompt, response) and the agent's trajectory."""
    segments = _segments_by_turn(trajectory)
    if not segments:  # an agent that keeps no trajectory: only what was said each turn
        segments = [[] for _ in turns]
    messages: list[dict[str, Any]] = []
    calls = 0
    for index, segment in enumerate(segments):
        turn = turns[index] if index < len(turns) else {}
        prompt = turn.get("prompt")
        opener = segment[0] if segment and segment[0].get("type") == "turn" else None
        text = opener.get("input") if opener else prompt
        if text is not None:
            messages.append({"role": "user", "content": str(text)})
        said = False
        for event in segment:
            kind = event.get("type")
            if kind == "tool_call":
                calls += 1
                call_id = str(event.get("id") or f"call_{calls}")
                messages.append({"role": "assistant", "content": None, "tool_calls": [{
                    "id": call_id, "type": "function",
                    "function": {"name": _tool_name(event), "arguments": json.dumps(event.get("args") or {})}}]})
                messages.append({"role": "tool", "tool_call_id": call_id, "content": _as_text(event.get("result"))})
            elif kind in TEXT_EVENTS and event.get("text"):
                messages.append({"role": "assistant", "content": str(event["text"])})
                said = True
        if not said and turn.get("response"):
            messages.append({"role": "assistant", "content": str(turn["response"])})
    return messages


def _segments_by_turn(trajectory: list[dict]) -> list[list[dict]]:
    """The trajectory cut at each `turn` event (events before the first one join the first segment)."""
    segments: list[list[dict]] = []
    for event in trajectory:
        if not isinstance(event, dict):
            continue
        if event.get("type") == "turn" or not segments:
            segments.append([])
        segments[-1].append(event)
    return segments


def _tool_name(event: dict) -> str:
    """The name the model called: the agent's own name for the tool when it kept one, else server__tool."""
    if event.get("name"):
        return str(event["name"])
    server, tool = event.get("server"), event.get("tool")
    return f"{server}__{tool}" if server and tool else str(tool or "tool")


def _as_text(value: Any) -> str:
    """A tool result as a tool message's content: text as it is, anything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, default=str)
