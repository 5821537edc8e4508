"""The mail env: one person's mailbox (folders, emails, contacts) in SQLite, with a data plane that loads a
mailbox and exports it back exactly, and the env's clock on every email it sends.

Run it:   python -m agentenv_local.env examples/envs/mail/server.py [--port N | --stdio]

State lives in the SQLite file named by `MAIL_DB` (default: an in-memory database per env object). The
mailbox belongs to `MAIL_ADDRESS` (default `alex.morgan@brightline.example`, the owner in `seed.json`):
`send_email` sends from that address.

Tools (plain, distinctive names, so the env composes with the crm env behind one gateway without prefixes):
`search_emails`, `read_email` (marks the email read), `send_email` (stored in `sent`, dated with `ctx.now()`:
the gateway's virtual time when its clock is armed), `move_email`, `list_folders`, `lookup_contact`, and the
hidden-by-default plumbing tool `purge_mailbox`.

Data plane:
- `data/add` takes `{"kind": "data", "data": {"emails": [...], "contacts": [...]}}`, or a file part (inline
  base64 bytes or a `file://` URI) holding that JSON; loading is additive;
- `data/get` exports `{"kind": "data", "data": {"emails": [...], "contacts": [...]}}` in the canonical shape
  (every field present, insertion order), so an export loads back to the same export;
- `data/reset` empties the mailbox (and restarts generated ids).

An email: `{"id", "folder", "from", "to": [...], "cc": [...], "subject", "body", "date", "read", "in_reply_to"}`.
A contact: `{"email", "name", "company", "title", "account_id"}` (`account_id` names the crm env's account).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import sqlite3
from typing import Annotated, Any

from pydantic import Field

from agentenv_local.env import (
    DataPart,
    Env,
    EnvError,
    ToolContext,
    add_data,
    environment_card,
    get_data,
    reset_data,
    tool,
)

SCHEMA = """
CREATE TABLE IF NOT EXISTS emails (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    folder TEXT NOT NULL,
    sender TEXT NOT NULL,
    recipients TEXT NOT NULL DEFAULT '[]',
    cc TEXT NOT NULL DEFAULT '[]',
    subject TEXT NOT NULL DEFAULT '',
    body TEXT NOT NULL DEFAULT '',
    date TEXT NOT NULL,
    read INTEGER NOT NULL DEFAULT 0,
    in_reply_to TEXT
);
CREATE TABLE IF NOT EXISTS contacts (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    email TEXT NOT NULL UNIQUE,
    name TEXT,
    company TEXT,
    title TEXT,
    account_id TEXT
);
"""

STANDARD_FOLDERS = ("inbox", "sent", "archive", "trash")
FOLDER_NAME = re.compile(r"^[a-z0-9][a-z0-9 _-]{0,39}$")
ADDRESS = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
EPOCH = "1970-01-01T00:00:00Z"
DEFAULT_OWNER = "alex.morgan@brightline.example"

READ_ONLY = {"readOnlyHint": True}
EMAIL_FIELDS = ("id", "folder", "from", "to", "cc", "subject", "body", "date", "read", "in_reply_to")
CONTACT_FIELDS = ("email", "name", "company", "title", "account_id")


def rfc3339(moment: dt.datetime) -> str:
    """`2025-03-10T09:00:00Z`: seconds, UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.astimezone(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _addresses(value: Any, field: str) -> list[str]:
    """A list of addresses from a list or a comma-separated string; each must look like an address."""
    if value is None:
        return []
    items = value.split(",") if isinstance(value, str) else list(value)
    out = [str(a).strip() for a in items if str(a).strip()]
    for address in out:
        if not ADDRESS.match(address):
            raise EnvError("invalid_argument", f"{field}: {address!r} is not an email address",
                           hint="write addresses as name@example.com")
    return out


@environment_card(name="mail", description="A mailbox: search, read, send and file emails; look up contacts.")
class Mail(Env):
    def __init__(self, path: str | None = None, address: str | None = None) -> None:
        self.path = path or os.environ.get("MAIL_DB") or ":memory:"
        self.address = address or os.environ.get("MAIL_ADDRESS") or DEFAULT_OWNER
        # One connection; sync tools run one at a time on the event loop (the SDK's default).
        self.db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self.db.row_factory = sqlite3.Row
        self.db.executescript(SCHEMA)

    # --- rows ------------------------------------------------------------------------------------------------

    @staticmethod
    def _email(row: sqlite3.Row) -> dict:
        return {"id": row["id"], "folder": row["folder"], "from": row["sender"], "to": json.loads(row["recipients"]),
                "cc": json.loads(row["cc"]), "subject": row["subject"], "body": row["body"], "date": row["date"],
                "read": bool(row["read"]), "in_reply_to": row["in_reply_to"]}

    @staticmethod
    def _contact(row: sqlite3.Row) -> dict:
        return {k: row[k] for k in CONTACT_FIELDS}

    def _get(self, email_id: str) -> dict:
        row = self.db.execute("SELECT * FROM emails WHERE id = ?", (email_id,)).fetchone()
        if row is None:
            raise EnvError("not_found", f"no email has id {email_id!r}", hint="search_emails shows the ids",
                           status=404)
        return self._email(row)

    def _folders(self) -> list[str]:
        present = [r[0] for r in self.db.execute("SELECT DISTINCT folder FROM emails ORDER BY folder")]
        return list(STANDARD_FOLDERS) + [f for f in present if f not in STANDARD_FOLDERS]

    def _new_id(self) -> str:
        """`m1`, `m2`, ... (the next number not taken; deterministic after a reset)."""
        n = self.db.execute("SELECT COUNT(*) FROM emails").fetchone()[0] + 1
        while self.db.execute("SELECT 1 FROM emails WHERE id = ?", (f"m{n}",)).fetchone():
            n += 1
        return f"m{n}"

    def _insert(self, email: dict) -> str:
        email_id = email.get("id") or self._new_id()
        try:
            self.db.execute(
                "INSERT INTO emails (id, folder, sender, recipients, cc, subject, body, date, read, in_reply_to) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (email_id, email["folder"], email["from"], json.dumps(email["to"]), json.dumps(email["cc"]),
                 email["subject"], email["body"], email["date"], int(email["read"]), email["in_reply_to"]))
        except sqlite3.IntegrityError:
            raise EnvError("invalid_argument", f"an email with id {email_id!r} already exists",
                           hint="data/reset first to replace the mailbox") from None
        return email_id

    # --- tools -----------------------------------------------------------------------------------------------

    @tool(annotations=READ_ONLY)
    def search_emails(
        self,
        query: Annotated[str, Field(description="Words to look for in sender, recipients, subject and body "
                                                "(all must match, case-insensitive); empty lists the folder")] = "",
        folder: Annotated[str, Field(description="The folder to search, or 'all' for every folder")] = "inbox",
        unread_only: Annotated[bool, Field(description="Only emails not read yet")] = False,
        limit: Annotated[int, Field(description="At most this many results", ge=1, le=100)] = 20,
    ) -> dict:
        """Find emails, newest first; returns summaries (id, folder, from, to, subject, date, read, snippet)."""
        folder = folder.strip().lower()
        if folder != "all" and folder not in self._folders():
            raise EnvError("not_found", f"no folder named {folder!r}", hint="list_folders shows the folders",
                           status=404)
        sql, args = "SELECT * FROM emails", []
        clauses = []
        if folder != "all":
            clauses.append("folder = ?")
            args.append(folder)
        if unread_only:
            clauses.append("read = 0")
        for word in query.lower().split():
            clauses.append("(lower(sender) LIKE ? OR lower(recipients) LIKE ? OR lower(cc) LIKE ? "
                           "OR lower(subject) LIKE ? OR lower(body) LIKE ?)")
            args.extend([f"%{word}%"] * 5)
        if clauses:
            sql += " WHERE " + " AND ".join(clauses)
        sql += " ORDER BY date DESC, seq DESC"
        rows = self.db.execute(sql, args).fetchall()
        found = [self._email(r) for r in rows]
        results = [{"id": e["id"], "folder": e["folder"], "from": e["from"], "to": e["to"], "subject": e["subject"],
                    "date": e["date"], "read": e["read"], "snippet": " ".join(e["body"].split())[:100]}
                   for e in found[:limit]]
        return {"total": len(found), "emails": results}

    @tool(annotations={"idempotentHint": True})
    def read_email(self, email_id: Annotated[str, Field(description="The email's id", min_length=1)]) -> dict:
        """Open one email in full (marks it read)."""
        email = self._get(email_id)
        if not email["read"]:
            self.db.execute("UPDATE emails SET read = 1 WHERE id = ?", (email_id,))
            email["read"] = True
        return email

    @tool()
    def send_email(
        self,
        ctx: ToolContext,
        to: Annotated[list[str] | str, Field(description="Recipient addresses (a list, or comma-separated)")],
        subject: Annotated[str, Field(description="The subject; empty on a reply means 'Re: <original>'",
                                      max_length=300)],
        body: Annotated[str, Field(description="The message text")],
        in_reply_to: Annotated[str | None, Field(description="The id of the email this answers")] = None,
    ) -> dict:
        """Send an email from the mailbox's owner; it is stored in `sent`, dated with the env's clock."""
        recipients = _addresses(to, "to")
        if not recipients:
            raise EnvError("invalid_argument", "to: at least one recipient is needed")
        if in_reply_to is not None:
            original = self._get(in_reply_to)
            if not subject.strip():
                subject = original["subject"] if original["subject"].lower().startswith("re:") else \
                    f"Re: {original['subject']}"
        elif not subject.strip():
            raise EnvError("invalid_argument", "subject: an email needs a subject (or in_reply_to)")
        email = {"folder": "sent", "from": self.address, "to": recipients, "cc": [], "subject": subject,
                 "body": body, "date": rfc3339(ctx.now()), "read": True, "in_reply_to": in_reply_to}
        return self._get(self._insert(email))

    @tool(annotations={"idempotentHint": True})
    def move_email(
        self,
        email_id: Annotated[str, Field(description="The email's id", min_length=1)],
        folder: Annotated[str, Field(description="The folder to move it to (archive, trash, inbox or a new "
                                                 "folder's name, created on first use)")],
    ) -> dict:
        """File an email into another folder."""
        email = self._get(email_id)
        target = folder.strip().lower()
        if target == "all" or not FOLDER_NAME.match(target):
            raise EnvError("invalid_argument", f"{folder!r} is not a folder name",
                           hint="use lowercase letters, digits, spaces, '-' or '_' (at most 40)")
        if target == "sent" and email["from"] != self.address:
            raise EnvError("invalid_argument", f"only emails {self.address} sent can go in 'sent'",
                           hint="archive it instead")
        self.db.execute("UPDATE emails SET folder = ? WHERE id = ?", (target, email_id))
        return {"id": email_id, "from_folder": email["folder"], "folder": target}

    @tool(annotations=READ_ONLY)
    def list_folders(self) -> list[dict]:
        """The mailbox's folders with their total and unread counts."""
        counts = {r["folder"]: (r["total"], r["unread"]) for r in self.db.execute(
            "SELECT folder, COUNT(*) AS total, SUM(read = 0) AS unread FROM emails GROUP BY folder")}
        return [{"name": f, "total": counts.get(f, (0, 0))[0], "unread": counts.get(f, (0, 0))[1] or 0}
                for f in self._folders()]

    @tool(annotations=READ_ONLY)
    def lookup_contact(self, query: Annotated[str, Field(description="Part of a name, address or company",
                                                         min_length=1)]) -> list[dict]:
        """Find contacts by name, address or company (case-insensitive)."""
        like = f"%{query.strip().lower()}%"
        rows = self.db.execute("SELECT * FROM contacts WHERE lower(email) LIKE ? OR lower(coalesce(name, '')) LIKE ? "
                               "OR lower(coalesce(company, '')) LIKE ? ORDER BY seq", (like, like, like)).fetchall()
        return [self._contact(r) for r in rows]

    @tool(hidden_by_default=True, annotations={"destructiveHint": True})
    def purge_mailbox(self) -> dict:
        """Delete every email (contacts stay). Plumbing for tasks: hidden from agents by default."""
        deleted = self.db.execute("DELETE FROM emails").rowcount
        return {"deleted": deleted}

    # --- data plane ------------------------------------------------------------------------------------------

    @reset_data
    def reset(self) -> None:
        self.db.execute("DELETE FROM emails")
        self.db.execute("DELETE FROM contacts")
        self.db.execute("DELETE FROM sqlite_sequence")

    @add_data
    def load(self, parts: list) -> None:
        batches = []
        for part in parts:
            if part.kind == "data":
                batches.append(part.data)
            elif part.kind == "file":
                try:
                    data = json.loads(part.read_bytes())
                except (OSError, ValueError) as e:
                    raise EnvError("invalid_argument", f"file part {part.name or ''} is not readable JSON: {e}",
                                   hint='send {"emails": [...], "contacts": [...]}') from None
                if not isinstance(data, dict):
                    raise EnvError("invalid_argument", "a mailbox file holds a JSON object")
                batches.append(data)
            else:
                raise EnvError("invalid_argument", "the mail env loads data or JSON file parts, not text",
                               hint='send {"kind": "data", "data": {"emails": [...], "contacts": [...]}}')
        # validate everything first, then write in one transaction: a bad part loads nothing
        emails, contacts = [], []
        for data in batches:
            unknown = set(data) - {"emails", "contacts"}
            if unknown or not data:
                raise EnvError("invalid_argument", f"expected {{\"emails\": [...], \"contacts\": [...]}}, got keys "
                               f"{sorted(data)}", hint="export with data/get to see the shape")
            emails += [self._email_in(e) for e in self._list(data, "emails")]
            contacts += [self._contact_in(c) for c in self._list(data, "contacts")]
        self.db.execute("BEGIN")
        try:
            for email in emails:
                self._insert(email)
            for contact in contacts:
                cols = ", ".join(CONTACT_FIELDS)
                self.db.execute(f"INSERT INTO contacts ({cols}) VALUES (?, ?, ?, ?, ?) ON CONFLICT(email) DO UPDATE "
                                "SET name = excluded.name, company = excluded.company, title = excluded.title, "
                                "account_id = excluded.account_id", [contact[k] for k in CONTACT_FIELDS])
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    @staticmethod
    def _list(data: dict, key: str) -> list:
        value = data.get(key, [])
        if not isinstance(value, list):
            raise EnvError("invalid_argument", f"{key} must be a list")
        return value

    @staticmethod
    def _email_in(raw: Any) -> dict:
        if not isinstance(raw, dict) or not raw.get("from"):
            raise EnvError("invalid_argument", f"each email needs a 'from' address: {raw!r}")
        unknown = set(raw) - set(EMAIL_FIELDS)
        if unknown:
            raise EnvError("invalid_argument", f"unknown email field(s) {sorted(unknown)}",
                           hint=f"an email has {list(EMAIL_FIELDS)}")
        folder = str(raw.get("folder") or "inbox").lower()
        if not FOLDER_NAME.match(folder):
            raise EnvError("invalid_argument", f"{folder!r} is not a folder name")
        return {"id": str(raw["id"]) if raw.get("id") else None, "folder": folder, "from": str(raw["from"]),
                "to": _addresses(raw.get("to"), "to"), "cc": _addresses(raw.get("cc"), "cc"),
                "subject": str(raw.get("subject") or ""), "body": str(raw.get("body") or ""),
                "date": str(raw.get("date") or EPOCH), "read": bool(raw.get("read", False)),
                "in_reply_to": raw.get("in_reply_to")}

    @staticmethod
    def _contact_in(raw: Any) -> dict:
        if not isinstance(raw, dict) or not raw.get("email"):
            raise EnvError("invalid_argument", f"each contact needs an 'email': {raw!r}")
        return {k: (raw.get(k) if raw.get(k) is None else str(raw.get(k))) for k in CONTACT_FIELDS}

    @get_data
    def export(self) -> list:
        emails = [self._email(r) for r in self.db.execute("SELECT * FROM emails ORDER BY seq")]
        contacts = [self._contact(r) for r in self.db.execute("SELECT * FROM contacts ORDER BY seq")]
        return [DataPart(data={"emails": emails, "contacts": contacts})]

    def declared_extensions(self) -> list:
        return [{"uri": "urn:agentenv:intake/v1",
                 "description": "What data/add accepts and data/get returns: a mailbox as JSON "
                                '{"emails": [...], "contacts": [...]}.',
                 "params": {"add": [{"part": "data", "format": "json", "load": "additive"},
                                    {"part": "file", "format": "json", "mimeTypes": ["application/json"],
                                     "load": "additive"}],
                            "get": [{"part": "data", "format": "json"}]}}]


if __name__ == "__main__":
    Mail().serve()
