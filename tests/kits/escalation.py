"""The model's side of examples/escalation with `--agent tool-loop`: the replies the local wire-format model server
plays, one per model call (`from kits.escalation import model_script`)."""

from __future__ import annotations

from typing import Any


def model_script() -> list[Any]:
    """Three turns: answer within the SLA; give the 10% entitlement, read the CTO's email, escalate a sev1 and
    update the customer; email the manager about the 30% exception."""
    from agentenv_local.testing.fake_models import Reply

    t = {"ticket_id": "T-1042"}
    return [
        Reply.tool_call("get_ticket", t),
        Reply.tool_call("get_entitlements", {"account_id": "acc-acme"}),
        Reply.tool_call("reply_to_customer", {**t, "body": "Hi Maria, sorry: I'm on it, updates every 30 minutes."}),
        Reply(text="I'm on T-1042 now and will update you every 30 minutes."),
        Reply.tool_call("offer_credit", {**t, "percent": 10, "reason": "P1 outage"}),
        Reply.tool_call("get_ticket", t),
        Reply.tool_call("escalate_to_engineering", {**t, "severity": "sev1", "summary": "dashboards down"}),
        Reply.tool_call("reply_to_customer", {**t, "body": "Engineering has it as a sev1; 10% credit applied."}),
        Reply(text="Engineering has it as a sev1, and I applied a 10% credit, the most your plan allows."),
        Reply.tool_call("send_email", {"to": "sam.okafor@brightline.example", "subject": "Acme T-1042 exception",
                                       "body": "Acme asks 30%; 10% applied. Can you review?"}),
        Reply(text="I can't go past 10%, but my manager Sam is reviewing a 30% exception today."),
    ]
