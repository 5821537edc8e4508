"""The ap env: an accounts-payable desk (vendors, purchase orders, an invoice queue and a written policy) where a
clerk approves, holds, rejects or escalates each invoice with a reason.

Run it:   python -m agentenv_local.env examples/envs/ap/server.py [--port N | --stdio]

Tools: `list_invoices`, `read_invoice`, `get_vendor`, `get_purchase_order`, `read_policy` (read-only), and
`approve_invoice`, `hold_invoice`, `reject_invoice`, `escalate_invoice` (one decision per invoice, with a reason;
a decided invoice stays decided). `decision_log` (read-only) lists every decision with the checks the env ran on
the invoice at that moment: a task hides it from the clerk's role and verifiers read it.

Rules the env enforces: an invoice is decided once; a clerk cannot approve above the approval limit (the
policy's `approval_limit`, refused with `approval_limit_exceeded`: escalate it instead); a reason is required.
Rules it records on each decision (`checks`), for graders: `duplicate_of` (same vendor and vendor invoice number
as an earlier invoice), `po` (`ok`, `missing`, `unknown`, `other_vendor`, `over_po`), `bank_changed_days`
(days between the vendor's latest bank-detail change and the invoice, when within `bank_change_days`),
`tax_mismatch` (tax differs from subtotal x the vendor's tax rate by more than a cent, or total != subtotal +
tax), `over_limit`.

Data plane: `data/add` takes a data part or JSON file part `{"settings", "vendors", "purchase_orders",
"invoices"}` (any subset) and a markdown file part (`*.md`) as the policy; `data/get` exports the same shape
plus `policy` and `decisions` (canonical: every field, insertion order); `data/reset` empties it.
"""

from __future__ import annotations

import datetime as dt
import json
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

FIELDS = {
    "vendors": ("id", "name", "tax_id", "tax_rate", "bank_account", "bank_changed_on"),
    "purchase_orders": ("id", "vendor_id", "amount", "description"),
    "invoices": ("id", "vendor_id", "vendor_invoice_no", "po_id", "invoice_date", "description", "subtotal", "tax",
                 "total"),
}
REQUIRED = {"vendors": ("id", "name", "tax_rate"), "purchase_orders": ("id", "vendor_id", "amount"),
            "invoices": ("id", "vendor_id", "vendor_invoice_no", "invoice_date", "subtotal", "tax", "total")}
DEFAULT_SETTINGS = {"approval_limit": 10000.0, "bank_change_days": 30, "po_tolerance": 0.02}
DECISIONS = {"approve": "approved", "hold": "on_hold", "reject": "rejected", "escalate": "escalated"}
READ_ONLY = {"readOnlyHint": True}
Reason = Annotated[str, Field(description="Why, in a sentence (kept with the decision)", min_length=1,
                              max_length=1000)]
InvoiceId = Annotated[str, Field(description="The invoice's id (list_invoices gives them)")]


def _day(value: Any, what: str) -> dt.date:
    try:
        return dt.date.fromisoformat(str(value))
    except ValueError:
        raise EnvError("invalid_argument", f"{what}: {value!r} is not a date (YYYY-MM-DD)") from None


def _money(value: Any, what: str) -> float:
    try:
        return round(float(value), 2)
    except (TypeError, ValueError):
        raise EnvError("invalid_argument", f"{what}: {value!r} is not an amount") from None


