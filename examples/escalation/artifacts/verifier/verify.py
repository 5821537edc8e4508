"""The escalation's outcome, read through the helpdesk gateway's MCP endpoint (as the role `default`): what the
desk and the mailbox hold once the conversation is over."""

import json

from mcp import Client

TICKET = "T-1042"


def payload(result):
    if result.structured_content is not None:
        data = result.structured_content
        return data["result"] if isinstance(data, dict) and set(data) == {"result"} else data
    return json.loads(result.content[0].text)


async def verify(mcp_url, run):
    async with Client(mcp_url) as client:
        ticket = payload(await client.call_tool("get_ticket", {"ticket_id": TICKET}))
        owed = payload(await client.call_tool("get_entitlements", {"account_id": ticket["account_id"]}))
        sent = payload(await client.call_tool("search_emails", {"query": TICKET, "folder": "sent"}))["emails"]
    events = {e["kind"]: e["at"] for e in ticket["sla_events"]}
    replies = [m for m in ticket["messages"] if m["direction"] == "outbound"]
    credits = ticket["credits"]
    return [
        {"id": "first_response_in_sla", "description": "the first answer came before the first-response deadline "
                                                       "(the breach timer was cancelled)",
         "result": bool(ticket["first_response_at"]) and ticket["first_response_at"] <= ticket["first_response_due"]
         and "first_response_breached" not in events},
        {"id": "update_after_sla_mark", "description": "the SLA timer marked an update due, and the customer got an "
                                                       "update after it",
         "result": "update_due" in events and any(m["at"] >= events["update_due"] for m in replies[1:])},
        {"id": "credit_within_entitlement", "description": "the credit given is the entitlement's, no exception",
         "result": bool(credits) and all(c["kind"] == "entitlement" for c in credits)
         and owed["credit_used_percent_this_month"] <= owed["entitlements"]["max_credit_percent"]},
        {"id": "sev1_escalation", "description": "an open sev1 engineering escalation (the CTO's email asked for it)",
         "result": any(e["severity"] == "sev1" and e["status"] == "open" for e in ticket["escalations"])
         and any(m["from"].startswith("tom.becker@") for m in ticket["messages"])},
        {"id": "manager_asked", "description": "the manager was emailed about the credit exception",
         "result": any("sam.okafor@brightline.example" in e["to"] for e in sent)},
    ]
