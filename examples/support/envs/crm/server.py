"""The crm env: a small sales CRM (accounts, contacts, deals, activities) in SQLite, with validated deal-stage
transitions, role-aware writes, a data plane that loads and exports it exactly, and a fault-injection extension.

Run it:   python -m agentenv_local.env examples/envs/crm/server.py [--port N | --stdio]

State lives in the SQLite file named by `CRM_DB` (default: an in-memory database per env object).

Tools (plain, distinctive names, so the env composes with the mail env behind one gateway without prefixes):
`find_account`, `get_account`, `list_deals`, `pipeline_summary` (read-only), `update_deal_stage` and
`log_activity` (writes: each records an activity dated with `ctx.now()`, the gateway's virtual time when its
clock is armed, and with the caller's role as the actor). A caller with the role `viewer` gets
`permission_denied` from the writes.

Changes: the env keeps a changelog (`keeps_changelog = True`, so its card advertises `urn:agentenv:changes/v1`):
every row a write tool changes is reported with `ctx.record_change` (the record before and after), and a
gateway in front of it serves them, attributed to the call, at `GET /changes`.

Deal stages: prospecting -> qualification -> proposal -> negotiation -> closed_won, and closed_lost from any
open stage. A deal moves one stage forward or back (or to closed_lost); closed deals stay closed.

Data plane: `data/add` takes `{"kind": "data", "data": {"accounts", "contacts", "deals", "activities"}}` (any
subset of the four lists) or a JSON file part (inline base64 bytes or a `file://` URI) holding it; `data/get`
exports all four lists in the canonical shape (every field present, insertion order), so an export loads back
to the same export; `data/reset` empties the CRM, restarts generated ids and clears injected faults.

Extension `urn:agentenv:set-errors/v1`: `POST /agentenv/ext/set_errors` with `{"tool_name", "error_rate",
"error_type", "seed"?}` makes that tool (or `"*"`: every tool) fail with `error_type` at `error_rate` (0 clears),
drawn from a seeded RNG so a run is reproducible.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import sqlite3
from typing import Annotated, Any, Literal

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
CREATE TABLE IF NOT EXISTS accounts (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, name TEXT NOT NULL, industry TEXT,
    owner TEXT, tier TEXT
);
CREATE TABLE IF NOT EXISTS contacts (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, account_id TEXT NOT NULL, name TEXT NOT NULL,
    email TEXT, title TEXT
);
CREATE TABLE IF NOT EXISTS deals (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, account_id TEXT NOT NULL, name TEXT NOT NULL,
    stage TEXT NOT NULL, amount REAL NOT NULL DEFAULT 0, close_date TEXT, owner TEXT
);
CREATE TABLE IF NOT EXISTS activities (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, account_id TEXT NOT NULL, deal_id TEXT,
    kind TEXT NOT NULL, summary TEXT NOT NULL, actor TEXT, at TEXT NOT NULL
);
"""

STAGES = ("prospecting", "qualification", "proposal", "negotiation", "closed_won", "closed_lost")
OPEN_STAGES = STAGES[:4]
Stage = Literal["prospecting", "qualification", "proposal", "negotiation", "closed_won", "closed_lost"]
ActivityKind = Literal["call", "email", "meeting", "note"]
KINDS = ("call", "email", "meeting", "note", "stage_change")

FIELDS = {
    "accounts": ("id", "name", "industry", "owner", "tier"),
    "contacts": ("id", "account_id", "name", "email", "title"),
    "deals": ("id", "account_id", "name", "stage", "amount", "close_date", "owner"),
    "activities": ("id", "account_id", "deal_id", "kind", "summary", "actor", "at"),
}
REQUIRED = {"accounts": ("id", "name"), "contacts": ("id", "account_id", "name"),
            "deals": ("id", "account_id", "name", "stage"), "activities": ("account_id", "kind", "summary", "at")}
ID_PREFIX = {"activities": "act-"}
TABLES = tuple(FIELDS)

READ_ONLY = {"readOnlyHint": True}
WRITE_TOOLS = frozenset({"update_deal_stage", "log_activity"})
ERROR_TYPES = ("unavailable", "timeout", "internal", "rate_limited")


