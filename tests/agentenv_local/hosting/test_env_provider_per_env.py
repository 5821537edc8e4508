"""`env_provider_type` may name a plugin's env provider (the seam issue 19's `one_process` example uses): the env is
served behind a gateway, and every one of its servers (a multi env's too) starts through that provider instead of
the one each server's type picks. Built-in providers and unknown names are refused when the env is read."""

from __future__ import annotations

from typing import Any

import pytest
from kits.env_deploy import EXAMPLES, call_tool, on_hub, pid_alive, put_env, result_text

from agentenv_local import plugins
from agentenv_local.errors import ValidationError
from agentenv_local.hosting.envs import parse_env
from agentenv_local.hosting.envs.env_types import McpServerType
from agentenv_local.hosting.envs.instance import Instance
from agentenv_local.hosting.envs.providers import EnvProvider, make_provider
from agentenv_local.hosting.envs.records import McpServerEnv
from agentenv_local.plugins import PluginRegistry


class EveryServer(EnvProvider):
    """Runs each server as the built-in `subprocess` provider would, and says so in the record."""

    name = "every-server"
    started: list[str] = []

    def __init__(self, host: Any) -> None:
        super().__init__(host)
        self.inner = make_provider("subprocess", host, "test")

    async def start(self, inst: Instance, child_name: str, where: str, server: McpServerEnv) -> tuple[Any, dict]:
        EveryServer.started.append(child_name)
        target, info = await self.inner.start(inst, child_name, where, server)
        return target, {**info, "by": self.name}

    async def stop(self, inst: Instance) -> None:
        await self.inner.stop(inst)


@pytest.fixture
def registry(monkeypatch) -> PluginRegistry:
    reg = PluginRegistry()
    reg.register("env_providers", "every-server", EveryServer)
    monkeypatch.setattr(plugins, "_registry", reg)
    EveryServer.started = []
    return reg


@pytest.fixture
def session(tmp_path):
    from kits.env_deploy import open_hub_session

    with open_hub_session(tmp_path) as s:
        yield s


def test_a_multi_env_naming_a_provider_runs_every_server_through_it_behind_a_gateway(registry, session):
    put_env(session.store, "echo", EXAMPLES / "echo", module="server.py:Echo", environment_name="echo")  # in the hub
    put_env(session.store, "notes", EXAMPLES / "notes", module="server.py:Notes", environment_name="notes")
    session.store.documents.put("envs", "pair", {"type": "multi", "mcp_server_envs": ["echo", "notes"],
                                                 "env_provider_type": "every-server"})
    record = on_hub(session, session.hub.envs.deploy("pair"))
    assert record["gateway_url"] is not None and record["env_provider_type"] == "gateway"
    assert [(c["name"], c["kind"], c["by"]) for c in record["children"]] == [
        ("echo", "subprocess", "every-server"), ("notes", "subprocess", "every-server")]
    assert EveryServer.started == ["echo", "notes"]
    _names, result = call_tool(record["mcp_url"], "echo", {"text": "through the env's own provider"})
    assert result_text(result) == "through the env's own provider"
    on_hub(session, session.hub.envs.teardown(record["instance_id"]))
    assert not any(pid_alive(c["pid"]) for c in record["children"])


def test_a_single_server_env_may_name_one_too_and_the_default_is_unchanged(registry, session):
    put_env(session.store, "echo", EXAMPLES / "echo", module="server.py:Echo", environment_name="echo",
            env_provider_type="every-server")
    record = on_hub(session, session.hub.envs.deploy("echo"))
    assert [(c["kind"], c["by"]) for c in record["children"]] == [("subprocess", "every-server")]
    on_hub(session, session.hub.envs.teardown(record["instance_id"]))
    put_env(session.store, "plain", EXAMPLES / "echo", module="server.py:Echo", environment_name="echo")
    record = on_hub(session, session.hub.envs.deploy("plain"))
    assert [c["kind"] for c in record["children"]] == ["in_process"] and EveryServer.started == ["echo"]
    on_hub(session, session.hub.envs.teardown(record["instance_id"]))


def test_what_env_provider_type_may_name(registry):
    where = "envs/x/env.toml"
    assert parse_env({"module": "server.py:X", "env_provider_type": "server"}, where).env_provider_type == "server"
    assert parse_env({"type": "multi", "mcp_server_envs": ["a"], "env_provider_type": "every-server"},
                     where).env_provider_type == "every-server"
    assert McpServerType().servers_provider(parse_env({"module": "server.py:X"}, where)) is None
    cases = {
        "nowhere": "env_provider_type: 'nowhere' is neither a topology (gateway, server) nor an installed env "
                   "provider; plugins' env providers: every-server (see `agentenv plugin list`)",
        "subprocess": "env_provider_type: 'subprocess' is a built-in env provider, picked per server from its keys "
                      "(module, run_as, command, url, image); env_provider_type names a topology or a plugin's "
                      "env provider",
    }
    for value, problem in cases.items():
        with pytest.raises(ValidationError) as info:
            parse_env({"module": "server.py:X", "env_provider_type": value}, where)
        assert info.value.problems == [f"{where}: {problem}"]
    with pytest.raises(ValidationError) as info:
        parse_env({"type": "multi", "mcp_server_envs": ["a"], "env_provider_type": "server"}, where)
    assert info.value.problems == [f"{where}: env_provider_type: 'server' is not a topology of this env type; "
                                   "use one of gateway"]
