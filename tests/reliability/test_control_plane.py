"""Issue 12, the gateway's control plane, over real HTTP: the admin token guards every write (RBAC, clock,
triggers, the data plane of the gateway and of the env servers it starts), the Host and Origin allow-lists hold on
the gateway (its fast path included), an env server and an agent server, oversize bodies get 413 and deep nesting
400, RBAC rules stay bounded, and an instance deployed with `control_plane_auth = false` behaves as the reference."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys

import httpx2
import pytest
from kits.data_plane import request
from kits.servers import ROOT, agentenv_exe, announced_subprocess, uvicorn_thread

NOTES = ROOT / "examples" / "envs" / "notes" / "server.py"
ECHO = ROOT / "examples" / "envs" / "echo" / "server.py"
EVIL = {"Host": "evil.example"}
SEED = {"parts": [{"kind": "data", "data": {"notes": [{"title": "keep me", "body": "b", "tags": []}]}}]}


@contextlib.contextmanager
def serving(**options):
    """A gateway over the notes env in-process (`notes`) and as a subprocess it starts (`sub`), served with the
    fast-path HTTP protocol as the hub serves it; yields (base URL, gateway)."""
    import uvicorn

    from agentenv_local.env import load_env
    from agentenv_local.env.serve import bind_socket
    from agentenv_local.gateway.children import ChildSpec
    from agentenv_local.gateway.fastpath import protocol_class
    from agentenv_local.gateway.server import Gateway

    gw = Gateway("rel", [ChildSpec("notes", load_env(NOTES)), ChildSpec("sub", str(NOTES))], prefix_tools=True,
                 **options)
    sock = bind_socket("127.0.0.1", 0)
    config = uvicorn.Config(gw.app(), lifespan="on", log_level="warning", access_log=False, http=protocol_class(gw))
    with uvicorn_thread(config, sockets=[sock]):
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", gw


@pytest.fixture(scope="module")
def gateway():
    with serving() as (base, gw):
        yield base, gw


def bearer(token):
    return {"Authorization": f"Bearer {token}"}


WRITES = [
    ("POST", "/tools/enable", {"role": "*", "tools": "*"}),
    ("POST", "/tools/disable", {"role": "*", "tools": "*"}),
    ("PUT", "/clock/set-time", {"virtual_time": "2030-01-01T00:00:00Z", "mode": "frozen"}),
    ("POST", "/clock/clear", {}),
    ("POST", "/triggers/register", {"triggers": [{"id": "t", "when": {"type": "time", "at": "PT1H"},
                                                  "actions": [{"type": "tool", "tool": "notes_list_notes"}]}]}),
    ("POST", "/triggers/remove", {"ids": ["armed"]}),
    ("POST", "/triggers/clear", {}),
    ("POST", "/svc/mcp-notes/agentenv", request("data/reset")),
    ("POST", "/svc/mcp-sub/agentenv", request("data/reset")),
]


def snapshot(base, gw):
    """What a refused write must leave as it was: rules, clock, triggers and both children's data."""
    with httpx2.Client(base_url=base, timeout=30, headers=bearer(gw.admin_token)) as h:
        data = {c: h.post(f"/svc/mcp-{c}/agentenv", json=request("data/get")).json() for c in ("notes", "sub")}
    return gw.access.rules, gw.clock.state(), gw.engine.state(), data


def prepare(base, gw):
    """Rules, an armed clock, a trigger and a note in each child, set with the admin token."""
    with httpx2.Client(base_url=base, timeout=30, headers=bearer(gw.admin_token)) as h:
        assert h.post("/tools/enable", json={"role": "*", "tools": "*"}).status_code == 200  # one rule: all allowed
        assert h.post("/tools/disable", json={"role": "alice", "tools": ["notes_delete_note"]}).status_code == 200
        r = h.put("/clock/set-time", json={"virtual_time": "2025-01-01T00:00:00Z", "mode": "frozen"})
        assert r.status_code == 200, r.text
        r = h.post("/triggers/register", json={"triggers": [
            {"id": "armed", "when": {"type": "time", "at": "PT2H"},
             "actions": [{"type": "tool", "tool": "notes_list_notes"}]}]})
        assert r.status_code == 200, r.text
        for child in ("notes", "sub"):
            h.post(f"/svc/mcp-{child}/agentenv", json=request("data/reset"))
            assert h.post(f"/svc/mcp-{child}/agentenv", json=request("data/add", SEED)).json()["result"] == {}


