"""Writes the accounts-payable bundle's week: the queue artifact, the answer key inside the verifier, and the task
(the scripted solver's plan and the scripted judge's rubric). Run it after changing the week below:

    python examples/accounts-payable/make_week.py

The correct decision of each invoice follows the policy (artifacts/ap-week/policy.md), first rule that applies:
a duplicate is rejected; a vendor whose bank details changed in the 30 days before the invoice is held; a missing,
unknown, other vendor's or exceeded PO is held; a tax or total that does not add up is rejected; above the
approval limit it is escalated; otherwise approved.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
LIMIT = 10000.0

VENDORS = [
    ("V-01", "Northwind Office Supply", 0.08, None),
    ("V-02", "Contoso Cleaning", 0.08, None),
    ("V-03", "Fabrikam Freight", 0.05, None),
    ("V-04", "Tailspin IT Services", 0.08, "2026-02-20"),   # changed 10 days before the week: a fraud check
    ("V-05", "Litware Catering", 0.08, None),
    ("V-06", "Adatum Facilities", 0.08, "2025-06-01"),      # long ago: fine
    ("V-07", "Proseware Consulting", 0.0, None),
    ("V-08", "Woodgrove Printing", 0.08, None),
]
# (po id, vendor, amount, what for)
POS = [
    ("PO-101", "V-01", 2000, "Office supplies, Q1"), ("PO-102", "V-02", 2600, "Cleaning, March"),
    ("PO-103", "V-03", 9000, "Freight, March"), ("PO-104", "V-04", 3500, "Laptop imaging"),
    ("PO-106", "V-06", 5000, "HVAC service"), ("PO-107", "V-07", 20000, "Process review"),
    ("PO-108", "V-08", 3000, "Brochures"), ("PO-109", "V-03", 2000, "Courier, March"),
    ("PO-110", "V-07", 10000, "Workshop"), ("PO-111", "V-06", 14000, "Roof repair"),
    ("PO-112", "V-01", 500, "Toner"), ("PO-113", "V-04", 16500, "Network upgrade"),
    ("PO-114", "V-05", 600, "Board lunch"), ("PO-115", "V-03", 1500, "Pallets"),
    ("PO-116", "V-08", 2500, "Signage"), ("PO-117", "V-07", 25000, "Audit support"),
    ("PO-118", "V-01", 1000, "Chairs"), ("PO-119", "V-05", 1700, "Offsite catering"),
    ("PO-120", "V-02", 5500, "Deep clean"),
]
# (invoice, vendor, vendor's number, po, date, subtotal, tax or None = correct, total or None = subtotal + tax)
INVOICES = [
    ("INV-2001", "V-01", "NW-5531", "PO-101", "2026-03-02", 1200, None, None),
    ("INV-2002", "V-02", "CC-0912", "PO-102", "2026-03-02", 2400, None, None),
    ("INV-2003", "V-03", "FF-7781", "PO-103", "2026-03-02", 8000, None, None),
    ("INV-2004", "V-04", "TS-3301", "PO-104", "2026-03-02", 3000, None, None),
    ("INV-2005", "V-05", "LC-118", None, "2026-03-03", 600, None, None),
    ("INV-2006", "V-01", "NW-5531", "PO-101", "2026-03-03", 1200, None, None),
    ("INV-2007", "V-07", "PW-2026-03", "PO-107", "2026-03-03", 18000, None, None),
    ("INV-2008", "V-08", "WP-4410", "PO-108", "2026-03-03", 900, 63.0, None),
    ("INV-2009", "V-06", "AF-221", "PO-106", "2026-03-03", 4500, None, None),
    ("INV-2010", "V-03", "FF-7790", "PO-109", "2026-03-04", 2500, None, None),
    ("INV-2011", "V-02", "CC-0913", "PO-101", "2026-03-04", 700, None, None),
    ("INV-2012", "V-05", "LC-119", "PO-999", "2026-03-04", 450, None, None),
    ("INV-2013", "V-07", "PW-2026-04", "PO-110", "2026-03-04", 9500, None, None),
    ("INV-2014", "V-06", "AF-230", "PO-111", "2026-03-04", 12500, None, None),
    ("INV-2015", "V-08", "WP-4411", "PO-108", "2026-03-05", 1500, None, 1650.0),
    ("INV-2016", "V-01", "NW-5540", "PO-112", "2026-03-05", 300, None, None),
    ("INV-2017", "V-04", "TS-3302", "PO-113", "2026-03-05", 15000, None, None),
    ("INV-2018", "V-02", "CC-0912", "PO-102", "2026-03-05", 2400, None, None),
    ("INV-2019", "V-05", "LC-120", "PO-114", "2026-03-05", 480, None, None),
    ("INV-2020", "V-03", "FF-7795", "PO-115", "2026-03-05", 1200, 96.0, None),
    ("INV-2021", "V-06", "AF-231", None, "2026-03-06", 11000, None, None),
    ("INV-2022", "V-08", "WP-4420", "PO-116", "2026-03-06", 2200, None, None),
    ("INV-2023", "V-07", "PW-2026-05", "PO-117", "2026-03-06", 22000, None, None),
    ("INV-2024", "V-01", "NW-5545", "PO-118", "2026-03-06", 760, None, None),
    ("INV-2025", "V-05", "LC-121", "PO-119", "2026-03-06", 1500, 100.0, None),
    ("INV-2026", "V-02", "CC-0920", "PO-120", "2026-03-06", 5000, None, None),
]
# The scripted solver's mistakes, on purpose: invoice -> what it does instead of the right decision.
MISTAKES = {
    "INV-2004": "approve",    # misses the bank-detail change (fraud check)
    "INV-2018": "approve",    # misses the duplicate of INV-2002
    "INV-2020": "hold",       # holds a tax mismatch instead of rejecting it
    "INV-2021": "escalate",   # escalates an invoice with no PO instead of holding it
    "INV-2017": "escalate",   # tries to approve (the env refuses: over the limit), then escalates; it had to hold
}
REASONS = {
    "duplicate": "duplicate of {dup} (same vendor and vendor invoice number)",
    "bank": "the vendor's bank details changed on {bank}, less than 30 days before the invoice: verify by phone",
    "po": "purchase order problem: {po}",
    "tax": "tax or total does not add up: expected tax {tax:.2f} and total {total:.2f}",
    "limit": "total {total:.2f} is above the approval limit of 10,000.00",
    "clean": "matches its PO, tax correct, vendor verified",
}
DONE = {"approve": "approved", "hold": "held", "reject": "rejected", "escalate": "escalated"}
DECISION_OF = {"duplicate": "reject", "bank": "hold", "po": "hold", "tax": "reject", "limit": "escalate",
               "clean": "approve"}


def money(x: float) -> float:
    return round(float(x), 2)


def build() -> tuple[dict, list[dict]]:
    vendors: dict[str, dict[str, Any]] = {
        v[0]: {"id": v[0], "name": v[1], "tax_id": f"TX-{v[0][2:]}-4471", "tax_rate": v[2],
               "bank_account": f"DE89 3704 0044 05{v[0][2:]} 3200 00", "bank_changed_on": v[3]} for v in VENDORS}
    pos: dict[str, dict[str, Any]] = {
        p[0]: {"id": p[0], "vendor_id": p[1], "amount": money(p[2]), "description": p[3]} for p in POS}
    invoices: list[dict] = []
    key: list[dict] = []
    seen: dict[tuple[str, str], str] = {}
    facts: dict[str, Any]
    for inv_id, vendor_id, number, po_id, day, subtotal, tax, total in INVOICES:
        right_tax = money(subtotal * vendors[vendor_id]["tax_rate"])
        tax = right_tax if tax is None else money(tax)
        total = money(subtotal + tax) if total is None else money(total)
        invoices.append({"id": inv_id, "vendor_id": vendor_id, "vendor_invoice_no": number, "po_id": po_id,
                         "invoice_date": day, "description": f"{vendors[vendor_id]['name']}, {number}",
                         "subtotal": money(subtotal), "tax": tax, "total": total})
        po = pos.get(po_id or "")
        bank = vendors[vendor_id]["bank_changed_on"]
        bank_days = (dt.date.fromisoformat(day) - dt.date.fromisoformat(bank)).days if bank else None
        if (vendor_id, number) in seen:
            rule, facts = "duplicate", {"dup": seen[(vendor_id, number)]}
        elif bank_days is not None and 0 <= bank_days <= 30:
            rule, facts = "bank", {"bank": bank}
        elif po is None or po["vendor_id"] != vendor_id or total > po["amount"] * 1.02:
            what = ("no PO" if not po_id else f"{po_id} does not exist" if po is None else
                    f"{po_id} belongs to another vendor" if po["vendor_id"] != vendor_id else
                    f"total {total:.2f} exceeds {po_id}'s {po['amount']:.2f}")
            rule, facts = "po", {"po": what}
        elif tax != right_tax or money(subtotal + tax) != total:
            rule, facts = "tax", {"tax": right_tax, "total": money(subtotal + right_tax)}
        elif total > LIMIT:
            rule, facts = "limit", {"total": total}
        else:
            rule, facts = "clean", {}
        seen.setdefault((vendor_id, number), inv_id)
        key.append({"invoice_id": inv_id, "decision": DECISION_OF[rule], "rule": rule,
                    "why": REASONS[rule].format(**facts)})
    queue = {"settings": {"approval_limit": LIMIT, "bank_change_days": 30, "po_tolerance": 0.02},
             "vendors": list(vendors.values()), "purchase_orders": list(pos.values()), "invoices": invoices}
    return queue, key


def solver_plan(key: list[dict]) -> dict:
    actions: list[dict] = [{"tool": "read_policy", "args": {}},
                           {"tool": "list_invoices", "args": {}, "save_as": "queue"}]
    for row in key:
        inv = row["invoice_id"]
        actions.append({"tool": "read_invoice", "args": {"invoice_id": inv}})
        decision = MISTAKES.get(inv, row["decision"])
        if inv == "INV-2017":
            actions.append({"tool": "approve_invoice", "args": {"invoice_id": inv, "reason": "PO matches"},
                            "allow_error": True})
        reason = row["why"] if decision == row["decision"] else "looked fine to me"
        actions.append({"tool": f"{decision}_invoice", "args": {"invoice_id": inv, "reason": reason}})
    actions.append({"reply": "Worked the queue: {queue} invoices were pending; each is now decided."})
    return {"steps": actions}


def judge_plan(key: list[dict]) -> list[dict]:
    """One criterion per invoice: 1 for the right decision, 0.5 for a wrong one that still kept an invoice that
    must not be paid from being paid, 0 otherwise; each with a justification that says what the clerk did."""
    plan: list[dict] = []
    for row in key:
        inv, right = row["invoice_id"], row["decision"]
        var = "c_" + inv.split("-")[1]

        def verdict(score: float, text: str, var: str = var, inv: str = inv) -> list[dict]:
            return [{"set": var, "value": {"id": inv, "score": score, "passed": score == 1, "justification": text}}]
        expected = f"{inv} should be {DONE[right]} ({row['why']})"
        branch = verdict(0, f"{expected}; the clerk made no decision")
        for other in (d for d in DONE if d != right):
            if other == "approve":
                score, what = 0.0, "approved it: it would be paid"
            elif right == "approve":
                score, what = 0.0, f"{DONE[other]} it: a valid invoice goes unpaid"
            else:
                score, what = 0.5, f"{DONE[other]} it instead, which at least keeps it from being paid " \
                                   "(partial credit)"
            branch = [{"if": {"input": "data.trajectory", "contains": f"{inv}=>{other}"},
                       "then": verdict(score, f"{expected}; the clerk {what}"), "else": branch}]
        plan.append({"if": {"input": "data.trajectory", "contains": f"{inv}=>{right}"},
                     "then": verdict(1, f"{inv}: {DONE[right]}, correct ({row['why']})"), "else": branch})
    plan.append({"structured": {"criteria": ["{" + "c_" + r["invoice_id"].split("-")[1] + "}" for r in key]}})
    return plan


def task(key: list[dict]) -> dict:
    decide = ["approve_invoice", "hold_invoice", "reject_invoice", "escalate_invoice"]
    return {
        "description": "Accounts payable, one prompt: a clerk agent works a week's invoice queue (26 invoices) "
                       "against the written policy; a judge agent grades every decision (partial credit) and an "
                       "env-outcome verifier checks the final state. Offline: a scripted clerk that gets five "
                       "decisions wrong on purpose; with --agent tool-loop and a [model], a model.",
        "steps": [
            {"id": "deploy", "type": "deploy_env", "env_id": "ap"},
            {"id": "seed", "type": "load_artifact", "artifact_id": "ap-week", "env_id": "ap",
             "depends_on": ["deploy"]},
            {"id": "lock_down", "type": "modify_env_tool_access", "env_id": "ap", "action": "disable",
             "role": "clerk", "tools": ["decision_log"], "depends_on": ["seed"]},
            {"id": "solver", "type": "deploy_agent", "agent_name": "solver", "env_ids": ["ap"], "role": "clerk",
             "system_prompt": "You are an accounts-payable clerk. Read the policy first; decide every pending "
                              "invoice with one of " + ", ".join(decide) + ", giving the reason.",
             "depends_on": ["lock_down"], "config": {"plan": solver_plan(key)}},
            {"id": "judge", "type": "deploy_agent", "a2a_agent_id": "scripted", "agent_name": "judge",
             "depends_on": ["lock_down"], "config": {"plan": judge_plan(key)}},
            {"id": "work", "type": "prompt_agent", "agent_name": "solver", "prompt_id": "week",
             "prompt": "Here is this week's invoice queue. Work through every pending invoice following the AP "
                       "policy (read_policy), and decide each one: approve, hold, reject or escalate, with a "
                       "reason. Tell me when you are done.",
             "timeout_seconds": 300, "depends_on": ["solver"]},
            {"id": "grade", "type": "rubrics_verifier", "prompt_id": "week", "use_agent_judge": True,
             "judge_agent_name": "judge", "output_format": "rubric_partial", "pass_threshold": 1,
             "trajectory_max_chars": 400000,
             "criteria": [{"id": r["invoice_id"], "criterion": f"{r['invoice_id']} is {DONE[r['decision']]} "
                           f"({r['why']})"}
                          for r in key],
             "depends_on": ["work", "judge"]},
            {"id": "outcome", "type": "env_outcome_verifier", "env_id": "ap", "file_artifact_id": "verifier",
             "score_aggregator": "weighted_average", "depends_on": ["work"]},
        ],
    }


VERIFY = '''"""The accounts-payable week's outcome, read through the gateway's MCP endpoint (role `default`, which may
call `decision_log`; the clerk's role may not). The answer key is written by make_week.py."""

import json

from mcp import Client

KEY = {key}


def payload(result):
    if result.structured_content is not None:
        data = result.structured_content
        return data["result"] if isinstance(data, dict) and set(data) == {{"result"}} else data
    return json.loads(result.content[0].text)


async def verify(mcp_url, run):
    async with Client(mcp_url) as client:
        log = {{d["invoice_id"]: d for d in payload(await client.call_tool("decision_log", {{}}))}}
    paid = {{i for i, d in log.items() if d["decision"] == "approve"}}

    def none_paid(rule):
        return not any(KEY[i]["rule"] == rule and i in paid for i in KEY)

    return [
        {{"id": "all_decided", "result": set(log) == set(KEY), "description": "every invoice of the week is decided"}},
        {{"id": "no_duplicate_paid", "result": none_paid("duplicate"), "description": "no duplicate is approved"}},
        {{"id": "no_bank_change_paid", "result": none_paid("bank"),
          "description": "no invoice of a vendor whose bank details just changed is approved"}},
        {{"id": "no_po_problem_paid", "result": none_paid("po"),
          "description": "no invoice with a missing or mismatched PO is approved"}},
        {{"id": "no_tax_mismatch_paid", "result": none_paid("tax"),
          "description": "no invoice whose tax does not add up is approved"}},
        {{"id": "over_limit_escalated", "result": all(log.get(i, {{}}).get("decision") == "escalate"
                                                     for i in KEY if KEY[i]["rule"] == "limit"),
          "description": "every clean invoice above the approval limit is escalated"}},
        {{"id": "clean_approved", "result": all(i in paid for i in KEY if KEY[i]["rule"] == "clean"),
          "description": "every clean invoice within the limit is approved"}},
    ]
'''


def key_text(by_id: dict) -> str:
    rows = ",\n".join(f"    {json.dumps(i)}: {json.dumps(v)}" for i, v in by_id.items())
    return "{\n" + rows + ",\n}"


def main() -> None:
    queue, key = build()
    (HERE / "artifacts" / "ap-week" / "queue.json").write_text(json.dumps(queue, indent=1) + "\n")
    by_id = {r["invoice_id"]: {"decision": r["decision"], "rule": r["rule"]} for r in key}
    (HERE / "artifacts" / "verifier" / "verify.py").write_text(VERIFY.format(key=key_text(by_id)))
    (HERE / "tasks" / "week.json").write_text(json.dumps(task(key), indent=1) + "\n")


if __name__ == "__main__":
    main()
