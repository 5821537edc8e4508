"""The crm example env: tools (schemas, annotations, happy and error paths), stage transitions, role-aware writes,
virtual time on recorded activities, the data plane round trip, the set-errors extension over real HTTP, and
that the mail and crm envs compose without tool-name clashes (and describe one world)."""

from __future__ import annotations

import base64

import httpx2
import pytest
from kits.data_plane import rpc
from kits.env_sdk import env_subprocess
from kits.example_envs import (
    CRM,
    CRM_SEED,
    MAIL,
    MAIL_SEED,
    call,
    call_all,
    dump,
    error_code,
    exported,
    load_seed,
    run,
)

from agentenv_local.env import load_env

CRM_TOOLS = {"find_account", "get_account", "list_deals", "update_deal_stage", "log_activity", "pipeline_summary"}
VT = "2025-03-14T15:05:00Z"


def as_role(role: str | None = None, virtual_time: str | None = None) -> dict:
    meta = {}
    if role is not None:
        meta["agentenv.io/role"] = role
    if virtual_time is not None:
        meta["agentenv.io/virtual_time"] = virtual_time
    return meta


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_crm_tools_are_listed_with_schemas_and_annotations(crm_env, mode):
    async def go():
        async with crm_env.client(mode=mode) as client:
            return {t.name: t for t in (await client.list_tools()).tools}

    tools = run(go())
    assert set(tools) == CRM_TOOLS
    read_only = {n for n, t in tools.items() if t.annotations and t.annotations.read_only_hint}
    assert read_only == {"find_account", "get_account", "list_deals", "pipeline_summary"}
    update = tools["update_deal_stage"].input_schema
    assert update["required"] == ["deal_id", "stage"] and "ctx" not in update["properties"]
    assert update["properties"]["stage"]["enum"] == ["prospecting", "qualification", "proposal", "negotiation",
                                                     "closed_won", "closed_lost"]
    log = tools["log_activity"].input_schema
    assert log["properties"]["kind"]["enum"] == ["call", "email", "meeting", "note"]
    assert log["required"] == ["account_id", "kind", "summary"]
    assert all(t.description for t in tools.values())


def test_crm_reads(seeded_crm):
    env = seeded_crm
    found, acme, negotiation, alex, summary = [r.structured_content for r in run(call_all(env, [
        ("find_account", {"name": "ACME"}),
        ("get_account", {"account_id": "acc-acme"}),
        ("list_deals", {"stage": "negotiation"}),
        ("list_deals", {"owner": "Alex.Morgan@brightline.example"}),
        ("pipeline_summary", {}),
    ]))]
    assert found == {"result": [{"id": "acc-acme", "name": "Acme Logistics", "industry": "logistics",
                                 "owner": "alex.morgan@brightline.example", "tier": "enterprise"}]}
    assert [c["name"] for c in acme["contacts"]] == ["Maria Lopez", "Tom Becker"]
    assert [d["id"] for d in acme["deals"]] == ["deal-101", "deal-102"]
    assert [a["id"] for a in acme["activities"]] == ["act-3"]
    assert [(d["id"], d["account_name"]) for d in negotiation["result"]] == [("deal-101", "Acme Logistics"),
                                                                             ("deal-301", "Globex Retail")]
    assert [d["id"] for d in alex["result"]] == ["deal-402", "deal-101", "deal-201", "deal-401", "deal-102"]
    assert summary["open_deals"] == 6 and summary["open_amount"] == 576000 and summary["won_amount"] == 15000
    assert summary["stages"]["negotiation"] == {"deals": 2, "amount": 360000}
    assert summary["open_amount_by_owner"] == {"alex.morgan@brightline.example": 318000,
                                               "priya.shah@brightline.example": 258000}
    assert call(env, "find_account", {"name": "zzz"}).structured_content == {"result": []}


