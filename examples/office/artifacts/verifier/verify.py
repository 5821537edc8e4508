"""The office week's outcome: checked through the gateway's MCP endpoint (as the role `default`)."""

import json

from mcp import Client

SENDER = "alex.morgan@brightline.example"
MARIA = "maria.lopez@acmelogistics.example"


def payload(result):
    if result.structured_content is not None:
        data = result.structured_content
        return data["result"] if isinstance(data, dict) and set(data) == {"result"} else data
    return json.loads(result.content[0].text)


async def verify(mcp_url, run):
    async with Client(mcp_url) as client:
        deals = payload(await client.call_tool("list_deals", {}))
        account = payload(await client.call_tool("get_account", {"account_id": "acc-acme"}))
        mailbox = payload(await client.call_tool("search_emails", {"folder": "all", "limit": 100}))
        emails = mailbox["emails"]  # summaries: no in_reply_to, so open the new sent ones
        fresh = [payload(await client.call_tool("read_email", {"email_id": e["id"]}))
                 for e in emails if e["folder"] == "sent" and e["date"] > "2025-03-14T09:00:00Z"]
    deal = next(d for d in deals if d["id"] == "deal-101")
    replies = [e for e in fresh if e["in_reply_to"] == "e-02" and MARIA in e["to"]
               and e["date"] > "2025-03-14T09:00:00Z"]
    activities = account["activities"]
    by_trigger = [a for a in activities if a["kind"] == "email" and a["actor"] == "automation"
                  and a["deal_id"] == "deal-101" and "Re: Fleet Analytics" in a["summary"]
                  and a["at"].startswith("2025-03-14T")]
    stage_change = [a for a in activities if a["kind"] == "stage_change" and a["actor"] == "agent"
                    and a["at"].startswith("2025-03-14T")]
    by_agent = [a for a in activities if a["actor"] == "agent" and a["kind"] != "stage_change"]
    reminders = [e for e in emails if e["subject"] == "Reminder: pipeline review at 15:00 today"
                 and e["date"] >= "2025-03-14T10:00:00Z"]
    seed_ids = {f"e-{n:02d}" for n in range(1, 16)}
    return [
        {"id": "deal_won", "result": deal["stage"] == "closed_won",
         "description": "the Acme Fleet Analytics deal is closed_won"},
        {"id": "stage_change_logged", "result": len(stage_change) == 1,
         "description": "the stage change was recorded once, by the agent, on Friday 14 March (virtual time)"},
        {"id": "reply_sent", "result": len(replies) == 1 and replies[0]["subject"].startswith("Re: ")
         and replies[0]["from"] == SENDER,
         "description": "one reply to Maria's e-02 was sent, dated on the virtual clock after 09:00 on 2025-03-14"},
        {"id": "activity_by_trigger", "result": len(by_trigger) == 1,
         "description": "the action trigger logged one 'email' activity on deal-101 as 'automation'"},
        {"id": "reminder_by_time_trigger", "result": len(reminders) == 1,
         "description": "the time trigger (t0 + PT1H) sent the pipeline-review reminder"},
        {"id": "refused_calls_had_no_effect", "result": not by_agent and seed_ids <= {e["id"] for e in emails},
         "description": "the refused log_activity and purge_mailbox changed nothing: no agent note, "
                        "every seed email kept"},
    ]