def test_every_write_is_refused_without_the_admin_token_and_changes_nothing(gateway):
    base, gw = gateway
    prepare(base, gw)
    before = snapshot(base, gw)
    role_token = gw.access.bind_token("manager")
    try:
        for creds in ({}, bearer("not-the-token"), bearer(role_token), {"AgentEnv-Role": "manager"}):
            with httpx2.Client(base_url=base, timeout=30, headers=creds) as h:
                for method, path, body in WRITES:
                    r = h.request(method, path, json=body)
                    assert r.status_code == 401, (creds, path, r.status_code, r.text)
                    assert "admin token" in r.json()["error"]
                assert h.post("/agentenv", json=request("data/reset")).status_code == 401  # the env-level data plane
        assert snapshot(base, gw) == before
    finally:
        gw.access.unbind_token("manager")


def test_the_admin_token_is_allowed_every_write(gateway):
    base, gw = gateway
    prepare(base, gw)
    with httpx2.Client(base_url=base, timeout=30, headers=bearer(gw.admin_token)) as h:
        for method, path, body in WRITES:
            r = h.request(method, path, json=body)
            assert r.status_code == 200, (path, r.text)
    assert gw.access.rules == {"*": {"*": True}} and not gw.clock.armed
    assert gw.engine.state()["triggers"] == []


def test_the_data_plane_of_an_env_server_the_gateway_started_needs_the_token(gateway):
    base, gw = gateway
    prepare(base, gw)
    child = next(c for c in gw.children if c.name == "sub")
    assert child.base and child.proc is not None  # a subprocess on loopback, reachable past the gateway
    r = httpx2.post(child.base + "/agentenv", json=request("data/reset"), timeout=30)
    assert r.status_code == 401 and "admin token" in r.json()["error"]["message"]
    got = httpx2.post(child.base + "/agentenv", json=request("data/get"), headers=bearer(gw.admin_token), timeout=30)
    assert "keep me" in got.text  # not reset


def test_a_role_cannot_re_enable_its_own_disabled_tool(gateway):
    base, gw = gateway
    prepare(base, gw)
    alice = {"AgentEnv-Role": "alice"}
    with httpx2.Client(base_url=base, timeout=30, headers=alice) as h:
        assert h.post("/tools/enable", json={"role": "alice", "tools": ["notes_delete_note"]}).status_code == 401
        r = h.post("/step", json={"action": "call_tool", "tool_name": "notes_delete_note", "arguments": {"note_id": 1}})
    assert r.status_code == 403
    assert gw.access.is_disabled("alice", "notes_delete_note")