def test_crm_update_deal_stage_records_an_activity_in_virtual_time(seeded_crm):
    env = seeded_crm
    moved, won, account = run(call_all(env, [
        ("update_deal_stage", {"deal_id": "deal-201", "stage": "negotiation", "note": "HIPAA answered"},
         as_role("sales", VT)),
        ("update_deal_stage", {"deal_id": "deal-101", "stage": "closed_won"}, as_role("manager")),
        ("get_account", {"account_id": "acc-northwind"}),
    ]))
    assert moved.structured_content["previous_stage"] == "proposal"
    assert moved.structured_content["deal"]["stage"] == "negotiation"
    assert moved.structured_content["activity"] == {
        "id": "act-5", "account_id": "acc-northwind", "deal_id": "deal-201", "kind": "stage_change",
        "summary": "Patient Flow Dashboards: proposal -> negotiation (HIPAA answered)", "actor": "sales", "at": VT}
    assert won.structured_content["activity"]["actor"] == "manager"
    assert won.structured_content["activity"]["at"] > "2026"          # the wall clock without a virtual time
    assert account.structured_content["activities"][0]["id"] == "act-5"
    data = exported(env)
    assert [d["stage"] for d in data["deals"] if d["id"] in ("deal-101", "deal-201")] == ["closed_won", "negotiation"]
    assert len(data["activities"]) == 6


def test_crm_log_activity(seeded_crm):
    env = seeded_crm
    logged = call(env, "log_activity", {"account_id": "acc-initech", "kind": "call", "deal_id": "deal-401",
                                        "summary": "Lena confirmed the decision moves to May."},
                  as_role("sales", VT)).structured_content
    assert logged == {"id": "act-5", "account_id": "acc-initech", "deal_id": "deal-401", "kind": "call",
                      "summary": "Lena confirmed the decision moves to May.", "actor": "sales", "at": VT}
    unattributed = call(env, "log_activity", {"account_id": "acc-acme", "kind": "note", "summary": "x"})
    assert unattributed.structured_content["actor"] == "default" and unattributed.structured_content["deal_id"] is None


def test_crm_tool_errors(seeded_crm):
    env = seeded_crm
    results = run(call_all(env, [
        ("find_account", {"name": "  "}),
        ("get_account", {"account_id": "acc-nope"}),
        ("list_deals", {"stage": "won"}),
        ("update_deal_stage", {"deal_id": "deal-999", "stage": "proposal"}),
        ("update_deal_stage", {"deal_id": "deal-302", "stage": "negotiation"}),      # skips two stages
        ("update_deal_stage", {"deal_id": "deal-501", "stage": "negotiation"}),      # closed is final
        ("update_deal_stage", {"deal_id": "deal-101", "stage": "negotiation"}),      # already there
        ("update_deal_stage", {"deal_id": "deal-101", "stage": "signed"}),
        ("log_activity", {"account_id": "acc-nope", "kind": "call", "summary": "x"}),
        ("log_activity", {"account_id": "acc-acme", "kind": "call", "summary": "x", "deal_id": "deal-301"}),
        ("log_activity", {"account_id": "acc-acme", "kind": "fax", "summary": "x"}),
        ("log_activity", {"account_id": "acc-acme", "kind": "call", "summary": "   "}),
    ]))
    assert [error_code(r) for r in results] == [
        "invalid_argument", "not_found", "invalid_arguments", "not_found", "invalid_transition", "invalid_transition",
        "invalid_transition", "invalid_arguments", "not_found", "invalid_argument", "invalid_arguments",
        "invalid_argument"]
    assert results[4].structured_content["hint"] == "from prospecting it can move to qualification, closed_lost"
    assert results[5].structured_content["hint"] == "closed_won is final"
    assert results[1].content[0].text == "not_found: no account has id 'acc-nope'"
    assert exported(env) == load_seed(CRM_SEED)           # nothing changed


