"""shelf: short notes by key (a small SDK server, one of the desk's two)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from agentenv_local.env import DataPart, Env, EnvError, environment_card, get_data, reset_data, tool


@environment_card(name="shelf", description="Short notes, by key.")
class Shelf(Env):
    def __init__(self) -> None:
        self.notes: dict[str, str] = {}

    @tool()
    def put_note(self, key: Annotated[str, Field(description="The note's key")],
                 text: Annotated[str, Field(description="The note")]) -> dict:
        """Store a note under a key (replacing the one there)."""
        self.notes[key] = text
        return {"key": key, "notes": len(self.notes)}

    @tool(annotations={"readOnlyHint": True})
    def get_note(self, key: Annotated[str, Field(description="The note's key")]) -> str:
        """The note stored under a key."""
        if key not in self.notes:
            raise EnvError("not_found", f"no note {key!r}", hint="list them with list_notes")
        return self.notes[key]

    @tool(annotations={"readOnlyHint": True})
    def list_notes(self) -> list[str]:
        """The keys of every note."""
        return sorted(self.notes)

    @reset_data
    def reset(self) -> None:
        self.notes.clear()

    @get_data
    def export(self) -> list:
        return [DataPart(data={"notes": self.notes})]