def test_an_unauthenticated_client_cannot_change_a_token_bound_roles_rules(gateway):
    base, gw = gateway
    prepare(base, gw)
    admin = bearer(gw.admin_token)
    with httpx2.Client(base_url=base, timeout=30) as h:
        assert h.post("/tools/disable", json={"role": "*", "tools": ["notes_delete_note"]}, headers=admin).is_success
        assert h.post("/tools/enable", json={"role": "manager", "tools": ["notes_delete_note"]},
                      headers=admin).is_success
        token = gw.access.bind_token("manager")
        try:
            rules = gw.access.rules
            for body in ({"role": "manager", "tools": "*"}, {"role": "default", "tools": ["notes_delete_note"]},
                         {"role": "*", "tools": "*"}):
                assert h.post("/tools/enable", json=body).status_code == 401
                assert h.post("/tools/disable", json=body, headers={"AgentEnv-Role": "manager"}).status_code == 401
            assert gw.access.rules == rules
            call = {"action": "call_tool", "tool_name": "notes_list_notes", "arguments": {}}
            assert h.post("/step", json={**call, "tool_name": "notes_delete_note", "arguments": {"note_id": 99}}
                          ).status_code == 403  # a default caller still may not
            assert h.post("/step", json=call, headers={"AgentEnv-Role": "manager"}).status_code == 401
            assert h.post("/step", json=call, headers=bearer(token)).status_code == 200  # its own token
            # the control plane acts on behalf of a role it names (the reference's role header, with the token)
            r = h.post("/step", json={"action": "list_tools"}, headers={**admin, "AgentEnv-Role": "manager"})
            assert "notes_delete_note" in [t["name"] for t in r.json()["tools"]]
        finally:
            gw.access.unbind_token("manager")


READS = ["/state", "/trajectory", "/changes", "/triggers/state", "/clock/state", "/.well-known/agent-env.json"]


def test_a_foreign_host_is_refused_on_every_read_and_on_the_fast_path(gateway):
    base, _gw = gateway
    with httpx2.Client(base_url=base, timeout=30) as h:
        for path in READS:
            r = h.get(path, headers=EVIL)
            assert r.status_code == 421, (path, r.status_code)
            assert "evil.example" in r.json()["error"] and "allowed_hosts" in r.json()["hint"]
            assert h.get(path).status_code in (200, 404), path  # 404: /changes without a changelog
        for host in ("localhost", f"127.0.0.1:{base.rsplit(':', 1)[1]}", "[::1]:1", "10.0.2.2:5"):
            assert h.get("/state", headers={"Host": host}).status_code == 200, host
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        version = str(MODERN_PROTOCOL_VERSIONS[-1])
        modern = {"Mcp-Protocol-Version": version, "Mcp-Method": "tools/list", "Accept": "application/json",
                  "Content-Type": "application/json"}
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientCapabilities": {}}}}
        ok = h.post("/mcp", json=body, headers=modern)
        refused = h.post("/mcp", json=body, headers={**modern, **EVIL})
    assert refused.status_code == 421 and ok.status_code == 200 and ok.json()["result"]["tools"]


def test_origin_null_and_foreign_origins_are_refused(gateway):
    base, gw = gateway
    admin = bearer(gw.admin_token)
    step = {"action": "list_tools"}
    with httpx2.Client(base_url=base, timeout=30) as h:
        for origin in ("null", "http://evil.example", "http://127.0.0.1.evil.example", "file://", "garbage"):
            assert h.post("/step", json=step, headers={"Origin": origin}).status_code == 403, origin
            r = h.post("/tools/disable", json={"role": "*", "tools": "*"}, headers={**admin, "Origin": origin})
            assert r.status_code == 403 and "Origin" in r.json()["error"], origin
        assert h.post("/step", json=step, headers={"Origin": base}).status_code == 200
        assert h.post("/step", json=step).status_code == 200  # no Origin: not a browser


def test_an_oversize_body_gets_413_and_the_server_still_answers(gateway):
    base, gw = gateway
    big = b"x" * (50 * 1024 * 1024)
    with httpx2.Client(base_url=base, timeout=60) as h:
        for path in ("/mcp", "/step", "/tools/disable"):
            r = h.post(path, content=big, headers={"content-type": "application/json", **bearer(gw.admin_token)})
            assert r.status_code == 413, path
            assert "larger than" in r.json()["error"] and r.json()["limit"] == 4 * 1024 * 1024

        def chunks():  # no Content-Length: counted as it streams
            for _ in range(50):
                yield b"y" * (1024 * 1024)

        r = h.post("/step", content=chunks(), headers={"content-type": "application/json"})
        assert r.status_code == 413
    with httpx2.Client(base_url=base, timeout=30) as h:
        assert h.get("/state").status_code == 200