def test_crm_viewer_cannot_write_but_can_read(seeded_crm):
    env = seeded_crm
    update, log, read, summary = run(call_all(env, [
        ("update_deal_stage", {"deal_id": "deal-101", "stage": "closed_won"}, as_role("viewer")),
        ("log_activity", {"account_id": "acc-acme", "kind": "note", "summary": "x"}, as_role("viewer")),
        ("get_account", {"account_id": "acc-acme"}, as_role("viewer")),
        ("pipeline_summary", {}, as_role("viewer")),
    ]))
    assert dump(update) == {
        "content": [{"type": "text", "text": "permission_denied: the viewer role cannot call update_deal_stage"}],
        "structuredContent": {"code": "permission_denied", "message": "the viewer role cannot call update_deal_stage",
                              "retryable": False, "applied": "no",
                              "hint": "ask someone with a sales role to make the change"},
        "isError": True}
    assert error_code(log) == "permission_denied"
    assert not read.is_error and not summary.is_error
    assert exported(env) == load_seed(CRM_SEED)


def test_crm_stage_walk_forward_back_and_lost(seeded_crm):
    env = seeded_crm
    steps = [("deal-302", "qualification"), ("deal-302", "proposal"), ("deal-302", "qualification"),
             ("deal-302", "proposal"), ("deal-302", "negotiation"), ("deal-302", "closed_won"),
             ("deal-102", "closed_lost")]
    results = run(call_all(env, [("update_deal_stage", {"deal_id": d, "stage": s}) for d, s in steps]))
    assert [r.structured_content["deal"]["stage"] for r in results] == [s for _, s in steps]
    assert error_code(call(env, "update_deal_stage", {"deal_id": "deal-102", "stage": "prospecting"})) == \
        "invalid_transition"


def test_crm_data_plane_round_trips(crm_env, tmp_path):
    env = crm_env
    seed = load_seed(CRM_SEED)
    empty = {"accounts": [], "contacts": [], "deals": [], "activities": []}
    assert exported(env) == empty
    assert rpc(env, "data/add", {"parts": [{"kind": "data", "data": seed}]})["result"] == {}
    assert exported(env) == seed
    rpc(env, "data/reset")
    assert exported(env) == empty
    inline = {"kind": "file", "file": {"bytes": base64.b64encode(CRM_SEED.read_bytes()).decode(),
                                       "mimeType": "application/json"}}
    assert rpc(env, "data/add", {"parts": [inline]})["result"] == {}
    assert exported(env) == seed
    rpc(env, "data/reset")
    assert rpc(env, "data/add", {"parts": [{"kind": "file", "file": {"uri": CRM_SEED.resolve().as_uri()}}]}
               )["result"] == {}
    assert exported(env) == seed
    # in two parts (accounts, then the rest): additive
    rpc(env, "data/reset")
    rest = {k: v for k, v in seed.items() if k != "accounts"}
    parts = [{"kind": "data", "data": {"accounts": seed["accounts"]}}, {"kind": "data", "data": rest}]
    assert rpc(env, "data/add", {"parts": parts})["result"] == {}
    assert exported(env) == seed
    export = rpc(env, "data/get")["result"]["parts"]
    rpc(env, "data/reset")
    rpc(env, "data/add", {"parts": export})
    assert rpc(env, "data/get")["result"]["parts"] == export
    # ids restart after a reset
    rpc(env, "data/reset")
    rpc(env, "data/add", {"parts": [{"kind": "data", "data": {"accounts": [{"id": "a", "name": "A"}],
                                                             "deals": [{"id": "d", "account_id": "a", "name": "D",
                                                                        "stage": "proposal", "amount": "12.5"}]}}]})
    assert call(env, "log_activity", {"account_id": "a", "kind": "note", "summary": "x"}).structured_content["id"] == \
        "act-1"
    assert exported(env)["deals"] == [{"id": "d", "account_id": "a", "name": "D", "stage": "proposal",
                                       "amount": 12.5, "close_date": None, "owner": None}]


