"""The support conversation's outcome, read through the gateway's MCP endpoint (as the role `default`)."""

import json

from mcp import Client

MARIA = "maria.lopez@acmelogistics.example"


def payload(result):
    if result.structured_content is not None:
        data = result.structured_content
        return data["result"] if isinstance(data, dict) and set(data) == {"result"} else data
    return json.loads(result.content[0].text)


async def verify(mcp_url, run):
    async with Client(mcp_url) as client:
        deals = payload(await client.call_tool("list_deals", {}))
        sent = payload(await client.call_tool("search_emails", {"folder": "sent", "limit": 100}))["emails"]
        fresh = [payload(await client.call_tool("read_email", {"email_id": e["id"]})) for e in sent]
    deal = next(d for d in deals if d["id"] == "deal-101")
    # The seed already holds Alex's first answer to e-02; the new one confirms the approval.
    replies = [e for e in fresh if e.get("in_reply_to") == "e-02" and MARIA in e["to"] and "approved" in e["body"]]
    return [
        {"id": "deal_won", "result": deal["stage"] == "closed_won",
         "description": "the Acme deal (deal-101) is closed_won"},
        {"id": "one_reply", "result": len(replies) == 1 and "8%" in replies[0]["body"],
         "description": "exactly one reply to Maria's e-02, confirming the 8% discount"},
    ]
