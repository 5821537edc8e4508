"""Deploying envs in a hub: in-process and subprocess module envs, a multi env, teardown, failures."""

from __future__ import annotations

import httpx2
import pytest
from kits.data_plane import rpc
from kits.env_deploy import (
    EXAMPLES,
    admin,
    call_tool,
    on_hub,
    pid_alive,
    put_env,
    result_text,
    seed,
)


def test_in_process_echo_deploys_serves_and_tears_down(session, tmp_path):
    put_env(session.store, "echo", EXAMPLES / "echo", module="server.py:Echo", environment_name="echo")
    envs = session.hub.envs
    # not pooled: a pooled instance's folder stays for the next deploy (tests/.../test_env_pool.py)
    record = on_hub(session, envs.deploy("echo", pool=False))
    assert record["instance_id"].startswith("envi-") and len(record["instance_id"]) == 17
    assert record["mcp_url"] == record["gateway_url"] + "/mcp"
    assert record["gateway_url"].startswith("http://127.0.0.1:")
    assert record["children"] == [{"name": "echo", "kind": "in_process"}]
    assert record["environment_card"]["name"] == "echo"
    assert record["env_version"] == 1 and record["gateway_mode"] == "performance"
    folder = session.paths.state_dir / "envs" / record["instance_id"]
    assert (folder / "echo" / "server.py").is_file()

    names, result = call_tool(record["mcp_url"], "echo", {"text": "hi there"})
    assert "echo" in names and "call_count" not in names
    assert result_text(result) == "hi there"
    stored = session.store.records.get("env_instances", record["instance_id"])["body"]
    assert stored["status"] == "running"
    assert [i["instance_id"] for i in envs.instances("running")] == [record["instance_id"]]
    session.store.events.flush()
    events = session.store.events.query(kinds=["env.tool_call", "env.tool_call_result"])
    assert [e["kind"] for e in events] == ["env.tool_call", "env.tool_call_result"]
    assert all(e["body"]["instance_id"] == record["instance_id"] for e in events)

    done = on_hub(session, envs.teardown(record["instance_id"]))
    assert done["status"] == "terminated"
    assert not folder.exists()
    assert session.store.records.get("env_instances", record["instance_id"])["body"]["status"] == "terminated"
    with pytest.raises(httpx2.HTTPError):
        httpx2.get(record["gateway_url"] + "/state", timeout=2)
    again = on_hub(session, envs.teardown(record["instance_id"]))  # idempotent
    assert again["status"] == "terminated"


def test_subprocess_echo_leaves_no_process(session):
    put_env(session.store, "echo-sub", EXAMPLES / "echo", module="server.py:Echo", run_as="subprocess",
            environment_name="echo")
    record = on_hub(session, session.hub.envs.deploy("echo-sub"))
    [child] = record["children"]
    assert child["kind"] == "subprocess" and child["pid"] and child["url"].startswith("http://127.0.0.1:")
    assert pid_alive(child["pid"])
    _names, result = call_tool(record["mcp_url"], "echo", {"text": "from a subprocess"})
    assert result_text(result) == "from a subprocess"
    on_hub(session, session.hub.envs.teardown(record["instance_id"]))
    assert not pid_alive(child["pid"])
    assert not (session.paths.state_dir / "envs" / record["instance_id"]).exists()


def test_multi_env_mail_and_crm(session):
    put_env(session.store, "mail", EXAMPLES / "mail", module="server.py:Mail", environment_name="mail")
    put_env(session.store, "crm", EXAMPLES / "crm", module="server.py:Crm", environment_name="crm",
            run_as="subprocess")
    session.store.documents.put("envs", "office", {"type": "multi", "name": "office",
                                                   "mcp_server_envs": [{"env": "mail", "version": 1}, "crm"]})
    record = on_hub(session, session.hub.envs.deploy("office", gateway_mode="consistent"))
    assert record["mcp_server_name"] == "office" and record["gateway_mode"] == "consistent"
    assert [(c["name"], c["kind"]) for c in record["children"]] == [("mail", "in_process"), ("crm", "subprocess")]
    children = [c["name"] for c in record["environment_card"]["children_environments"]]
    assert children == ["mail", "crm"]
    for name in ("mail", "crm"):
        answer = rpc(f"{record['gateway_url']}/svc/mcp-{name}/agentenv", "data/add",
                     {"parts": [{"kind": "data", "data": seed(name)}]}, headers=admin(session, record))
        assert answer.get("result") == {}, answer
    state = httpx2.get(record["gateway_url"] + "/state", timeout=10).json()
    tools = {s["name"]: [t["name"] for t in s["tools"]] for s in state["mcp_servers"]}
    assert set(tools) == {"mail", "crm"} and tools["mail"] and tools["crm"]
    names, result = call_tool(record["mcp_url"], "search_emails", {"query": "pipeline"})
    assert set(tools["crm"]) <= set(names)
    assert "Pipeline review Friday" in result_text(result)
    pid = record["children"][1]["pid"]
    on_hub(session, session.hub.envs.teardown(record["instance_id"]))
    assert not pid_alive(pid)