@pytest.mark.parametrize("data, fragment", [
    ({"leads": []}, "expected"),
    ({"accounts": [{"id": "x"}]}, "lacks ['name']"),
    ({"accounts": [{"id": "x", "name": "X", "revenue": 1}]}, "unknown field"),
    ({"deals": [{"id": "d", "account_id": "a", "name": "D", "stage": "won"}]}, "unknown stage"),
    ({"deals": [{"id": "d", "account_id": "a", "name": "D", "stage": "proposal", "amount": "lots"}]}, "not a number"),
    ({"activities": [{"account_id": "a", "kind": "fax", "summary": "s", "at": VT}]}, "unknown kind"),
    ({"accounts": [{"id": "acc-acme", "name": "Acme again"}]}, "already exists"),
    ({"accounts": "acc-acme"}, "must be a list"),
])
def test_crm_data_plane_refuses_bad_input_and_loads_nothing(seeded_crm, data, fragment):
    env = seeded_crm
    good = {"kind": "data", "data": {"accounts": [{"id": "acc-new", "name": "New Co"}]}}
    answer = rpc(env, "data/add", {"parts": [good, {"kind": "data", "data": data}]})
    assert answer["error"]["code"] == -32000 and answer["error"]["data"]["code"] == "invalid_argument"
    assert fragment in answer["error"]["message"]
    assert exported(env) == load_seed(CRM_SEED)
    text = rpc(env, "data/add", {"parts": [{"kind": "text", "text": "Acme"}]})
    assert text["error"]["data"]["code"] == "invalid_argument"


def test_crm_over_http_with_roles_and_fault_injection(tmp_path):
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    seed = load_seed(CRM_SEED)
    with env_subprocess(CRM, env_vars={"CRM_DB": str(tmp_path / "crm.sqlite")}) as (base, _proc):
        with httpx2.Client(timeout=30) as h:
            card = h.get(base + "/.well-known/agent-env.json").json()
            assert card["name"] == "crm" and {t["name"] for t in card["capabilities"]["tools"]} == CRM_TOOLS
            exts = {e["uri"]: e for e in card["capabilities"]["extensions"]}
            assert set(exts) == {"urn:agentenv:set-errors/v1", "urn:agentenv:intake/v1", "urn:agentenv:changes/v1"}
            endpoint = exts["urn:agentenv:set-errors/v1"]["params"]["endpoint"]
            assert endpoint == "/agentenv/ext/set_errors"
            rpc_url = base + card["url"]
            assert h.post(rpc_url, json={"jsonrpc": "2.0", "id": 1, "method": "data/add",
                                         "params": {"parts": [{"kind": "data", "data": seed}]}}).json()["result"] == {}
            # bad fault specs
            bad = [({"tool_name": "nope", "error_rate": 0.5}, 404, "not_found"),
                   ({"tool_name": "list_deals", "error_rate": 1.5}, 400, "invalid_argument"),
                   ({"tool_name": "list_deals", "error_rate": 0.5, "error_type": "gremlins"}, 400, "invalid_argument")]
            for body, status, code in bad:
                r = h.post(base + endpoint, json=body)
                assert r.status_code == status and r.json()["error"]["code"] == code, r.text
            assert h.post(base + endpoint, json={"tool_name": "list_deals"}).status_code == 400   # no rate
            ok = h.post(base + endpoint, json={"tool_name": "list_deals", "error_rate": 1.0, "error_type": "timeout",
                                               "seed": 7})
            assert ok.json() == {"ok": True, "faults": {"list_deals": {"error_rate": 1.0, "error_type": "timeout"}}}

        async def session(role: str):
            http_client = httpx2.AsyncClient(headers={"AgentEnv-Role": role}, timeout=30)
            return Client(streamable_http_client(base + "/mcp", http_client=http_client))

        async def go():
            async with await session("viewer") as viewer:
                denied = await viewer.call_tool("update_deal_stage", {"deal_id": "deal-201", "stage": "negotiation"})
                faulty = await viewer.call_tool("list_deals", {})
                fine = await viewer.call_tool("pipeline_summary", {})
            async with await session("sales") as sales:
                moved = await sales.call_tool("update_deal_stage", {"deal_id": "deal-201", "stage": "negotiation"},
                                              meta={"agentenv.io/virtual_time": VT})
            return denied, faulty, fine, moved

        denied, faulty, fine, moved = run(go())
        assert denied.is_error and denied.structured_content["code"] == "permission_denied"
        assert faulty.is_error and faulty.structured_content["code"] == "timeout"
        assert faulty.structured_content["retryable"] is True and faulty.structured_content["applied"] == "no"
        assert not fine.is_error
        assert moved.structured_content["activity"]["actor"] == "sales"
        assert moved.structured_content["activity"]["at"] == VT
        with httpx2.Client(timeout=30) as h:
            assert h.post(base + endpoint, json={"tool_name": "list_deals", "error_rate": 0}).json() == \
                {"ok": True, "faults": {}}
            # reset clears faults as well as data
            h.post(base + endpoint, json={"tool_name": "*", "error_rate": 1})
            assert h.post(rpc_url, json={"jsonrpc": "2.0", "id": 2, "method": "data/reset"}).json()["result"] == {}
            got = h.post(rpc_url, json={"jsonrpc": "2.0", "id": 3, "method": "data/get"}).json()
            assert got["result"]["parts"] == [{"kind": "data", "data": {"accounts": [], "contacts": [], "deals": [],
                                                                       "activities": []}}]

        async def after_reset():
            async with await session("sales") as sales:
                return await sales.call_tool("pipeline_summary", {})

        assert not run(after_reset()).is_error


