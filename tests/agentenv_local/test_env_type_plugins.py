"""Env types and env providers come through entry points (`agentenv_local.env_types`, `.env_providers`).

Ours are read from the installed distribution's metadata like any plugin's; the fake plugin
(tests/fixtures/fake_plugin, installed for real with pip --target) adds the env type `fake_recorded`, whose
servers run through its env provider `fake-recording`, which wraps the built-in one and marks the record.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import ClassVar, Literal

import pytest
from kits.env_deploy import EXAMPLES, call_tool, on_hub, pid_alive, put_env, result_text
from test_plugins import FAKE_DIST, FIXTURE, agentenv, contributions, pip_install_target, plugin_json

from agentenv_local import plugins
from agentenv_local.errors import ValidationError
from agentenv_local.hosting.envs import parse_env
from agentenv_local.hosting.envs.env_types import EnvType, McpServerType
from agentenv_local.hosting.envs.instance import DeployError
from agentenv_local.hosting.envs.providers import EnvProvider
from agentenv_local.hosting.envs.records import McpServerEnv
from agentenv_local.plugins import PluginRegistry

BUILTIN_TYPES = {"mcp_server": "agentenv_local.hosting.envs.env_types:McpServerType",
                 "multi": "agentenv_local.hosting.envs.env_types:MultiType"}
BUILTIN_PROVIDERS = {"in_hub": "agentenv_local.hosting.envs.in_hub:InHubProvider",
                     "subprocess": "agentenv_local.hosting.envs.subprocesses:SubprocessProvider",
                     "container": "agentenv_local.hosting.envs.containers:ContainerProvider",
                     "url": "agentenv_local.hosting.envs.providers:UrlProvider"}


@pytest.fixture(scope="module")
def env_plugin_site(tmp_path_factory) -> Path:
    site = tmp_path_factory.mktemp("fake-env-plugin") / "site"
    pip_install_target(FIXTURE, site)
    return site


@pytest.fixture
def with_fake_plugin(env_plugin_site, monkeypatch):
    """The fake plugin importable and a fresh registry that discovers it; both undone afterwards."""
    saved_path, saved_modules = list(sys.path), set(sys.modules)
    sys.path.insert(0, str(env_plugin_site))
    importlib.invalidate_caches()
    monkeypatch.setattr(plugins, "_registry", PluginRegistry())
    yield
    sys.path[:] = saved_path
    for name in set(sys.modules) - saved_modules:
        if name.startswith("agentenv_fake_plugin"):
            del sys.modules[name]
    importlib.invalidate_caches()


@pytest.fixture
def session(tmp_path):
    from kits.env_deploy import open_hub_session

    with open_hub_session(tmp_path) as s:
        yield s


# -- the built-ins are entry points ----------------------------------------------------------

def test_builtin_env_types_and_providers_are_entry_points_of_our_distribution():
    reg = PluginRegistry()
    for group, expected in (("env_types", BUILTIN_TYPES), ("env_providers", BUILTIN_PROVIDERS)):
        found = reg.load_all(group)
        assert {name: found[name].value for name in expected if name in found} == expected
        assert all(found[name].builtin and found[name].status == "active" for name in expected), found
    assert reg.get("env_types", "mcp_server").record is McpServerEnv


def test_an_unknown_type_is_refused_with_the_registered_ones():
    registered = sorted(PluginRegistry().available("env_types"))
    assert {"mcp_server", "multi"} <= set(registered)
    with pytest.raises(ValidationError) as info:
        parse_env({"type": "mcp", "module": "server.py:X"}, "envs/x/env.toml")
    assert info.value.message == ("envs/x/env.toml: type 'mcp' is not an env type this version deploys; "
                                  f"use one of {', '.join(registered)}")
    with pytest.raises(ValidationError, match="type 3 is not an env type"):
        parse_env({"type": 3}, "envs/x/env.toml")


def test_a_record_problem_is_named_by_its_field():
    with pytest.raises(ValidationError) as info:
        parse_env({"module": "server.py:X", "modle": 1}, "envs/x/env.toml")
    assert info.value.problems == ["envs/x/env.toml: modle: unknown key (typo?)"]
    with pytest.raises(ValidationError) as info:
        parse_env({"type": "multi", "mcp_server_envs": [], "gateway_mode": "fast"}, "envs/o/env.toml")
    assert [p.split(":")[1].strip() for p in info.value.problems] == ["mcp_server_envs", "gateway_mode"]


# -- the groups' validators ---------------------------------------------------------------------

class OtherEnv(McpServerEnv):
    type: Literal["other"] = "other"  # type: ignore[assignment]  # a plugin's record narrows `type`


class Other(McpServerType):
    name = "other"
    record = OtherEnv


def test_env_type_validator_names_what_is_wrong():
    def problem(name: str, obj: object) -> str | None:
        return plugins._invalid("env_types", name, obj)

    assert problem("other", Other) is None
    assert problem("mcp_server", McpServerType) is None
    assert "subclass of agentenv_local.hosting.envs.env_types.EnvType" in problem("other", object)
    assert problem("renamed", Other) == "its name is 'other', but it is registered as 'renamed'"

    class NoRecord(EnvType):
        name: ClassVar[str] = "bare"
        record = dict  # type: ignore[assignment]  # the wrong kind on purpose

    assert "record must be a subclass of McpServerEnv or MultiEnv" in problem("bare", NoRecord)

    class WrongLiteral(McpServerType):
        name = "wrong"
        record = McpServerEnv  # its type stays "mcp_server"

    assert problem("wrong", WrongLiteral) == "its record's `type` field must be Literal['wrong']"


def test_env_provider_validator_names_what_is_wrong():
    class Mine(EnvProvider):
        name = "mine"

        async def start(self, inst, child_name, where, server):
            return "http://127.0.0.1:1/mcp", {"name": child_name, "kind": "url"}

    assert plugins._invalid("env_providers", "mine", Mine) is None
    assert "subclass of agentenv_local.hosting.envs.providers.EnvProvider" in plugins._invalid(
        "env_providers", "mine", object)
    assert plugins._invalid("env_providers", "yours", Mine) == "its name is 'mine', but it is registered as 'yours'"


# -- a plugin's env type and provider ----------------------------------------------------------

def test_plugin_list_shows_env_types_and_providers(env_plugin_site):
    report = plugin_json(env_plugin_site)
    mine = contributions(report, FAKE_DIST)
    assert mine[("env_types", "fake_recorded")]["status"] == "active"
    assert mine[("env_providers", "fake-recording")]["status"] == "active"
    builtins = contributions(report, "agentenv-local")
    for group, names in (("env_types", BUILTIN_TYPES), ("env_providers", BUILTIN_PROVIDERS)):
        for name in names:
            assert builtins[(group, name)]["status"] == "active" and builtins[(group, name)]["builtin"]
    table = agentenv("plugin", "list", sites=(env_plugin_site,))
    line = next(row for row in table.stdout.splitlines() if " fake-recording " in row)
    assert line.split()[:5] == [FAKE_DIST, "0.3.1", "env_providers", "fake-recording", "active"]


def test_a_plugin_env_type_deploys_through_the_plugin_provider(with_fake_plugin, session):
    with pytest.raises(ValidationError) as info:
        parse_env({"type": "nope"}, "envs/x/env.toml")
    listed = info.value.message.split("use one of ")[1].split(", ")
    assert {"fake_recorded", "mcp_server", "multi"} <= set(listed) and listed == sorted(listed)
    put_env(session.store, "rec", EXAMPLES / "echo", type="fake_recorded", module="server.py:Echo",
            run_as="subprocess", environment_name="echo")
    assert session.store.documents.get("envs", "rec")["body"]["type"] == "fake_recorded"
    envs = session.hub.envs
    record = on_hub(session, envs.deploy("rec"))
    [child] = record["children"]
    assert (child["kind"], child["recorded_by"], child["wraps"]) == ("subprocess", "fake-recording", "subprocess")
    assert pid_alive(child["pid"])
    _names, result = call_tool(record["mcp_url"], "echo", {"text": "through a plugin"})
    assert result_text(result) == "through a plugin"
    on_hub(session, envs.teardown(record["instance_id"]))
    assert not pid_alive(child["pid"])  # the wrapper's stop reached the built-in one


def test_a_multi_env_runs_each_server_through_its_own_types_provider(with_fake_plugin, session):
    put_env(session.store, "rec-mail", EXAMPLES / "mail", type="fake_recorded", module="server.py:Mail",
            environment_name="mail")
    put_env(session.store, "crm", EXAMPLES / "crm", module="server.py:Crm", environment_name="crm",
            run_as="subprocess")
    session.store.documents.put("envs", "office", {"type": "multi", "mcp_server_envs": ["rec-mail", "crm"]})
    record = on_hub(session, session.hub.envs.deploy("office"))
    kinds = [(c["name"], c["kind"], c.get("recorded_by")) for c in record["children"]]
    assert kinds == [("mail", "in_process", "fake-recording"), ("crm", "subprocess", None)]
    on_hub(session, session.hub.envs.teardown(record["instance_id"]))
    assert not pid_alive(record["children"][1]["pid"])


class GhostEnv(McpServerEnv):
    type: Literal["ghost"] = "ghost"  # type: ignore[assignment]  # a plugin's record narrows `type`


class Ghost(McpServerType):
    name = "ghost"
    record = GhostEnv

    def provider(self, server: McpServerEnv, where: str) -> str:
        return "nowhere"


def test_a_type_naming_a_missing_provider_fails_the_deploy_with_the_registered_ones(session, monkeypatch):
    reg = PluginRegistry()
    reg.register("env_types", "ghost", Ghost)
    monkeypatch.setattr(plugins, "_registry", reg)
    put_env(session.store, "ghost", EXAMPLES / "echo", type="ghost", module="server.py:Echo")
    with pytest.raises(DeployError) as info:
        on_hub(session, session.hub.envs.deploy("ghost"))
    registered = sorted(reg.available("env_providers"))
    assert set(BUILTIN_PROVIDERS) <= set(registered)
    assert info.value.message == ("env ghost: its env provider 'nowhere' is not available; "
                                  f"registered: {', '.join(registered)}")
    assert session.hub.envs.instances() == []


class SoloEnv(McpServerEnv):
    type: Literal["solo"] = "solo"  # type: ignore[assignment]  # a plugin's record narrows `type`


class Solo(McpServerType):
    name = "solo"
    record = SoloEnv

    def topology(self, env: McpServerEnv) -> str:  # always its one server on its own, whatever the record says
        return "server"


class Sideways(Solo):
    def topology(self, env: McpServerEnv) -> str:
        return "sideways"


def test_an_env_type_picks_the_topology_that_serves_it(session, monkeypatch):
    reg = PluginRegistry()
    reg.register("env_types", "solo", Solo)
    monkeypatch.setattr(plugins, "_registry", reg)
    put_env(session.store, "solo", EXAMPLES / "echo", type="solo", module="server.py:Echo", environment_name="echo")
    record = on_hub(session, session.hub.envs.deploy("solo"))
    assert record["env_provider_type"] == "server" and record["gateway_url"] is None
    _names, result = call_tool(record["mcp_url"], "echo", {"text": "on its own"})
    assert result_text(result) == "on its own"
    on_hub(session, session.hub.envs.teardown(record["instance_id"]))

    reg.register("env_types", "solo", Sideways)
    with pytest.raises(DeployError, match="asks for the topology 'sideways'; there are 'gateway' and 'server'"):
        on_hub(session, session.hub.envs.deploy("solo"))