def test_deep_nesting_is_a_400_not_a_500(gateway):
    base, gw = gateway
    deep = "[" * 100_000 + "]" * 100_000
    with httpx2.Client(base_url=base, timeout=60, headers=bearer(gw.admin_token)) as h:
        step = '{"action": "call_tool", "tool_name": "notes_list_notes", "arguments": {"a": ' + deep + "}}"
        for path, body in (("/step", step), ("/tools/disable", deep), ("/triggers/register", deep)):
            r = h.post(path, content=body, headers={"content-type": "application/json"})
            assert r.status_code == 400, (path, r.status_code)
        r = h.post("/agentenv", content=deep, headers={"content-type": "application/json"})
        assert r.status_code == 200 and r.json()["error"]["code"] == -32700
        r = h.post("/mcp", content='{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": ' + deep + "}",
                   headers={"content-type": "application/json", "accept": "application/json, text/event-stream"})
        assert r.status_code == 400 and r.json()["error"]["code"] == -32700  # the mcp stack's own bound
        r = h.post("/svc/mcp-sub/agentenv", content=deep, headers={"content-type": "application/json"})
        assert r.status_code == 200 and r.json()["error"]["code"] == -32700
        assert h.get("/state").status_code == 200


def test_rbac_rules_stay_bounded(gateway):
    base, gw = gateway
    from agentenv_local.gateway.rbac import MAX_NAME_CHARS, MAX_RULES

    admin = bearer(gw.admin_token)
    with httpx2.Client(base_url=base, timeout=60, headers=admin) as h:
        h.post("/tools/enable", json={"role": "*", "tools": "*"})
        huge = h.post("/tools/disable", content=json.dumps({"role": "x", "tools": ["n" * (50 * 1024 * 1024)]}),
                      headers={"content-type": "application/json"})
        assert huge.status_code == 413
        long = h.post("/tools/disable", json={"role": "x", "tools": ["n" * (MAX_NAME_CHARS + 1)]})
        assert long.status_code == 400 and str(MAX_NAME_CHARS) in long.json()["error"]
        many = h.post("/tools/disable", json={"role": "x", "tools": [f"t{i}" for i in range(MAX_RULES + 1)]})
        assert many.status_code == 413
        state = h.get("/state")
    assert gw.access.rules == {"*": {"*": False}}  # nothing of the refused requests was kept
    assert len(state.content) < 100_000


def test_an_opted_in_gateway_serves_the_reference_open_control_plane():
    with serving(control_plane_auth=False) as (base, gw):
        assert gw.admin_token is None
        with httpx2.Client(base_url=base, timeout=30) as h:
            assert h.post("/tools/disable", json={"role": "*", "tools": "*"}).json()["disabled"] == ["*"]
            assert h.put("/clock/set-time", json={"virtual_time": "2030-01-01T00:00:00Z",
                                                  "mode": "frozen"}).status_code == 200
            assert h.post("/triggers/clear").status_code == 200
            assert h.post("/svc/mcp-sub/agentenv", json=request("data/reset")).json()["result"] == {}
            assert h.get("/state", headers=EVIL).status_code == 421  # Host and Origin checks stay
        sub = next(c for c in gw.children if c.name == "sub")
        assert httpx2.post(sub.base + "/agentenv", json=request("data/get"), timeout=30).status_code == 200


