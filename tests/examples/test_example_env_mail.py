"""The mail example env: tools (schemas, annotations, happy and error paths), virtual time on sent mail, the data
plane round trip (data part, inline file, file:// URI), and the same env over real HTTP as a subprocess."""

from __future__ import annotations

import base64
import datetime as dt
import sqlite3

import httpx2
import pytest
from kits.data_plane import rpc
from kits.env_sdk import env_subprocess
from kits.example_envs import (
    MAIL,
    MAIL_SEED,
    call,
    call_all,
    error_code,
    exported,
    load_seed,
    run,
)

MAIL_TOOLS = {"search_emails", "read_email", "send_email", "move_email", "list_folders", "lookup_contact",
              "purge_mailbox"}
OWNER = "alex.morgan@brightline.example"
VT = {"agentenv.io/virtual_time": "2025-03-14T10:30:00Z"}


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_mail_tools_are_listed_with_schemas_and_annotations(mail_env, mode):
    async def go():
        async with mail_env.client(mode=mode) as client:
            return {t.name: t for t in (await client.list_tools()).tools}

    tools = run(go())
    assert set(tools) == MAIL_TOOLS
    read_only = {n for n, t in tools.items() if t.annotations and t.annotations.read_only_hint}
    assert read_only == {"search_emails", "list_folders", "lookup_contact"}   # read_email marks read: a write
    assert tools["purge_mailbox"].meta == {"agentenv.io/hiddenByDefault": True}
    assert tools["purge_mailbox"].annotations.destructive_hint is True
    assert all(t.meta is None for n, t in tools.items() if n != "purge_mailbox")
    search = tools["search_emails"].input_schema
    assert search["properties"]["folder"]["default"] == "inbox"
    assert search["properties"]["limit"]["maximum"] == 100 and search["properties"]["limit"]["default"] == 20
    assert "required" not in search
    send = tools["send_email"].input_schema
    assert send["required"] == ["to", "subject", "body"] and "ctx" not in send["properties"]
    assert all(t.description for t in tools.values())


def test_mail_search_read_move_and_folders(seeded_mail):
    env = seeded_mail
    folders, everything, unread, limited, fleet, read, again, moved, archive, after = run(call_all(env, [
        ("list_folders", {}),
        ("search_emails", {"folder": "all", "limit": 100}),
        ("search_emails", {"unread_only": True}),
        ("search_emails", {"limit": 2}),
        ("search_emails", {"query": "FLEET analytics", "folder": "all"}),
        ("read_email", {"email_id": "e-04"}),
        ("search_emails", {"unread_only": True}),
        ("move_email", {"email_id": "e-15", "folder": "Archive"}),
        ("search_emails", {"folder": "archive"}),
        ("list_folders", {}),
    ]))
    assert folders.structured_content["result"] == [
        {"name": "inbox", "total": 12, "unread": 9}, {"name": "sent", "total": 2, "unread": 0},
        {"name": "archive", "total": 1, "unread": 0}, {"name": "trash", "total": 0, "unread": 0}]
    assert everything.structured_content["total"] == 15
    assert [e["id"] for e in everything.structured_content["emails"]][:2] == ["e-15", "e-14"]   # newest first
    assert unread.structured_content["total"] == 9
    assert limited.structured_content["total"] == 12 and len(limited.structured_content["emails"]) == 2
    assert [e["id"] for e in fleet.structured_content["emails"]] == ["e-08", "e-03", "e-02", "e-01"]
    summary = fleet.structured_content["emails"][0]
    assert set(summary) == {"id", "folder", "from", "to", "subject", "date", "read", "snippet"}
    assert read.structured_content["id"] == "e-04" and read.structured_content["read"] is True
    assert "HIPAA" in read.structured_content["body"]
    assert again.structured_content["total"] == 8
    assert moved.structured_content == {"id": "e-15", "from_folder": "inbox", "folder": "archive"}
    assert [e["id"] for e in archive.structured_content["emails"]] == ["e-15", "e-10"]
    assert after.structured_content["result"][0] == {"name": "inbox", "total": 11, "unread": 7}


def test_mail_tool_errors(seeded_mail):
    env = seeded_mail
    results = run(call_all(env, [
        ("read_email", {"email_id": "nope"}),
        ("search_emails", {"folder": "spam"}),
        ("search_emails", {"limit": 0}),
        ("move_email", {"email_id": "nope", "folder": "archive"}),
        ("move_email", {"email_id": "e-01", "folder": "Not/A/Folder"}),
        ("move_email", {"email_id": "e-01", "folder": "sent"}),
        ("lookup_contact", {"query": ""}),
        ("send_email", {"to": ["not-an-address"], "subject": "x", "body": "y"}),
        ("send_email", {"to": [], "subject": "x", "body": "y"}),
        ("send_email", {"to": "sam.okafor@brightline.example", "subject": " ", "body": "y"}),
        ("send_email", {"to": "sam.okafor@brightline.example", "subject": "", "body": "y", "in_reply_to": "e-99"}),
        ("send_email", {"subject": "x", "body": "y"}),
    ]))
    codes = [error_code(r) for r in results]
    assert codes == ["not_found", "not_found", "invalid_arguments", "not_found", "invalid_argument",
                     "invalid_argument", "invalid_arguments", "invalid_argument", "invalid_argument",
                     "invalid_argument", "not_found", "invalid_arguments"]
    assert results[0].content[0].text == "not_found: no email has id 'nope'"
    assert results[1].structured_content["hint"] == "list_folders shows the folders"
    assert exported(env) == load_seed(MAIL_SEED)          # no failed call changed anything