def test_crm_fault_injection_is_seeded_and_reproducible(crm_env):
    def pattern(env, seed):
        env.set_errors("pipeline_summary", 0.5, "unavailable", seed=seed)
        return [r.is_error for r in run(call_all(env, [("pipeline_summary", {})] * 20))]

    first, second = pattern(crm_env, 42), pattern(load_env(CRM), 42)
    assert first == second and 0 < sum(first) < 20
    assert pattern(crm_env, 43) != first


def test_mail_and_crm_compose_without_clashes_and_describe_one_world():
    mail, crm = load_env(MAIL), load_env(CRM)
    mail_tools = {t["name"] for t in mail.list_tools()}
    crm_tools = {t["name"] for t in crm.list_tools()}
    assert mail_tools and crm_tools and not mail_tools & crm_tools
    assert mail.card().name == "mail" and crm.card().name == "crm"
    mail_seed, crm_seed = load_seed(MAIL_SEED), load_seed(CRM_SEED)
    assert len(mail_seed["emails"]) == 15 and len(crm_seed["accounts"]) == 5 and len(crm_seed["deals"]) == 8
    accounts = {a["id"] for a in crm_seed["accounts"]}
    crm_people = {c["email"]: c for c in crm_seed["contacts"]}
    for contact in mail_seed["contacts"]:
        if contact["account_id"] is not None:          # every customer in the address book is in the CRM
            assert contact["account_id"] in accounts
            assert crm_people[contact["email"]]["account_id"] == contact["account_id"]
    for table in ("contacts", "deals", "activities"):
        assert {row["account_id"] for row in crm_seed[table]} <= accounts
    deals = {d["id"] for d in crm_seed["deals"]}
    assert {a["deal_id"] for a in crm_seed["activities"]} <= deals
    ids = {e["id"] for e in mail_seed["emails"]}
    assert {e["in_reply_to"] for e in mail_seed["emails"] if e["in_reply_to"]} <= ids
    dates = sorted(e["date"] for e in mail_seed["emails"])
    assert dates[0].startswith("2025-03-10") and dates[-1].startswith("2025-03-14")   # one working week
    names = " ".join(e["subject"] + " " + e["body"] for e in mail_seed["emails"])
    for account in crm_seed["accounts"]:                # each account comes up in the week's mail
        assert account["name"].split()[0] in names
