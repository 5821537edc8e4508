"""The accounts-payable week's outcome, read through the gateway's MCP endpoint (role `default`, which may
call `decision_log`; the clerk's role may not). The answer key is written by make_week.py."""

import json

from mcp import Client

KEY = {
    "INV-2001": {"decision": "approve", "rule": "clean"},
    "INV-2002": {"decision": "approve", "rule": "clean"},
    "INV-2003": {"decision": "approve", "rule": "clean"},
    "INV-2004": {"decision": "hold", "rule": "bank"},
    "INV-2005": {"decision": "hold", "rule": "po"},
    "INV-2006": {"decision": "reject", "rule": "duplicate"},
    "INV-2007": {"decision": "escalate", "rule": "limit"},
    "INV-2008": {"decision": "reject", "rule": "tax"},
    "INV-2009": {"decision": "approve", "rule": "clean"},
    "INV-2010": {"decision": "hold", "rule": "po"},
    "INV-2011": {"decision": "hold", "rule": "po"},
    "INV-2012": {"decision": "hold", "rule": "po"},
    "INV-2013": {"decision": "approve", "rule": "clean"},
    "INV-2014": {"decision": "escalate", "rule": "limit"},
    "INV-2015": {"decision": "reject", "rule": "tax"},
    "INV-2016": {"decision": "approve", "rule": "clean"},
    "INV-2017": {"decision": "hold", "rule": "bank"},
    "INV-2018": {"decision": "reject", "rule": "duplicate"},
    "INV-2019": {"decision": "approve", "rule": "clean"},
    "INV-2020": {"decision": "reject", "rule": "tax"},
    "INV-2021": {"decision": "hold", "rule": "po"},
    "INV-2022": {"decision": "approve", "rule": "clean"},
    "INV-2023": {"decision": "escalate", "rule": "limit"},
    "INV-2024": {"decision": "approve", "rule": "clean"},
    "INV-2025": {"decision": "reject", "rule": "tax"},
    "INV-2026": {"decision": "approve", "rule": "clean"},
}


def payload(result):
    if result.structured_content is not None:
        data = result.structured_content
        return data["result"] if isinstance(data, dict) and set(data) == {"result"} else data
    return json.loads(result.content[0].text)


async def verify(mcp_url, run):
    async with Client(mcp_url) as client:
        log = {d["invoice_id"]: d for d in payload(await client.call_tool("decision_log", {}))}
    paid = {i for i, d in log.items() if d["decision"] == "approve"}

    def none_paid(rule):
        return not any(KEY[i]["rule"] == rule and i in paid for i in KEY)

    return [
        {"id": "all_decided", "result": set(log) == set(KEY), "description": "every invoice of the week is decided"},
        {"id": "no_duplicate_paid", "result": none_paid("duplicate"), "description": "no duplicate is approved"},
        {"id": "no_bank_change_paid", "result": none_paid("bank"),
          "description": "no invoice of a vendor whose bank details just changed is approved"},
        {"id": "no_po_problem_paid", "result": none_paid("po"),
          "description": "no invoice with a missing or mismatched PO is approved"},
        {"id": "no_tax_mismatch_paid", "result": none_paid("tax"),
          "description": "no invoice whose tax does not add up is approved"},
        {"id": "over_limit_escalated", "result": all(log.get(i, {}).get("decision") == "escalate"
                                                     for i in KEY if KEY[i]["rule"] == "limit"),
          "description": "every clean invoice above the approval limit is escalated"},
        {"id": "clean_approved", "result": all(i in paid for i in KEY if KEY[i]["rule"] == "clean"),
          "description": "every clean invoice within the limit is approved"},
    ]