def test_mail_send_is_dated_with_virtual_time(seeded_mail):
    env = seeded_mail
    before = dt.datetime.now(dt.UTC).replace(microsecond=0)
    reply, fresh, listed = run(call_all(env, [
        ("send_email", {"to": ["ellen.park@northwindhealth.example"], "subject": "",
                        "body": "Revised proposal attached.", "in_reply_to": "e-11"}, VT),
        ("send_email", {"to": "sam.okafor@brightline.example, priya.shah@brightline.example",
                        "subject": "Pipeline notes", "body": "See CRM."}),
        ("search_emails", {"folder": "sent"}),
    ]))
    assert reply.structured_content == {
        "id": "m16", "folder": "sent", "from": OWNER, "to": ["ellen.park@northwindhealth.example"], "cc": [],
        "subject": "Re: Questions on the Patient Flow proposal", "body": "Revised proposal attached.",
        "date": "2025-03-14T10:30:00Z", "read": True, "in_reply_to": "e-11"}
    sent_at = dt.datetime.fromisoformat(fresh.structured_content["date"])
    assert before <= sent_at <= dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1)     # wall clock without one
    assert fresh.structured_content["to"] == ["sam.okafor@brightline.example", "priya.shah@brightline.example"]
    assert [e["id"] for e in listed.structured_content["emails"]][:2] == ["m17", "m16"]
    assert exported(env)["emails"][15]["date"] == "2025-03-14T10:30:00Z"


def test_mail_contacts_and_hidden_purge(seeded_mail):
    env = seeded_mail
    found = call(env, "lookup_contact", {"query": "acme"}).structured_content["result"]
    assert [c["name"] for c in found] == ["Maria Lopez", "Tom Becker"]
    assert found[0] == {"email": "maria.lopez@acmelogistics.example", "name": "Maria Lopez",
                        "company": "Acme Logistics", "title": "VP Operations", "account_id": "acc-acme"}
    assert call(env, "lookup_contact", {"query": "nobody"}).structured_content == {"result": []}
    assert call(env, "purge_mailbox").structured_content == {"deleted": 15}
    assert call(env, "purge_mailbox").structured_content == {"deleted": 0}
    data = exported(env)
    assert data["emails"] == [] and len(data["contacts"]) == 8


def test_mail_data_plane_round_trips(mail_env, tmp_path):
    env = mail_env
    seed = load_seed(MAIL_SEED)
    assert exported(env) == {"emails": [], "contacts": []}
    assert rpc(env, "data/add", {"parts": [{"kind": "data", "data": seed}]})["result"] == {}
    assert exported(env) == seed
    assert rpc(env, "data/reset")["result"] == {}
    assert exported(env) == {"emails": [], "contacts": []}
    inline = {"kind": "file", "file": {"bytes": base64.b64encode(MAIL_SEED.read_bytes()).decode(),
                                       "mimeType": "application/json", "name": "seed.json"}}
    assert rpc(env, "data/add", {"parts": [inline]})["result"] == {}
    assert exported(env) == seed
    rpc(env, "data/reset")
    assert rpc(env, "data/add", {"parts": [{"kind": "file", "file": {"uri": MAIL_SEED.resolve().as_uri()}}]}
               )["result"] == {}
    assert exported(env) == seed
    # an export loads back to the same export, and ids restart after a reset
    export = rpc(env, "data/get")["result"]["parts"]
    rpc(env, "data/reset")
    assert rpc(env, "data/add", {"parts": export})["result"] == {}
    assert rpc(env, "data/get")["result"]["parts"] == export
    rpc(env, "data/reset")
    sent = call(env, "send_email", {"to": "a@b.example", "subject": "s", "body": "b"})
    assert sent.structured_content["id"] == "m1"
    # a sparse email is filled in to the canonical shape
    rpc(env, "data/reset")
    rpc(env, "data/add", {"parts": [{"kind": "data", "data": {"emails": [{"from": "x@y.example", "subject": "Hi"}]}}]})
    assert exported(env)["emails"] == [{"id": "m1", "folder": "inbox", "from": "x@y.example", "to": [], "cc": [],
                                        "subject": "Hi", "body": "", "date": "1970-01-01T00:00:00Z", "read": False,
                                        "in_reply_to": None}]


