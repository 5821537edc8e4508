"""A reference env folder (server.py on `agentenv_protocol`, no env.toml) is served in the hub when it can be,
as a subprocess otherwise, with the same answers either way (issue 16 item 1): the reference's own example
folders, deployed both ways in one real hub, answer the same tools/list, calls and env trajectory."""

from __future__ import annotations

from pathlib import Path

import pytest
from kits.env_deploy import call_tool, on_hub, pid_alive, put_env
from kits.reference_bundles import copy_reference_bundle

from agentenv_local.compat.reference_envs import LAUNCHER, SERVER_FILE
from agentenv_local.hosting.envs.reference_in_hub import in_hub_class

CALLS = {"echo-mcp": ("echo", [("echo", {"text": "said back"}), ("echo", {"text": ""})]),
         "mail-mcp": ("mail", [("search_emails", {"query": "invoice"}), ("search_emails", {"query": "nothing-here"})])}
COMMAND = ["python", "-m", LAUNCHER, SERVER_FILE]


@pytest.fixture
def session(tmp_path):
    from kits.env_deploy import open_hub_session

    with open_hub_session(tmp_path) as s:
        yield s


def _answers(session, env_id: str, calls: list) -> tuple[dict, dict]:
    record = on_hub(session, session.hub.envs.deploy(env_id))
    try:
        results = []
        for tool, args in calls:
            names, result = call_tool(record["mcp_url"], tool, args)
            results.append(result.model_dump(mode="json", by_alias=True, exclude_none=True))
        session.store.events.flush()
        events = [{k: v for k, v in e["body"].items() if k not in ("timestamp_utc", "instance_id", "session")}
                  for e in session.store.events.query(kinds=["env.tool_call", "env.tool_call_result"])
                  if e["body"].get("instance_id") == record["instance_id"]]
        answers = {"tools": names, "results": results, "events": events, "card": record["environment_card"]}
        return answers, record["children"][0]
    finally:
        on_hub(session, session.hub.envs.teardown(record["instance_id"]))


@pytest.mark.parametrize("name", sorted(CALLS))
def test_the_same_reference_env_in_the_hub_and_as_a_subprocess_answers_the_same(session, tmp_path, name):
    env_name, calls = CALLS[name]
    folder = copy_reference_bundle(name, tmp_path) / "envs" / env_name
    assert in_hub_class(folder) is not None
    put_env(session.store, f"{env_name}-hub", folder, command=COMMAND, environment_name=env_name)
    # env_vars keep it out of the hub (its environment is shared): the reference's path, a subprocess
    put_env(session.store, f"{env_name}-apart", folder, command=COMMAND, environment_name=env_name,
            env_vars={"KEEP_APART": "1"})

    in_hub, child = _answers(session, f"{env_name}-hub", calls)
    assert child == {"name": env_name, "kind": "in_process"}, child
    apart, child = _answers(session, f"{env_name}-apart", calls)
    assert child["kind"] == "subprocess" and not pid_alive(child["pid"]), child

    assert in_hub["events"] and len(in_hub["results"]) == len(calls)
    card_keys = ("name", "description", "tools")
    assert {k: in_hub["card"].get(k) for k in card_keys} == {k: apart["card"].get(k) for k in card_keys}
    for key in ("tools", "results", "events"):
        assert in_hub[key] == apart[key], key


def test_a_server_py_that_starts_its_server_at_import_stays_a_subprocess(tmp_path):
    folder = tmp_path / "env"
    folder.mkdir()
    body = ("from agentenv_protocol import AgentEnvEnvironment, tool\n\n"
            "class E(AgentEnvEnvironment):\n    @tool()\n    def t(self) -> str:\n        return 'x'\n\n")
    (folder / SERVER_FILE).write_text(body + "E().serve()\n")
    assert in_hub_class(folder) is None
    (folder / SERVER_FILE).write_text(body + "if __name__ == '__main__':\n    E().serve()\n")
    assert in_hub_class(folder) == "E"
    (folder / SERVER_FILE).write_text(body + "class F(AgentEnvEnvironment):\n    pass\n")
    assert in_hub_class(folder) is None  # which one to load is not ours to guess


def test_the_stand_in_serves_in_the_hub_only_under_its_own_name(session, tmp_path):
    """The hub registers the stand-in as `agentenv_protocol` (the real one is not installed in our venv)."""
    import sys
    from importlib import metadata

    from agentenv_local.compat.reference_envs import PROTOCOL_DISTRIBUTION

    folder = copy_reference_bundle("echo-mcp", tmp_path) / "envs" / "echo"
    put_env(session.store, "echo", folder, command=COMMAND)
    try:
        metadata.distribution(PROTOCOL_DISTRIBUTION)
        pytest.skip("the real agentenv_protocol is installed here")
    except metadata.PackageNotFoundError:
        pass
    _answers(session, "echo", [("echo", {"text": "x"})])
    assert Path(sys.modules["agentenv_protocol"].__file__).parent.parent.name == "shims"