@environment_card(name="ap", description="Accounts payable: an invoice queue, vendors, purchase orders, a policy.")
class AccountsPayable(Env):
    keeps_changelog = True

    def __init__(self) -> None:
        self._empty()

    def _empty(self) -> None:
        self.settings: dict[str, Any] = dict(DEFAULT_SETTINGS)
        self.rows: dict[str, dict[str, dict]] = {table: {} for table in FIELDS}
        self.policy = ""
        self.decisions: dict[str, dict] = {}

    # --- lookups ---------------------------------------------------------------------------------------------

    def _get(self, table: str, item_id: str, hint: str) -> dict:
        row = self.rows[table].get(item_id)
        if row is None:
            raise EnvError("not_found", f"no {table[:-1].replace('_', ' ')} has id {item_id!r}", hint=hint,
                           status=404)
        return row

    def _status(self, invoice_id: str) -> str:
        decision = self.decisions.get(invoice_id)
        return DECISIONS[decision["decision"]] if decision else "pending"

    def checks(self, invoice: dict) -> dict:
        """What the policy's rules find on an invoice (recorded with each decision, for graders)."""
        earlier = [other["id"] for other in self.rows["invoices"].values()
                   if other["id"] != invoice["id"] and other["vendor_id"] == invoice["vendor_id"]
                   and other["vendor_invoice_no"] == invoice["vendor_invoice_no"]
                   and (other["invoice_date"], other["id"]) < (invoice["invoice_date"], invoice["id"])]
        vendor = self.rows["vendors"].get(invoice["vendor_id"]) or {}
        po_state = "missing"
        if invoice["po_id"]:
            po = self.rows["purchase_orders"].get(invoice["po_id"])
            if po is None:
                po_state = "unknown"
            elif po["vendor_id"] != invoice["vendor_id"]:
                po_state = "other_vendor"
            elif invoice["total"] > po["amount"] * (1 + self.settings["po_tolerance"]):
                po_state = "over_po"
            else:
                po_state = "ok"
        bank_days = None
        if vendor.get("bank_changed_on"):
            days = (_day(invoice["invoice_date"], "invoice_date") - _day(vendor["bank_changed_on"], "bank")).days
            if 0 <= days <= self.settings["bank_change_days"]:
                bank_days = days
        expected_tax = round(invoice["subtotal"] * float(vendor.get("tax_rate") or 0), 2)
        tax_mismatch = (abs(expected_tax - invoice["tax"]) > 0.01
                        or abs(invoice["subtotal"] + invoice["tax"] - invoice["total"]) > 0.01)
        return {"duplicate_of": earlier[0] if earlier else None, "po": po_state, "bank_changed_days": bank_days,
                "tax_mismatch": tax_mismatch, "over_limit": invoice["total"] > self.settings["approval_limit"]}

    # --- tools -----------------------------------------------------------------------------------------------

    @tool(annotations=READ_ONLY)
    def list_invoices(
        self,
        status: Annotated[Literal["pending", "approved", "on_hold", "rejected", "escalated", "all"],
                          Field(description="Which invoices")] = "pending",
        vendor_id: Annotated[str | None, Field(description="Only this vendor's invoices")] = None,
    ) -> list[dict]:
        """The invoice queue, oldest first: id, vendor, vendor invoice number, date, total and status."""
        out = []
        for inv in sorted(self.rows["invoices"].values(), key=lambda i: (i["invoice_date"], i["id"])):
            state = self._status(inv["id"])
            if (status in ("all", state)) and vendor_id in (None, inv["vendor_id"]):
                out.append({"id": inv["id"], "vendor_id": inv["vendor_id"], "vendor_invoice_no":
                            inv["vendor_invoice_no"], "invoice_date": inv["invoice_date"], "total": inv["total"],
                            "status": state})
        return out

    @tool(annotations=READ_ONLY)
    def read_invoice(self, invoice_id: InvoiceId) -> dict:
        """One invoice in full (PO, subtotal, tax, total, description) with its status and decision, if any."""
        invoice = self._get("invoices", invoice_id, "list_invoices gives invoice ids")
        decision = self.decisions.get(invoice_id)
        return {**invoice, "status": self._status(invoice_id),
                "decision": {k: decision[k] for k in ("decision", "reason", "by", "at")} if decision else None}

    @tool(annotations=READ_ONLY)
    def get_vendor(self, vendor_id: Annotated[str, Field(description="The vendor's id (on the invoice)")]) -> dict:
        """A vendor: name, tax id, tax rate, bank account and the date its bank details last changed."""
        return dict(self._get("vendors", vendor_id, "invoices name their vendor_id"))

    @tool(annotations=READ_ONLY)
    def get_purchase_order(self, po_id: Annotated[str, Field(description="The PO's id (on the invoice)")]) -> dict:
        """A purchase order: its vendor, approved amount and what it is for."""
        return dict(self._get("purchase_orders", po_id, "invoices name their po_id; some have none"))

    @tool(annotations=READ_ONLY)
    def read_policy(self) -> str:
        """The accounts-payable policy (markdown): what to approve, hold, reject or escalate."""
        if not self.policy:
            raise EnvError("not_found", "no policy is loaded", hint="load a markdown file part with data/add")
        return self.policy

    @tool(annotations=READ_ONLY)
    def decision_log(self) -> list[dict]:
        """Every decision so far with the checks the env ran on the invoice (for graders)."""
        return [dict(d) for d in self.decisions.values()]

    def _decide(self, ctx: ToolContext, invoice_id: str, decision: str, reason: str) -> dict:
        invoice = self._get("invoices", invoice_id, "list_invoices gives invoice ids")
        if invoice_id in self.decisions:
            done = self.decisions[invoice_id]
            raise EnvError("already_decided", f"{invoice_id} was already {DECISIONS[done['decision']]} "
                           f"({done['reason']})", hint="a decision is final; go on with the next invoice")
        if not reason.strip():
            raise EnvError("invalid_argument", "reason: say why")
        checks = self.checks(invoice)
        if decision == "approve" and checks["over_limit"]:
            limit = self.settings["approval_limit"]
            raise EnvError("approval_limit_exceeded", f"{invoice_id} totals {invoice['total']:.2f}, above the "
                           f"approval limit of {limit:.2f}", hint="escalate_invoice sends it to the controller")
        row = {"invoice_id": invoice_id, "decision": decision, "reason": reason.strip(),
               "by": ctx.caller.role or "default", "at": ctx.now().astimezone(dt.UTC).isoformat(timespec="seconds"),
               "checks": checks}
        self.decisions[invoice_id] = row
        ctx.record_change("decisions", "insert", invoice_id, after=row)
        return {"invoice_id": invoice_id, "status": DECISIONS[decision], "receipt": f"{invoice_id}=>{decision}"}

    @tool()
    def approve_invoice(self, ctx: ToolContext, invoice_id: InvoiceId, reason: Reason) -> dict:
        """Approve an invoice for payment (not above the approval limit)."""
        return self._decide(ctx, invoice_id, "approve", reason)

    @tool()
    def hold_invoice(self, ctx: ToolContext, invoice_id: InvoiceId, reason: Reason) -> dict:
        """Put an invoice on hold until something is checked or fixed."""
        return self._decide(ctx, invoice_id, "hold", reason)

    @tool()
    def reject_invoice(self, ctx: ToolContext, invoice_id: InvoiceId, reason: Reason) -> dict:
        """Reject an invoice (it will not be paid; the vendor must send a new one if it is owed)."""
        return self._decide(ctx, invoice_id, "reject", reason)

    @tool()
    def escalate_invoice(self, ctx: ToolContext, invoice_id: InvoiceId, reason: Reason) -> dict:
        """Send an invoice to the controller for approval."""
        return self._decide(ctx, invoice_id, "escalate", reason)

    # --- data plane ------------------------------------------------------------------------------------------

    @reset_data
    def reset(self) -> None:
        self._empty()

    @add_data
    def load(self, parts: list) -> None:
        batches: list[dict] = []
        policy = None
        for part in parts:
            if part.kind == "data":
                batches.append(part.data)
            elif part.kind == "file" and (part.name or "").endswith(".md"):
                policy = part.read_bytes().decode("utf-8")
            elif part.kind == "file":
                try:
                    data = json.loads(part.read_bytes())
                except (OSError, ValueError) as e:
                    raise EnvError("invalid_argument", f"file part {part.name or ''} is not readable JSON: {e}",
                                   hint="send the queue as JSON and the policy as a .md file") from None
                batches.append(data)
            else:
                policy = part.text
        settings = dict(self.settings)
        rows: dict[str, list[dict]] = {t: [] for t in FIELDS}
        for data in batches:
            if not isinstance(data, dict) or not data or set(data) - {"settings", "policy", *FIELDS}:
                raise EnvError("invalid_argument", f"expected an object with any of settings, policy, "
                               f"{', '.join(FIELDS)}; got {sorted(data) if isinstance(data, dict) else data!r}",
                               hint="data/get shows the shape")
            if isinstance(data.get("policy"), str):
                policy = data["policy"]
            unknown = set(data.get("settings") or {}) - set(DEFAULT_SETTINGS)
            if unknown:
                raise EnvError("invalid_argument", f"settings: unknown {sorted(unknown)}",
                               hint=f"settings are {list(DEFAULT_SETTINGS)}")
            settings.update(data.get("settings") or {})
            for table in FIELDS:
                items = data.get(table, [])
                if not isinstance(items, list):
                    raise EnvError("invalid_argument", f"{table} must be a list")
                rows[table] += [self._item_in(table, item) for item in items]
        for table in FIELDS:  # all or nothing: check every id before keeping any
            ids = [r["id"] for r in rows[table]]
            clash = sorted({i for i in ids if ids.count(i) > 1 or i in self.rows[table]})
            if clash:
                raise EnvError("invalid_argument", f"{table}: id(s) {clash} already exist",
                               hint="data/reset first to replace the queue")
        self.settings = settings
        for table in FIELDS:
            self.rows[table].update({r["id"]: r for r in rows[table]})
        if policy is not None:
            self.policy = policy

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
        item: dict[str, Any] = {k: raw.get(k) for k in FIELDS[table]}
        where = f"{table}: {item['id']}"
        for key in ("amount", "subtotal", "tax", "total"):
            if key in item:
                item[key] = _money(item[key], f"{where} {key}")
        if table == "vendors":
            try:
                item["tax_rate"] = float(item["tax_rate"])
            except (TypeError, ValueError):
                raise EnvError("invalid_argument", f"{where} tax_rate: {item['tax_rate']!r} is not a rate") from None
            if item["bank_changed_on"]:
                _day(item["bank_changed_on"], f"{where} bank_changed_on")
        if table == "invoices":
            _day(item["invoice_date"], f"{where} invoice_date")
        return item

    @get_data
    def export(self) -> list:
        data: dict[str, Any] = {"settings": dict(self.settings), "policy": self.policy}
        data.update({t: [dict(r) for r in self.rows[t].values()] for t in FIELDS})
        data["decisions"] = [dict(d) for d in self.decisions.values()]
        return [DataPart(data=data)]


if __name__ == "__main__":
    AccountsPayable().serve()