@pytest.mark.parametrize("part, fragment", [
    ({"kind": "text", "text": "hello"}, "not text"),
    ({"kind": "data", "data": {"mails": []}}, "expected"),
    ({"kind": "data", "data": {"emails": [{"subject": "no sender"}]}}, "'from'"),
    ({"kind": "data", "data": {"emails": [{"from": "a@b.example", "folder": "Bad/Folder"}]}}, "folder"),
    ({"kind": "data", "data": {"emails": [{"from": "a@b.example", "to": ["nope"]}]}}, "not an email address"),
    ({"kind": "data", "data": {"emails": [{"from": "a@b.example", "priority": 1}]}}, "unknown email field"),
    ({"kind": "data", "data": {"contacts": [{"name": "No Address"}]}}, "'email'"),
    ({"kind": "file", "file": {"bytes": base64.b64encode(b"not json").decode()}}, "not readable JSON"),
    ({"kind": "file", "file": {"uri": "file:///no/such/seed.json"}}, "not readable JSON"),
])
def test_mail_data_plane_refuses_bad_input_and_loads_nothing(seeded_mail, part, fragment):
    env = seeded_mail
    good = {"kind": "data", "data": {"emails": [{"id": "new-1", "from": "a@b.example"}]}}
    answer = rpc(env, "data/add", {"parts": [good, part]})
    assert answer["error"]["code"] == -32000 and answer["error"]["data"]["code"] == "invalid_argument"
    assert fragment in answer["error"]["message"]
    assert exported(env) == load_seed(MAIL_SEED)          # all or nothing


def test_mail_duplicate_ids_are_refused(seeded_mail):
    answer = rpc(seeded_mail, "data/add", {"parts": [{"kind": "data", "data": load_seed(MAIL_SEED)}]})
    assert answer["error"]["data"]["code"] == "invalid_argument" and "already exists" in answer["error"]["message"]
    assert exported(seeded_mail) == load_seed(MAIL_SEED)


def test_mail_over_http_subprocess(tmp_path):
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    db = tmp_path / "mail.sqlite"
    seed = load_seed(MAIL_SEED)
    with env_subprocess(MAIL, env_vars={"MAIL_DB": str(db)}) as (base, _proc):
        with httpx2.Client(timeout=30) as h:
            card = h.get(base + "/.well-known/agent-env.json").json()
            assert card["name"] == "mail" and card["capabilities"]["operations"] == ["data/reset", "data/add",
                                                                                     "data/get"]
            assert {t["name"] for t in card["capabilities"]["tools"]} == MAIL_TOOLS
            intake = card["capabilities"]["extensions"]
            assert [e["uri"] for e in intake] == ["urn:agentenv:intake/v1"]
            added = h.post(base + "/agentenv", json={"jsonrpc": "2.0", "id": 1, "method": "data/add",
                                                     "params": {"parts": [{"kind": "data", "data": seed}]}}).json()
            assert added == {"jsonrpc": "2.0", "id": 1, "result": {}}

        async def go():
            http_client = httpx2.AsyncClient(headers={"AgentEnv-Role": "sales"}, timeout=30)
            async with Client(streamable_http_client(base + "/mcp", http_client=http_client)) as client:
                tools = (await client.list_tools()).tools
                read = await client.call_tool("read_email", {"email_id": "e-08"})
                sent = await client.call_tool("send_email", {"to": ["maria.lopez@acmelogistics.example"],
                                                             "subject": "", "body": "8% approved.",
                                                             "in_reply_to": "e-02"}, meta=VT)
                missing = await client.call_tool("read_email", {"email_id": "zzz"})
            return tools, read, sent, missing

        tools, read, sent, missing = run(go())
        assert {t.name for t in tools} == MAIL_TOOLS
        assert next(t for t in tools if t.name == "search_emails").annotations.read_only_hint is True
        assert read.structured_content["read"] is True
        assert sent.structured_content["date"] == "2025-03-14T10:30:00Z"
        assert sent.structured_content["subject"] == "Re: Fleet Analytics Platform - 3-year pricing"
        assert missing.is_error and missing.structured_content["code"] == "not_found"
        with httpx2.Client(timeout=30) as h:
            got = h.post(base + "/agentenv", json={"jsonrpc": "2.0", "id": 2, "method": "data/get"}).json()
        data = got["result"]["parts"][0]["data"]
        assert len(data["emails"]) == 16 and data["emails"][-1] == sent.structured_content
    # the state lived in MAIL_DB
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM emails").fetchone()[0] == 16
        assert conn.execute("SELECT read FROM emails WHERE id = 'e-08'").fetchone()[0] == 1
    assert seed["emails"][7]["id"] == "e-08" and seed["emails"][7]["read"] is False
    assert data["emails"][7]["read"] is True