def test_env_and_agent_servers_refuse_a_foreign_host_and_origin(tmp_path):
    env_argv = [sys.executable, "-m", "agentenv_local.env", str(ECHO), "--port", "0"]
    agent_argv = [sys.executable, "-m", "agentenv_local.agents", "scripted", "--port", "0"]
    with announced_subprocess(env_argv, what="env server") as (env_base, _), \
            announced_subprocess(agent_argv, what="agent server") as (agent_base, _):
        for base, card in ((env_base, "/.well-known/agent-env.json"), (agent_base, "/.well-known/agent-card.json")):
            assert httpx2.get(base + card, timeout=30).status_code == 200
            r = httpx2.get(base + card, headers=EVIL, timeout=30)
            assert r.status_code == 421 and "evil.example" in r.json()["error"], base
            assert httpx2.get(base + card, headers={"Origin": "null"}, timeout=30).status_code == 403
            big = httpx2.post(base + ("/mcp" if base == env_base else "/a2a"), content=b"x" * (8 * 1024 * 1024),
                              headers={"content-type": "application/json"}, timeout=60)
            assert big.status_code == 413
        deep = "[" * 100_000 + "]" * 100_000
        r = httpx2.post(agent_base + "/a2a", content=deep, headers={"content-type": "application/json"}, timeout=30)
        assert r.status_code == 200 and r.json()["error"]["code"] == -32700
        # a standalone env server (no token given) keeps the reference's open data plane
        assert httpx2.post(env_base + "/agentenv", json=request("data/get"), timeout=30).status_code == 200


# --- a deployed instance: the hub holds the token, the CLI shows it on request only ---------------------------------

def test_a_deployed_instance_keeps_its_token_out_of_records_events_and_listings(tmp_path):
    from kits.env_deploy import hub_session, on_hub, put_env

    session = hub_session(tmp_path)
    try:
        put_env(session.store, "notes", NOTES.parent, module="server.py:Notes", environment_name="notes",
                run_as="subprocess")
        put_env(session.store, "open", NOTES.parent, module="server.py:Notes", environment_name="open",
                control_plane_auth=False)
        envs = session.hub.envs
        record = on_hub(session, envs.deploy("notes"))
        token = envs.admin_token(record["instance_id"])
        assert token and record["control_plane_auth"] is True
        base = record["gateway_url"]
        assert httpx2.post(base + "/tools/disable", json={"role": "*", "tools": "*"}, timeout=30).status_code == 401
        r = httpx2.post(base + "/tools/disable", json={"role": "a", "tools": ["x"]}, headers=bearer(token), timeout=30)
        assert r.status_code == 200
        child = record["children"][0]
        assert httpx2.post(child["url"].removesuffix("/mcp") + "/agentenv", json=request("data/reset"),
                           timeout=30).status_code == 401
        listed = subprocess.run([agentenv_exe(), "env", "instances", "--json"], cwd=tmp_path, capture_output=True,
                                text=True, timeout=60, check=False)
        shown = subprocess.run([agentenv_exe(), "env", "instances", record["instance_id"], "--admin-token"],
                               cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
        assert listed.returncode == 0 and record["instance_id"] in listed.stdout and token not in listed.stdout
        assert shown.returncode == 0 and shown.stdout.strip() == token
        events = json.dumps(session.store.events.query(), default=str)
        assert token not in events and token not in json.dumps(envs.instances(), default=str)
        opened = on_hub(session, envs.deploy("open"))
        assert opened["control_plane_auth"] is False and envs.admin_token(opened["instance_id"]) is None
        r = httpx2.post(opened["gateway_url"] + "/tools/disable", json={"role": "*", "tools": "*"}, timeout=30)
        assert r.status_code == 200  # the reference's open control plane, asked for in env.toml
    finally:
        session.close()


def test_the_docs_server_over_http_refuses_a_foreign_host(tmp_path):
    argv = [agentenv_exe(), "docs", "serve", "--http", "--port", "0"]
    with announced_subprocess(argv, what="docs server", cwd=tmp_path) as (url, _):
        base = url.removesuffix("/mcp")
        assert httpx2.get(base + "/ready", timeout=30).status_code == 200
        assert httpx2.get(base + "/ready", headers=EVIL, timeout=30).status_code == 421
        assert httpx2.get(base + "/ready", headers={"Origin": "null"}, timeout=30).status_code == 403
