"""The tickets env: a support desk for enterprise escalations. Tickets with SLA deadlines, account tiers and the
entitlements each tier is owed (response times, service credits, escalation severities), in SQLite, with a data
plane that loads and exports it exactly.

Run it:   python -m agentenv_local.env examples/envs/tickets/server.py [--port N | --stdio]

State lives in the SQLite file named by `TICKETS_DB` (default: an in-memory database per env object).

Tools (names distinct from the mail and crm envs', so the three compose behind one gateway without prefixes):
- read-only: `list_tickets`, `get_ticket` (the ticket with its messages, credits and escalations),
  `get_entitlements` (an account's tier, what the tier is owed, the credit left this month);
- support's writes: `update_ticket` (status, priority), `reply_to_customer` (an outbound message dated with
  `ctx.now()`; the first one stamps `first_response_at`), `offer_credit` (a percentage of the monthly fee,
  refused above what the tier's entitlement has left), `escalate_to_engineering` (a severity the tier's
  escalation path allows);
- the manager's and engineering's: `approve_credit_exception` (a credit above the entitlement, up to 50%) and
  `close_escalation`. The env lets any role call them: a task limits them with the gateway's RBAC
  (`modify_env_tool_access`), which is what examples/escalation does for the role `support`;
- hidden by default, for task triggers: `receive_customer_email` (a new inbound message on a ticket) and
  `record_sla_event` (an SLA timer's mark: `update_due` or `first_response_breached`).

Every write reports the rows it changed with `ctx.record_change` (the env keeps a changelog).

Data plane: `data/add` takes `{"kind": "data", "data": {"tiers", "accounts", "tickets", "credits",
"escalations"}}` (any subset) or a JSON file part holding it; `data/get` exports all five lists in the canonical
shape (every field present, insertion order), so an export loads back to the same export; `data/reset` empties it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
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
    get_data,
    reset_data,
    tool,
)

SCHEMA = """
CREATE TABLE IF NOT EXISTS docs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    id TEXT NOT NULL,
    doc TEXT NOT NULL,
    UNIQUE (kind, id)
);
"""

KINDS = ("tiers", "accounts", "tickets", "credits", "escalations")
# The canonical fields of each kind, in export order, with their defaults (None: required).
FIELDS: dict[str, dict[str, Any]] = {
    "tiers": {"name": None, "first_response_minutes": 480, "update_interval_minutes": 1440,
              "max_credit_percent": 0, "escalation_severities": [], "support_hours": "business"},
    "accounts": {"id": None, "name": "", "tier": None, "monthly_fee": 0, "csm": None},
    "tickets": {"id": None, "account_id": None, "subject": "", "status": "open", "priority": "p3",
                "requester": None, "opened_at": "1970-01-01T00:00:00Z", "first_response_at": None,
                "sla_status": "ok", "sla_events": [], "messages": []},
    "credits": {"id": None, "ticket_id": None, "account_id": None, "percent": 0, "amount": 0, "reason": "",
                "kind": "entitlement", "by_role": None, "at": "1970-01-01T00:00:00Z"},
    "escalations": {"id": None, "ticket_id": None, "team": "engineering", "severity": "sev3", "summary": "",
                    "status": "open", "resolution": None, "by_role": None, "opened_at": "1970-01-01T00:00:00Z",
                    "closed_at": None},
}
KEY = {"tiers": "name"}
STATUSES = ("open", "pending", "escalated", "resolved", "closed")
PRIORITIES = ("p1", "p2", "p3", "p4")
SEVERITIES = ("sev1", "sev2", "sev3")
MAX_EXCEPTION_PERCENT = 50
READ_ONLY = {"readOnlyHint": True}


def rfc3339(moment: dt.datetime) -> str:
    """`2025-03-12T09:00:00Z`: seconds, UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.astimezone(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _month(stamp: str) -> str:
    return stamp[:7]


@environment_card(name="tickets", description="A support desk: tickets with SLAs, account tiers and entitlements, "
                                               "service credits, engineering escalations.")
class Tickets(Env):
    keeps_changelog = True

    def __init__(self, path: str | None = None) -> None:
        self.path = path or os.environ.get("TICKETS_DB") or ":memory:"
        self.db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self.db.executescript(SCHEMA)

    # --- documents -------------------------------------------------------------------------------------------

    def _all(self, kind: str) -> list[dict]:
        return [json.loads(r[0]) for r in self.db.execute("SELECT doc FROM docs WHERE kind = ? ORDER BY seq", (kind,))]

    def _find(self, kind: str, key: str) -> dict | None:
        row = self.db.execute("SELECT doc FROM docs WHERE kind = ? AND id = ?", (kind, key)).fetchone()
        return json.loads(row[0]) if row else None

    def _get(self, kind: str, key: str, lister: str) -> dict:
        found = self._find(kind, key)
        if found is None:
            raise EnvError("not_found", f"no {kind[:-1]} has id {key!r}", hint=f"{lister} shows them", status=404)
        return found

    def _insert(self, kind: str, doc: dict) -> None:
        key = doc[KEY.get(kind, "id")]
        try:
            self.db.execute("INSERT INTO docs (kind, id, doc) VALUES (?, ?, ?)", (kind, key, json.dumps(doc)))
        except sqlite3.IntegrityError:
            raise EnvError("invalid_argument", f"{kind[:-1]} {key!r} already exists",
                           hint="data/reset first to replace the desk") from None

    def _write(self, ctx: ToolContext, kind: str, before: dict | None, after: dict) -> dict:
        key = after[KEY.get(kind, "id")]
        if before is None:
            self._insert(kind, after)
            ctx.record_change(kind, "insert", key, after=after)
        else:
            self.db.execute("UPDATE docs SET doc = ? WHERE kind = ? AND id = ?", (json.dumps(after), kind, key))
            ctx.record_change(kind, "update", key, before=before, after=after)
        return after

    def _new_id(self, kind: str, prefix: str) -> str:
        n = self.db.execute("SELECT COUNT(*) FROM docs WHERE kind = ?", (kind,)).fetchone()[0] + 1
        while self._find(kind, f"{prefix}-{n}"):
            n += 1
        return f"{prefix}-{n}"

    def _ticket(self, ticket_id: str) -> dict:
        return self._get("tickets", ticket_id, "list_tickets")

    def _account_and_tier(self, account_id: str) -> tuple[dict, dict]:
        account = self._get("accounts", account_id, "get_ticket (its account_id)")
        tier = self._find("tiers", account["tier"])
        if tier is None:
            raise EnvError("internal", f"account {account_id!r} names tier {account['tier']!r}, which is not loaded")
        return account, tier

    def _credit_used(self, account_id: str, month: str) -> int:
        return sum(c["percent"] for c in self._all("credits")
                   if c["account_id"] == account_id and c["kind"] == "entitlement" and _month(c["at"]) == month)

    def _open_ticket(self, ticket_id: str) -> dict:
        ticket = self._ticket(ticket_id)
        if ticket["status"] == "closed":
            raise EnvError("invalid_argument", f"ticket {ticket_id!r} is closed", hint="closed tickets stay closed")
        return ticket

    # --- reads -----------------------------------------------------------------------------------------------

    @tool(annotations=READ_ONLY)
    def list_tickets(
        self,
        status: Annotated[Literal["open", "pending", "escalated", "resolved", "closed"] | None,
                          Field(description="Only tickets in this status")] = None,
        account_id: Annotated[str | None, Field(description="Only this account's tickets")] = None,
    ) -> list[dict]:
        """Ticket summaries (id, account_id, subject, status, priority, sla_status, opened_at), oldest first."""
        return [{k: t[k] for k in ("id", "account_id", "subject", "status", "priority", "sla_status", "opened_at")}
                for t in self._all("tickets")
                if (status is None or t["status"] == status) and (account_id is None or t["account_id"] == account_id)]

    @tool(annotations=READ_ONLY)
    def get_ticket(self, ticket_id: Annotated[str, Field(description="The ticket's id", min_length=1)]) -> dict:
        """One ticket in full: its messages, SLA events, credits and escalations, and its first-response deadline."""
        ticket = self._ticket(ticket_id)
        _, tier = self._account_and_tier(ticket["account_id"])
        opened = dt.datetime.fromisoformat(ticket["opened_at"].replace("Z", "+00:00"))
        due = rfc3339(opened + dt.timedelta(minutes=tier["first_response_minutes"]))
        return {**ticket, "first_response_due": due,
                "credits": [c for c in self._all("credits") if c["ticket_id"] == ticket_id],
                "escalations": [e for e in self._all("escalations") if e["ticket_id"] == ticket_id]}

    @tool(annotations=READ_ONLY)
    def get_entitlements(
        self,
        ctx: ToolContext,
        account_id: Annotated[str, Field(description="The account's id (a ticket's account_id)", min_length=1)],
    ) -> dict:
        """An account's tier and what it is owed: response times, update interval, the service credit it may still
        get this month (percent of the monthly fee), the escalation severities its path allows."""
        account, tier = self._account_and_tier(account_id)
        used = self._credit_used(account_id, _month(rfc3339(ctx.now())))
        return {"account": account, "tier": tier["name"],
                "entitlements": {k: tier[k] for k in FIELDS["tiers"] if k != "name"},
                "credit_used_percent_this_month": used,
                "credit_left_percent": max(0, tier["max_credit_percent"] - used)}

    # --- support's writes ------------------------------------------------------------------------------------

    @tool()
    def update_ticket(
        self,
        ctx: ToolContext,
        ticket_id: Annotated[str, Field(description="The ticket's id", min_length=1)],
        status: Annotated[Literal["open", "pending", "escalated", "resolved", "closed"] | None,
                          Field(description="The new status")] = None,
        priority: Annotated[Literal["p1", "p2", "p3", "p4"] | None, Field(description="The new priority")] = None,
    ) -> dict:
        """Change a ticket's status or priority. A ticket with an open escalation can't be resolved or closed."""
        before = self._open_ticket(ticket_id)
        if status is None and priority is None:
            raise EnvError("invalid_argument", "give a status or a priority to change")
        if status in ("resolved", "closed") and any(
                e["status"] == "open" for e in self._all("escalations") if e["ticket_id"] == ticket_id):
            raise EnvError("invalid_argument", f"ticket {ticket_id!r} has an open engineering escalation",
                           hint="engineering closes it first (close_escalation)")
        after = {**before, "status": status or before["status"], "priority": priority or before["priority"]}
        return self._write(ctx, "tickets", before, after)

    @tool()
    def reply_to_customer(
        self,
        ctx: ToolContext,
        ticket_id: Annotated[str, Field(description="The ticket's id", min_length=1)],
        body: Annotated[str, Field(description="The message to the customer", min_length=1, max_length=5000)],
    ) -> dict:
        """Email the ticket's requester; the message joins the ticket, dated with the env's clock."""
        before = self._open_ticket(ticket_id)
        now = rfc3339(ctx.now())
        message = {"direction": "outbound", "from": "support", "to": before["requester"], "subject":
                   f"Re: {before['subject']}", "body": body, "at": now, "by_role": ctx.role}
        after = {**before, "messages": [*before["messages"], message],
                 "first_response_at": before["first_response_at"] or now}
        self._write(ctx, "tickets", before, after)
        return {"ticket_id": ticket_id, "sent": message, "first_response_at": after["first_response_at"]}

    @tool()
    def offer_credit(
        self,
        ctx: ToolContext,
        ticket_id: Annotated[str, Field(description="The ticket's id", min_length=1)],
        percent: Annotated[int, Field(description="Percent of the account's monthly fee", ge=1, le=100)],
        reason: Annotated[str, Field(description="Why, in a sentence", min_length=1)],
    ) -> dict:
        """Give the account a service credit within its tier's entitlement (what is left of it this month)."""
        ticket = self._open_ticket(ticket_id)
        account, tier = self._account_and_tier(ticket["account_id"])
        now = rfc3339(ctx.now())
        left = max(0, tier["max_credit_percent"] - self._credit_used(account["id"], _month(now)))
        if percent > left:
            raise EnvError("invalid_argument",
                           f"a {percent}% credit exceeds the {tier['name']} entitlement: {left}% left this month "
                           f"(of {tier['max_credit_percent']}%)",
                           hint="offer at most what is left; above it a manager must approve_credit_exception")
        return self._credit(ctx, ticket, account, percent, reason, "entitlement", now)

    @tool()
    def escalate_to_engineering(
        self,
        ctx: ToolContext,
        ticket_id: Annotated[str, Field(description="The ticket's id", min_length=1)],
        severity: Annotated[Literal["sev1", "sev2", "sev3"], Field(description="sev1 is an outage")],
        summary: Annotated[str, Field(description="What engineering needs to know", min_length=1)],
    ) -> dict:
        """Open an engineering escalation at a severity the account's tier allows; the ticket becomes escalated."""
        ticket = self._open_ticket(ticket_id)
        _, tier = self._account_and_tier(ticket["account_id"])
        if severity not in tier["escalation_severities"]:
            raise EnvError("invalid_argument", f"the {tier['name']} tier's escalation path has no {severity}",
                           hint=f"allowed: {', '.join(tier['escalation_severities']) or 'none'}")
        if any(e["status"] == "open" for e in self._all("escalations") if e["ticket_id"] == ticket_id):
            raise EnvError("invalid_argument", f"ticket {ticket_id!r} already has an open escalation",
                           hint="get_ticket shows it")
        escalation = {"id": self._new_id("escalations", "ESC"), "ticket_id": ticket_id, "team": "engineering",
                      "severity": severity, "summary": summary, "status": "open", "resolution": None,
                      "by_role": ctx.role, "opened_at": rfc3339(ctx.now()), "closed_at": None}
        self._write(ctx, "escalations", None, escalation)
        self._write(ctx, "tickets", ticket, {**ticket, "status": "escalated"})
        return escalation

    # --- the manager's and engineering's (limited by RBAC in a task) -----------------------------------------

    @tool()
    def approve_credit_exception(
        self,
        ctx: ToolContext,
        ticket_id: Annotated[str, Field(description="The ticket's id", min_length=1)],
        percent: Annotated[int, Field(description="Percent of the monthly fee", ge=1, le=MAX_EXCEPTION_PERCENT)],
        reason: Annotated[str, Field(description="Why the entitlement is exceeded", min_length=1)],
    ) -> dict:
        """A manager's credit above the entitlement (up to 50% of the monthly fee)."""
        ticket = self._open_ticket(ticket_id)
        account, _ = self._account_and_tier(ticket["account_id"])
        return self._credit(ctx, ticket, account, percent, reason, "exception", rfc3339(ctx.now()))

    @tool()
    def close_escalation(
        self,
        ctx: ToolContext,
        escalation_id: Annotated[str, Field(description="The escalation's id", min_length=1)],
        resolution: Annotated[str, Field(description="What engineering did", min_length=1)],
    ) -> dict:
        """Engineering closes its escalation; the ticket goes back to open."""
        before = self._get("escalations", escalation_id, "get_ticket")
        if before["status"] != "open":
            raise EnvError("invalid_argument", f"escalation {escalation_id!r} is already closed")
        after = {**before, "status": "closed", "resolution": resolution, "closed_at": rfc3339(ctx.now())}
        self._write(ctx, "escalations", before, after)
        ticket = self._ticket(before["ticket_id"])
        if ticket["status"] == "escalated":
            self._write(ctx, "tickets", ticket, {**ticket, "status": "open"})
        return after

    def _credit(self, ctx: ToolContext, ticket: dict, account: dict, percent: int, reason: str, kind: str,
                now: str) -> dict:
        credit = {"id": self._new_id("credits", "CR"), "ticket_id": ticket["id"], "account_id": account["id"],
                  "percent": percent, "amount": round(account["monthly_fee"] * percent / 100, 2), "reason": reason,
                  "kind": kind, "by_role": ctx.role, "at": now}
        return self._write(ctx, "credits", None, credit)

    # --- trigger hooks (hidden by default) -------------------------------------------------------------------

    @tool(hidden_by_default=True)
    def receive_customer_email(
        self,
        ctx: ToolContext,
        ticket_id: Annotated[str, Field(description="The ticket's id", min_length=1)],
        sender: Annotated[str, Field(description="Who wrote", min_length=3)],
        body: Annotated[str, Field(description="The message", min_length=1)],
    ) -> dict:
        """A new email from the customer arrives on the ticket (a task's trigger plays the customer's side)."""
        before = self._ticket(ticket_id)
        message = {"direction": "inbound", "from": sender, "to": "support", "subject": f"Re: {before['subject']}",
                   "body": body, "at": rfc3339(ctx.now()), "by_role": ctx.role}
        self._write(ctx, "tickets", before, {**before, "messages": [*before["messages"], message]})
        return {"ticket_id": ticket_id, "received": message}

    @tool(hidden_by_default=True)
    def record_sla_event(
        self,
        ctx: ToolContext,
        ticket_id: Annotated[str, Field(description="The ticket's id", min_length=1)],
        kind: Annotated[Literal["update_due", "first_response_breached"], Field(description="The SLA mark")],
    ) -> dict:
        """An SLA timer's mark on a ticket: its sla_status becomes the mark, dated with the env's clock."""
        before = self._ticket(ticket_id)
        event = {"kind": kind, "at": rfc3339(ctx.now())}
        after = {**before, "sla_status": kind, "sla_events": [*before["sla_events"], event]}
        self._write(ctx, "tickets", before, after)
        return {"ticket_id": ticket_id, "sla_status": kind, "event": event}

    # --- data plane ------------------------------------------------------------------------------------------

    @reset_data
    def reset(self) -> None:
        self.db.execute("DELETE FROM docs")
        self.db.execute("DELETE FROM sqlite_sequence")

    @add_data
    def load(self, parts: list) -> None:
        batches = []
        for part in parts:
            if part.kind == "data":
                batches.append(part.data)
            elif part.kind == "file":
                try:
                    batches.append(json.loads(part.read_bytes()))
                except (OSError, ValueError) as e:
                    raise EnvError("invalid_argument", f"file part {part.name or ''} is not readable JSON: {e}",
                                   hint='send {"tiers": [...], "accounts": [...], "tickets": [...]}') from None
            else:
                raise EnvError("invalid_argument", "the tickets env loads data or JSON file parts, not text")
        # check everything first, then write in one transaction: a bad part loads nothing
        docs: list[tuple[str, dict]] = []
        for data in batches:
            if not isinstance(data, dict) or not data or set(data) - set(KINDS):
                shown = sorted(data) if isinstance(data, dict) else type(data).__name__
                raise EnvError("invalid_argument", f"expected an object with {list(KINDS)}, got {shown}",
                               hint="export with data/get to see the shape")
            for kind in KINDS:
                items = data.get(kind, [])
                if not isinstance(items, list):
                    raise EnvError("invalid_argument", f"{kind} must be a list")
                docs += [(kind, self._canonical(kind, item)) for item in items]
        self.db.execute("BEGIN")
        try:
            for kind, doc in docs:
                self._insert(kind, doc)
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    @staticmethod
    def _canonical(kind: str, raw: Any) -> dict:
        fields = FIELDS[kind]
        if not isinstance(raw, dict):
            raise EnvError("invalid_argument", f"each of {kind} is an object, got {raw!r}")
        unknown = set(raw) - set(fields)
        if unknown:
            raise EnvError("invalid_argument", f"unknown {kind[:-1]} field(s) {sorted(unknown)}",
                           hint=f"a {kind[:-1]} has {list(fields)}")
        missing = [k for k, default in fields.items() if default is None and raw.get(k) is None
                   and k not in ("first_response_at", "resolution", "closed_at", "csm", "by_role", "requester")]
        if missing:
            raise EnvError("invalid_argument", f"a {kind[:-1]} needs {missing}: {raw!r}")
        doc = {k: raw.get(k, json.loads(json.dumps(default))) for k, default in fields.items()}
        for field, allowed in (("status", STATUSES if kind == "tickets" else ("open", "closed")),
                               ("priority", PRIORITIES), ("severity", SEVERITIES)):
            if field in doc and kind in ("tickets", "escalations") and doc[field] not in allowed:
                raise EnvError("invalid_argument", f"{kind[:-1]} {doc.get('id')!r}: {field} must be one of "
                                                   f"{list(allowed)}, not {doc[field]!r}")
        return doc

    @get_data
    def export(self) -> list:
        return [DataPart(data={kind: self._all(kind) for kind in KINDS})]

    def declared_extensions(self) -> list:
        return [{"uri": "urn:agentenv:intake/v1",
                 "description": "What data/add accepts and data/get returns: the desk as JSON "
                                '{"tiers", "accounts", "tickets", "credits", "escalations"} (lists).',
                 "params": {"add": [{"part": "data", "format": "json", "load": "additive"},
                                    {"part": "file", "format": "json", "mimeTypes": ["application/json"],
                                     "load": "additive"}],
                            "get": [{"part": "data", "format": "json"}]}}]


if __name__ == "__main__":
    Tickets().serve()