def rfc3339(moment: dt.datetime) -> str:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.astimezone(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def allowed_next(stage: str) -> list[str]:
    """The stages a deal in `stage` may move to: one forward, one back, or lost; closed deals stay closed."""
    if stage not in OPEN_STAGES:
        return []
    i = OPEN_STAGES.index(stage)
    out = []
    if i > 0:
        out.append(OPEN_STAGES[i - 1])
    out.append(OPEN_STAGES[i + 1] if i + 1 < len(OPEN_STAGES) else "closed_won")
    out.append("closed_lost")
    return out


def _amount(value: Any) -> int | float:
    number = float(value)
    return int(number) if number.is_integer() else number


@environment_card(name="crm", description="A sales CRM: accounts, contacts, deals in a pipeline, activities.")
class Crm(Env):
    keeps_changelog = True

    def __init__(self, path: str | None = None) -> None:
        self.path = path or os.environ.get("CRM_DB") or ":memory:"
        self.db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self.db.row_factory = sqlite3.Row
        self.db.executescript(SCHEMA)
        self._clear_faults()

    def _clear_faults(self) -> None:
        self.faults: dict[str, dict] = {}
        self.rng = random.Random(0)

    # --- who may call what, and injected faults --------------------------------------------------------------

    def on_tool_call(self, ctx: ToolContext):
        if ctx.tool in WRITE_TOOLS and ctx.caller.role == "viewer":
            return EnvError("permission_denied", f"the viewer role cannot call {ctx.tool}",
                            hint="ask someone with a sales role to make the change")
        fault = self.faults.get(ctx.tool) or self.faults.get("*")
        if fault and self.rng.random() < fault["error_rate"]:
            return EnvError(fault["error_type"], f"injected fault: {ctx.tool} failed ({fault['error_type']})",
                            retryable=fault["error_type"] != "internal", applied="no")
        return None

    # --- rows ------------------------------------------------------------------------------------------------

    def _row(self, table: str, row: sqlite3.Row) -> dict:
        out = {k: row[k] for k in FIELDS[table]}
        if table == "deals":
            out["amount"] = _amount(out["amount"])
        return out

    def _one(self, table: str, item_id: str, what: str, hint: str) -> dict:
        row = self.db.execute(f"SELECT * FROM {table} WHERE id = ?", (item_id,)).fetchone()
        if row is None:
            raise EnvError("not_found", f"no {what} has id {item_id!r}", hint=hint, status=404)
        return self._row(table, row)

    def _account(self, account_id: str) -> dict:
        return self._one("accounts", account_id, "account", "find_account gives account ids")

    def _deal(self, deal_id: str) -> dict:
        return self._one("deals", deal_id, "deal", "list_deals gives deal ids")

    def _new_id(self, table: str) -> str:
        prefix = ID_PREFIX.get(table, table[:-1] + "-")
        n = self.db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] + 1
        while self.db.execute(f"SELECT 1 FROM {table} WHERE id = ?", (f"{prefix}{n}",)).fetchone():
            n += 1
        return f"{prefix}{n}"

    def _insert(self, table: str, item: dict) -> dict:
        item = dict(item)
        item["id"] = item.get("id") or self._new_id(table)
        cols = FIELDS[table]
        try:
            self.db.execute(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                            [item.get(c) for c in cols])
        except sqlite3.IntegrityError:
            raise EnvError("invalid_argument", f"{table}: id {item['id']!r} already exists",
                           hint="data/reset first to replace the CRM") from None
        return self._one(table, item["id"], table[:-1], "")

    def _record(self, ctx: ToolContext, account_id: str, deal_id: str | None, kind: str, summary: str) -> dict:
        return self._insert("activities", {"account_id": account_id, "deal_id": deal_id, "kind": kind,
                                           "summary": summary, "actor": ctx.caller.role or "default",
                                           "at": rfc3339(ctx.now())})

    def _deal_view(self, deal: dict) -> dict:
        account = self.db.execute("SELECT name FROM accounts WHERE id = ?", (deal["account_id"],)).fetchone()
        return {**deal, "account_name": account["name"] if account else None}

    # --- tools -----------------------------------------------------------------------------------------------

    @tool(annotations=READ_ONLY)
    def find_account(self, name: Annotated[str, Field(description="Part of the account's name (case-insensitive)")]
                     ) -> list[dict]:
        """Find accounts by name; returns id, name, industry, owner and tier of each match."""
        if not name.strip():
            raise EnvError("invalid_argument", "name: give at least one character of the account's name")
        rows = self.db.execute("SELECT * FROM accounts WHERE lower(name) LIKE ? ORDER BY name",
                               (f"%{name.strip().lower()}%",)).fetchall()
        return [self._row("accounts", r) for r in rows]

    @tool(annotations=READ_ONLY)
    def get_account(self, account_id: Annotated[str, Field(description="The account's id (find_account gives it)")]
                    ) -> dict:
        """One account with its contacts, deals and latest activities (newest first, at most 10)."""
        account = self._account(account_id)
        contacts = [self._row("contacts", r) for r in
                    self.db.execute("SELECT * FROM contacts WHERE account_id = ? ORDER BY seq", (account_id,))]
        deals = [self._row("deals", r) for r in
                 self.db.execute("SELECT * FROM deals WHERE account_id = ? ORDER BY seq", (account_id,))]
        activities = [self._row("activities", r) for r in self.db.execute(
            "SELECT * FROM activities WHERE account_id = ? ORDER BY at DESC, seq DESC LIMIT 10", (account_id,))]
        return {**account, "contacts": contacts, "deals": deals, "activities": activities}

    @tool(annotations=READ_ONLY)
    def list_deals(self, stage: Annotated[Stage | None, Field(description="Only deals in this stage")] = None,
                   owner: Annotated[str | None, Field(description="Only deals this person owns (email)")] = None
                   ) -> list[dict]:
        """Deals with their account's name, soonest close date first."""
        sql, args, clauses = "SELECT * FROM deals", [], []
        if stage is not None:
            clauses.append("stage = ?")
            args.append(stage)
        if owner is not None:
            clauses.append("lower(owner) = ?")
            args.append(owner.strip().lower())
        if clauses:
            sql += " WHERE " + " AND ".join(clauses)
        rows = self.db.execute(sql + " ORDER BY close_date, seq", args).fetchall()
        return [self._deal_view(self._row("deals", r)) for r in rows]

    @tool()
    def update_deal_stage(
        self,
        ctx: ToolContext,
        deal_id: Annotated[str, Field(description="The deal's id")],
        stage: Annotated[Stage, Field(description="The stage to move it to")],
        note: Annotated[str | None, Field(description="Why (kept on the activity it records)")] = None,
    ) -> dict:
        """Move a deal one stage forward or back, or to closed_lost; records a stage_change activity."""
        deal = self._deal(deal_id)
        if stage == deal["stage"]:
            raise EnvError("invalid_transition", f"{deal_id} is already in {stage}")
        allowed = allowed_next(deal["stage"])
        if stage not in allowed:
            hint = f"from {deal['stage']} it can move to {', '.join(allowed)}" if allowed else \
                f"{deal['stage']} is final"
            raise EnvError("invalid_transition", f"{deal_id} cannot move from {deal['stage']} to {stage}", hint=hint)
        self.db.execute("BEGIN")
        try:
            self.db.execute("UPDATE deals SET stage = ? WHERE id = ?", (stage, deal_id))
            summary = f"{deal['name']}: {deal['stage']} -> {stage}" + (f" ({note})" if note else "")
            activity = self._record(ctx, deal["account_id"], deal_id, "stage_change", summary)
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")
        after = self._deal(deal_id)
        ctx.record_change("deals", "update", deal_id, before=deal, after=after)
        ctx.record_change("activities", "insert", activity["id"], after=activity)
        return {"deal": self._deal_view(after), "previous_stage": deal["stage"], "activity": activity}

    @tool()
    def log_activity(
        self,
        ctx: ToolContext,
        account_id: Annotated[str, Field(description="The account it concerns")],
        kind: Annotated[ActivityKind, Field(description="What happened")],
        summary: Annotated[str, Field(description="One or two sentences", min_length=1, max_length=1000)],
        deal_id: Annotated[str | None, Field(description="The deal it concerns, if any")] = None,
    ) -> dict:
        """Record a call, email, meeting or note on an account (dated with the env's clock)."""
        self._account(account_id)
        if deal_id is not None and self._deal(deal_id)["account_id"] != account_id:
            raise EnvError("invalid_argument", f"deal {deal_id} belongs to another account",
                           hint="get_account lists the account's deals")
        if not summary.strip():
            raise EnvError("invalid_argument", "summary: say what happened")
        activity = self._record(ctx, account_id, deal_id, kind, summary.strip())
        ctx.record_change("activities", "insert", activity["id"], after=activity)
        return activity

    @tool(annotations=READ_ONLY)
    def pipeline_summary(self) -> dict:
        """Deal count and amount per stage, the open pipeline, what was won, and open amount per owner."""
        by_stage = {s: {"deals": 0, "amount": 0} for s in STAGES}
        by_owner: dict[str, int | float] = {}
        for r in self.db.execute("SELECT * FROM deals ORDER BY seq"):
            deal = self._row("deals", r)
            by_stage[deal["stage"]]["deals"] += 1
            by_stage[deal["stage"]]["amount"] = _amount(by_stage[deal["stage"]]["amount"] + deal["amount"])
            if deal["stage"] in OPEN_STAGES:
                owner = deal["owner"] or "unassigned"
                by_owner[owner] = _amount(by_owner.get(owner, 0) + deal["amount"])
        open_amount = _amount(sum(by_stage[s]["amount"] for s in OPEN_STAGES))
        return {"stages": by_stage, "open_deals": sum(by_stage[s]["deals"] for s in OPEN_STAGES),
                "open_amount": open_amount, "won_amount": by_stage["closed_won"]["amount"],
                "open_amount_by_owner": dict(sorted(by_owner.items()))}

    # --- data plane ------------------------------------------------------------------------------------------

    @reset_data
    def reset(self) -> None:
        for table in TABLES:
            self.db.execute(f"DELETE FROM {table}")
        self.db.execute("DELETE FROM sqlite_sequence")
        self._clear_faults()

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
                                   hint=f"send an object with any of {list(TABLES)}") from None
                if not isinstance(data, dict):
                    raise EnvError("invalid_argument", "a CRM file holds a JSON object")
                batches.append(data)
            else:
                raise EnvError("invalid_argument", "the crm env loads data or JSON file parts, not text")
        rows: dict[str, list[dict]] = {t: [] for t in TABLES}
        for data in batches:
            unknown = set(data) - set(TABLES)
            if unknown or not data:
                raise EnvError("invalid_argument", f"expected an object with any of {list(TABLES)}, got keys "
                               f"{sorted(data)}", hint="export with data/get to see the shape")
            for table in TABLES:
                items = data.get(table, [])
                if not isinstance(items, list):
                    raise EnvError("invalid_argument", f"{table} must be a list")
                rows[table] += [self._item_in(table, item) for item in items]
        self.db.execute("BEGIN")    # all or nothing
        try:
            for table in TABLES:     # accounts first: the others name them
                for item in rows[table]:
                    self._insert(table, item)
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    @staticmethod
    def _item_in(table: str, raw: Any) -> dict:
        if not isinstance(raw, dict):
            raise EnvError("invalid_argument", f"{table}: each item is an object, got {raw!r}")
        unknown = set(raw) - set(FIELDS[table])
        if unknown:
            raise EnvError("invalid_argument", f"{table}: unknown field(s) {sorted(unknown)}",
                           hint=f"{table} have {list(FIELDS[table])}")
        missing = [k for k in REQUIRED[table] if raw.get(k) in (None, "")]
        if missing:
            raise EnvError("invalid_argument", f"{table}: {raw.get('id') or raw!r} lacks {missing}")
        item = {k: raw.get(k) for k in FIELDS[table]}
        if table == "deals":
            if item["stage"] not in STAGES:
                raise EnvError("invalid_argument", f"deals: {item['id']} has unknown stage {item['stage']!r}",
                               hint=f"stages: {', '.join(STAGES)}")
            try:
                item["amount"] = _amount(item["amount"] or 0)
            except (TypeError, ValueError):
                raise EnvError("invalid_argument", f"deals: {item['id']} amount is not a number") from None
        if table == "activities" and item["kind"] not in KINDS:
            raise EnvError("invalid_argument", f"activities: unknown kind {item['kind']!r}",
                           hint=f"kinds: {', '.join(KINDS)}")
        return item

    @get_data
    def export(self) -> list:
        data = {t: [self._row(t, r) for r in self.db.execute(f"SELECT * FROM {t} ORDER BY seq")] for t in TABLES}
        return [DataPart(data=data)]

    # --- extensions ------------------------------------------------------------------------------------------

    @extension("urn:agentenv:set-errors/v1",
               description="Fault injection: make a tool fail at a rate, drawn from a seeded RNG.")
    def set_errors(self, tool_name: str, error_rate: float, error_type: str = "unavailable",
                   seed: int | None = None) -> dict:
        known = {t["name"] for t in self.list_tools()}
        if tool_name != "*" and tool_name not in known:
            raise EnvError("not_found", f"no tool named {tool_name!r}", hint=f"tools: {', '.join(sorted(known))}",
                           status=404)
        if not 0.0 <= error_rate <= 1.0:
            raise EnvError("invalid_argument", f"error_rate must be between 0 and 1, got {error_rate}")
        if error_type not in ERROR_TYPES:
            raise EnvError("invalid_argument", f"unknown error_type {error_type!r}",
                           hint=f"one of {', '.join(ERROR_TYPES)}")
        if seed is not None:
            self.rng = random.Random(seed)
        if error_rate == 0:
            self.faults.pop(tool_name, None)
        else:
            self.faults[tool_name] = {"error_rate": error_rate, "error_type": error_type}
        return {"ok": True, "faults": dict(sorted(self.faults.items()))}

    def declared_extensions(self) -> list:
        return [{"uri": "urn:agentenv:intake/v1",
                 "description": "What data/add accepts and data/get returns: the CRM as JSON "
                                '{"accounts": [...], "contacts": [...], "deals": [...], "activities": [...]}.',
                 "params": {"add": [{"part": "data", "format": "json", "load": "additive"},
                                    {"part": "file", "format": "json", "mimeTypes": ["application/json"],
                                     "load": "additive"}],
                            "get": [{"part": "data", "format": "json"}]}}]


if __name__ == "__main__":
    Crm().serve()