def test_child_that_exits_at_start_fails_with_its_output(session, tmp_path):
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "server.py").write_text("import sys\nprint('cannot open the widget database', flush=True)\nsys.exit(3)\n")
    put_env(session.store, "broken", folder, command=["python", "server.py"])
    from agentenv_local.hosting.envs.manager import DeployError

    with pytest.raises(DeployError) as info:
        on_hub(session, session.hub.envs.deploy("broken"))
    assert "exited with code 3" in info.value.message
    assert "cannot open the widget database" in info.value.message
    assert not list((session.paths.state_dir / "envs").glob("envi-*"))
    assert session.hub.envs.instances("running") == []


def test_image_env_is_refused(session):
    session.store.documents.put("envs", "boxed", {"type": "mcp_server", "image": "example/mcp:1",
                                                  "environment_name": "boxed"})
    from agentenv_local.hosting.envs.manager import DeployError

    with pytest.raises(DeployError, match="container images come with the Podman sandboxes"):
        on_hub(session, session.hub.envs.deploy("boxed"))


def test_unknown_env_is_not_found(session):
    from agentenv_local.errors import NotFoundError

    with pytest.raises(NotFoundError, match="not in the store"):
        on_hub(session, session.hub.envs.deploy("nope"))


def test_command_env_gets_its_port_and_name_and_url_env_is_used_as_is(session):
    put_env(session.store, "echo-cmd", EXAMPLES / "echo",
            command=["python", "-m", "agentenv_local.env", "server.py:Echo"], environment_name="shout")
    record = on_hub(session, session.hub.envs.deploy("echo-cmd"))
    [child] = record["children"]
    assert child["kind"] == "subprocess" and child["name"] == "shout"
    card = httpx2.get(child["url"].removesuffix("/mcp") + "/.well-known/agent-env.json", timeout=10).json()
    assert card["name"] == "shout"  # ENVIRONMENT_NAME reached the server
    # the running server, deployed again as a url env
    session.store.documents.put("envs", "echo-url", {"type": "mcp_server", "url": child["url"],
                                                     "environment_name": "remote"})
    other = on_hub(session, session.hub.envs.deploy("echo-url"))
    assert other["children"] == [{"name": "remote", "kind": "url", "url": child["url"]}]
    _names, result = call_tool(other["mcp_url"], "echo", {"text": "twice removed"})
    assert result_text(result) == "twice removed"
    on_hub(session, session.hub.envs.teardown(other["instance_id"]))
    assert pid_alive(child["pid"])  # a url env's server is not ours to stop
    on_hub(session, session.hub.envs.teardown(record["instance_id"]))
    assert not pid_alive(child["pid"])


def test_clashing_multi_env_fails_naming_the_fix(session):
    put_env(session.store, "a", EXAMPLES / "echo", module="server.py:Echo", environment_name="a")
    put_env(session.store, "b", EXAMPLES / "echo", module="server.py:Echo", environment_name="b")
    session.store.documents.put("envs", "ab", {"type": "multi", "mcp_server_envs": ["a", "b"]})
    from agentenv_local.hosting.envs.manager import DeployError

    with pytest.raises(DeployError) as info:
        on_hub(session, session.hub.envs.deploy("ab"))
    assert "Duplicate tool name" in info.value.message and "prefix_tools" in (info.value.hint or "")
    session.store.documents.put("envs", "ab", {"type": "multi", "mcp_server_envs": ["a", "b"], "prefix_tools": True})
    record = on_hub(session, session.hub.envs.deploy("ab"))
    _names, result = call_tool(record["mcp_url"], "b_echo", {"text": "prefixed"})
    assert result_text(result) == "prefixed"
    on_hub(session, session.hub.envs.aclose())
    assert session.hub.envs.instances("running") == []


