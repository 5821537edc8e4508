"""The notes env: a small env with real state (SQLite), a data plane that loads and exports it, roles, and the
virtual clock (notes are stamped with the env's time: the gateway's virtual time when its clock is armed).

Run it:   python -m agentenv_local.env examples/envs/notes/server.py [--port N | --stdio]

State lives in the SQLite file named by `NOTES_DB` (default: in memory, one database per process).

Data plane:
- `data/add` takes `{"kind": "data", "data": {"notes": [{"title", "body", "tags"?, "created_at"?}]}}`, a JSON file
  part with the same object, or text parts (each becomes a note titled by its first line);
- `data/get` exports `{"kind": "data", "data": {"notes": [...]}}` (loadable again with `data/add`);
- `data/reset` empties the store.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from typing import Annotated, Literal

from pydantic import Field

from agentenv_local.env import (
    DataPart,
    Env,
    EnvError,
    ToolContext,
    add_data,
    environment_card,
    extension,
    get_data,
    reset_data,
    tool,
)

SCHEMA = """
CREATE TABLE IF NOT EXISTS notes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    title TEXT NOT NULL,
    body TEXT NOT NULL DEFAULT '',
    tags TEXT NOT NULL DEFAULT '[]',
    author TEXT,
    created_at TEXT NOT NULL
)
"""

READ_ONLY = {"readOnlyHint": True}


@environment_card(name="notes", description="A notebook: write, find and delete notes.")
class Notes(Env):
    def __init__(self, path: str | None = None) -> None:
        self.path = path or os.environ.get("NOTES_DB") or ":memory:"
        # One connection, used from whichever thread serves the call (calls run one at a time on the event loop).
        self.db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self.db.row_factory = sqlite3.Row
        self.db.execute(SCHEMA)
        self.lock = threading.Lock()

    def _row(self, row: sqlite3.Row) -> dict:
        return {"id": row["id"], "title": row["title"], "body": row["body"], "tags": json.loads(row["tags"]),
                "author": row["author"], "created_at": row["created_at"]}

    def _insert(self, title: str, body: str, tags: list[str], author: str | None, created_at: str) -> int:
        with self.lock:
            cur = self.db.execute("INSERT INTO notes (title, body, tags, author, created_at) VALUES (?, ?, ?, ?, ?)",
                                  (title, body, json.dumps(tags), author, created_at))
            return int(cur.lastrowid)

    def _get(self, note_id: int) -> dict:
        row = self.db.execute("SELECT * FROM notes WHERE id = ?", (note_id,)).fetchone()
        if row is None:
            raise EnvError("not_found", f"no note has id {note_id}", hint="list_notes shows the ids", status=404)
        return self._row(row)

    # --- tools ----------------------------------------------------------------------------------------------

    @tool()
    def add_note(self, ctx: ToolContext,
                 title: Annotated[str, Field(description="A short title", min_length=1, max_length=200)],
                 body: Annotated[str, Field(description="The note's text")] = "",
                 tags: Annotated[list[str], Field(description="Labels to find the note by")] = []) -> dict:
        """Write a new note; returns it with its id and creation time."""
        if ctx.caller.role == "viewer":
            raise EnvError("permission_denied", "viewers cannot write notes")
        created = ctx.now().isoformat(timespec="seconds").replace("+00:00", "Z")
        return self._get(self._insert(title, body, tags, ctx.caller.role, created))

    @tool(annotations=READ_ONLY)
    def list_notes(self, tag: Annotated[str | None, Field(description="Only notes with this tag")] = None,
                   order: Literal["newest", "oldest"] = "newest") -> list[dict]:
        """List notes (id, title, tags, created_at), newest first unless asked otherwise."""
        direction = "DESC" if order == "newest" else "ASC"
        rows = self.db.execute(f"SELECT * FROM notes ORDER BY created_at {direction}, id {direction}").fetchall()
        notes = [self._row(r) for r in rows]
        if tag is not None:
            notes = [n for n in notes if tag in n["tags"]]
        return [{k: n[k] for k in ("id", "title", "tags", "created_at")} for n in notes]

    @tool(annotations=READ_ONLY)
    def get_note(self, note_id: Annotated[int, Field(description="The note's id")]) -> dict:
        """Read one note in full."""
        return self._get(note_id)

    @tool(annotations=READ_ONLY)
    def search_notes(self, query: Annotated[str, Field(description="Words to look for in titles and bodies")]) -> list:
        """Find notes whose title or body contains the query (case-insensitive)."""
        like = f"%{query.lower()}%"
        rows = self.db.execute("SELECT * FROM notes WHERE lower(title) LIKE ? OR lower(body) LIKE ? ORDER BY id",
                               (like, like)).fetchall()
        return [self._row(r) for r in rows]

    @tool(annotations={"destructiveHint": True})
    def delete_note(self, ctx: ToolContext, note_id: int) -> dict:
        """Delete a note by id."""
        if ctx.caller.role == "viewer":
            raise EnvError("permission_denied", "viewers cannot delete notes")
        note = self._get(note_id)
        with self.lock:
            self.db.execute("DELETE FROM notes WHERE id = ?", (note_id,))
        return {"deleted": note["id"], "title": note["title"]}

    # --- data plane -----------------------------------------------------------------------------------------

    @reset_data
    def reset(self) -> None:
        with self.lock:
            self.db.execute("DELETE FROM notes")
            self.db.execute("DELETE FROM sqlite_sequence WHERE name = 'notes'")

    @add_data
    def load(self, parts: list) -> None:
        for part in parts:
            if part.kind == "data":
                self._load_notes(part.data)
            elif part.kind == "file":
                try:
                    self._load_notes(json.loads(part.read_bytes()))
                except ValueError as e:
                    raise EnvError("bad_file", f"file part {part.name or ''} is not JSON: {e}") from None
            else:
                title, _, body = part.text.partition("\n")
                self._insert(title.strip() or "note", body.strip(), [], None, "1970-01-01T00:00:00Z")

    def _load_notes(self, data: dict) -> None:
        notes = data.get("notes")
        if not isinstance(notes, list):
            raise EnvError("bad_data", "expected {\"notes\": [...]}", hint="export with data/get to see the shape")
        for note in notes:
            if not isinstance(note, dict) or not note.get("title"):
                raise EnvError("bad_data", f"each note needs a title: {note!r}")
            self._insert(str(note["title"]), str(note.get("body", "")), list(note.get("tags") or []),
                         note.get("author"), str(note.get("created_at") or "1970-01-01T00:00:00Z"))

    @get_data
    def export(self) -> list:
        rows = self.db.execute("SELECT * FROM notes ORDER BY id").fetchall()
        notes = [{k: v for k, v in self._row(r).items() if k != "id"} for r in rows]
        return [DataPart(data={"notes": notes})]

    # --- extensions -----------------------------------------------------------------------------------------

    @extension("urn:agentenv:notes-stats/v1", op="count", method="GET", description="Counts for graders.")
    def count(self, tag: str | None = None) -> dict:
        rows = self.db.execute("SELECT tags FROM notes").fetchall()
        tags = [json.loads(r["tags"]) for r in rows]
        return {"notes": len(rows) if tag is None else sum(tag in t for t in tags)}

    @extension("urn:agentenv:notes-stats/v1", op="authors", method="GET")
    def authors(self) -> dict:
        rows = self.db.execute("SELECT author, COUNT(*) AS n FROM notes GROUP BY author ORDER BY author").fetchall()
        return {"authors": {r["author"] or "default": r["n"] for r in rows}}

    def extension_params(self, uri: str) -> dict:
        return {"version": 1} if uri == "urn:agentenv:notes-stats/v1" else {}

    def declared_extensions(self) -> list:
        return [{"uri": "urn:agentenv:intake/v1",
                 "description": "Declares what the v1 data plane accepts on data/add and returns on data/get.",
                 "params": {"add": [{"part": "data", "format": "json", "load": "additive"},
                                    {"part": "file", "format": "json", "mimeTypes": ["application/json"],
                                     "load": "additive"}],
                            "get": [{"part": "data", "format": "json"}]}}]


if __name__ == "__main__":
    Notes().serve()
