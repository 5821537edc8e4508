"""The refund's outcome, read from the env itself: every table's rows through its data plane (data/get, with the
instance's admin token) and the writes the gateway logged (GET /changes)."""

import json
import urllib.request

SEEDED = {1041: "delivered", 1042: "refunded", 1043: "shipped", 1044: "paid"}  # 1042 is the one to refund


def call(url, body=None, token=None):
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if body is not None else None
    with urllib.request.urlopen(urllib.request.Request(url, data=data, headers=headers), timeout=30) as answer:
        return json.load(answer)


def verify(mcp_url, run):
    gateway, token = run["env"]["gateway_url"].rstrip("/"), run["env"]["admin_token"]
    got = call(f"{gateway}/agentenv", {"jsonrpc": "2.0", "id": 1, "method": "data/get"}, token)
    tables = got["result"]["parts"][0]["data"]
    orders = {row["id"]: row for row in tables["orders"]}
    refunds = tables["refunds"]
    changes = call(f"{gateway}/changes", token=token)["changes"]
    return [
        {"id": "order_refunded", "result": {i: o["status"] for i, o in orders.items()} == SEEDED,
         "description": "order 1042 is refunded and no other order changed"},
        {"id": "one_refund", "result": [(r["order_id"], r["amount_cents"]) for r in refunds] == [(1042, 8999)],
         "description": "exactly one refund, of the order's full 8999 cents, for order 1042"},
        {"id": "two_writes", "result": sorted((c["table"], c["op"]) for c in changes)
                                       == [("orders", "update"), ("refunds", "insert")],
         "description": "the changelog holds exactly the order's update and the refund's insert"},
    ]