@pytest.mark.parametrize("run_as", ["in_process", "subprocess"])
def test_server_topology_serves_one_server_without_a_gateway(session, run_as):
    put_env(session.store, "solo", EXAMPLES / "echo", module="server.py:Echo", environment_name="echo",
            env_provider_type="server", run_as=run_as)
    envs = session.hub.envs
    record = on_hub(session, envs.deploy("solo"))
    assert record["env_provider_type"] == "server" and record["gateway_url"] is None
    card = record["environment_card"]
    assert card["name"] == "echo"  # the server's own card, with no gateway extensions or children
    assert not card.get("children_environments")
    assert not any("clock" in (e.get("uri") or "") for e in card["capabilities"].get("extensions") or [])
    _names, result = call_tool(record["mcp_url"], "echo", {"text": "no gateway"})
    assert result_text(result) == "no gateway"
    with httpx2.Client(timeout=10) as h:  # no gateway routes
        assert h.get(record["server_url"] + "/clock/time").status_code == 404
    with pytest.raises(Exception, match="no gateway"):
        on_hub(session, _bind(envs, record["instance_id"]))
    on_hub(session, envs.teardown(record["instance_id"]))
    assert envs.instance(record["instance_id"])["status"] == "terminated"


async def _bind(envs, instance_id):
    return envs.bind_role(instance_id, "admin")


def test_advance_clock_moves_a_frozen_clock_and_fires_what_came_due(session):
    """`envs.advance_clock` (the TUI's "advance" key): the clock moves, a due time trigger fires, the new clock is
    saved; an unknown instance, an unarmed clock and a bad amount are clear errors."""
    put_env(session.store, "echo", EXAMPLES / "echo", module="server.py:Echo", environment_name="echo")
    envs = session.hub.envs
    record = on_hub(session, envs.deploy("echo"))
    instance_id = record["instance_id"]
    with pytest.raises(Exception, match="cannot advance the clock") as unarmed:
        on_hub(session, envs.advance_clock(instance_id, 60))
    assert "armed" in str(unarmed.value)
    with httpx2.Client(base_url=record["gateway_url"], timeout=10, headers=admin(session, record)) as h:
        assert h.put("/clock/set-time", json={"virtual_time": "2025-03-10T09:00:00Z", "mode": "frozen"}).is_success
        r = h.post("/triggers/register", json={"triggers": [
            {"id": "an-hour-in", "when": {"type": "time", "at": "PT1H"},
             "actions": [{"type": "tool", "tool": "echo", "args": {"text": "an hour in"}}]}]})
        assert r.status_code == 200, r.text
        moved = on_hub(session, envs.advance_clock(instance_id, "PT30M"))
        assert moved["instance_id"] == instance_id and moved["virtual_time"].startswith("2025-03-10T09:30:00")
        assert h.get("/triggers/state").json()["triggers"][0]["status"] == "armed"
        on_hub(session, envs.advance_clock(instance_id, 1800))
        assert h.get("/triggers/state").json()["triggers"][0]["status"] == "fired"
        assert h.get("/clock/time").json()["virtual_time"].startswith("2025-03-10T10:00:00")
    from agentenv_local.gateway.clock import VirtualClock
    from agentenv_local.hosting.envs.manager import STATE

    saved = VirtualClock.from_dict(session.store.records.get(STATE, instance_id)["body"]["clock"])
    assert saved.state()["virtual_time"].startswith("2025-03-10T10:00:00")  # saved like every clock change
    with pytest.raises(Exception, match="cannot advance the clock"):
        on_hub(session, envs.advance_clock(instance_id, "soon"))
    with pytest.raises(Exception, match="not running in this hub"):
        on_hub(session, envs.advance_clock("envi-000000000000", 60))
    on_hub(session, envs.teardown(instance_id))
