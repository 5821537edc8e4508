"""The office week's scripted "agent": no model, the same MCP calls on every run.

It runs as a `run_code` step with `env_id`, so its input carries the deployed env's MCP URL, and
talks to the gateway as the role `agent`, like a deployed agent would. It answers
Maria's 3-year pricing email now that Sam approved the 8% discount, marks the Acme deal won, and
then tries two things the task's RBAC rules forbid (logging a CRM activity itself, purging the
mailbox). Each row of its result says whether one part of the plan went as planned; if one did
not, the step fails and names it.
"""

import json

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

ROLE = "agent"
REFUSED = "Tool '{tool}' is disabled for role 'agent'"


def payload(result):
    """A tool result's value: the structured content's `result` (or itself), else the text as JSON."""
    if result.structured_content is not None:
        data = result.structured_content
        return data["result"] if isinstance(data, dict) and set(data) == {"result"} else data
    text = result.content[0].text if result.content else ""
    try:
        return json.loads(text)
    except ValueError:
        return text


async def run(input):
    rows = await act(input["env"]["mcp_url"])
    failed = [r["description"] for r in rows if not r["result"]]
    if failed:
        raise RuntimeError("the scripted agent's plan went wrong: " + "; ".join(failed))
    return {"plan": rows}


async def act(mcp_url):
    rows = []

    def check(cid, ok, description):
        rows.append({"id": cid, "result": bool(ok), "description": description})

    http_client = httpx2.AsyncClient(headers={"AgentEnv-Role": ROLE}, timeout=30)
    async with Client(streamable_http_client(mcp_url, http_client=http_client)) as client:
        listed = {t.name for t in (await client.list_tools()).tools}
        check("sees_tools", {"search_emails", "send_email", "update_deal_stage"} <= listed
              and not {"purge_mailbox", "log_activity"} & listed,
              "the agent sees mail and CRM tools, but not purge_mailbox or log_activity")

        found = payload(await client.call_tool("search_emails", {"query": "Fleet Analytics"}))
        ids = [e["id"] for e in found["emails"]]
        check("found_thread", "e-02" in ids and "e-08" in ids,
              "searching for 'Fleet Analytics' finds Maria's request and Sam's approval")

        request = payload(await client.call_tool("read_email", {"email_id": "e-02"}))
        approval = payload(await client.call_tool("read_email", {"email_id": "e-08"}))
        check("read_thread", "8%" in request["body"] and "approved" in approval["body"],
              "Maria asks for 8% on a 3-year term; Sam approved it")

        contact = payload(await client.call_tool("lookup_contact", {"query": "Maria"}))
        account_id = contact[0]["account_id"]
        account = payload(await client.call_tool("get_account", {"account_id": account_id}))
        deal = next(d for d in account["deals"] if d["name"].startswith("Fleet Analytics"))
        check("found_deal", account_id == "acc-acme" and deal["id"] == "deal-101",
              "Maria's account is Acme Logistics; its Fleet Analytics deal is deal-101")

        sent = await client.call_tool("send_email", {
            "to": [request["from"]], "subject": "", "in_reply_to": "e-02",
            "body": "Hi Maria,\n\nGood news: 8% on a 3-year term is approved. The revised order form "
                    "follows this week so legal can start their review.\n\nAlex"})
        check("replied", not sent.is_error and payload(sent)["folder"] == "sent",
              "the reply to Maria is sent")

        moved = await client.call_tool("update_deal_stage", {
            "deal_id": deal["id"], "stage": "closed_won", "note": "3-year term at 8% agreed (e-02, e-08)"})
        check("deal_moved", not moved.is_error and payload(moved)["deal"]["stage"] == "closed_won",
              "deal-101 moves from negotiation to closed_won")

        for tool, args in (("log_activity", {"account_id": account_id, "kind": "note",
                                             "summary": "agent tried to log this itself"}),
                           ("purge_mailbox", {})):
            refused = await client.call_tool(tool, args)
            text = refused.content[0].text if refused.content else ""
            check(f"refused_{tool}", refused.is_error and text == REFUSED.format(tool=tool),
                  f"calling {tool} as the agent is refused: {text!r}")
    return rows
