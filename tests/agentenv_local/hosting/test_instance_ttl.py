"""--ttl-seconds: an env or agent instance deployed with a TTL records expires_at_utc, and the hub's own sweep
(running on its loop) tears it down once that has passed; one without a TTL stays up. In-process hub, real
gateways and A2A agents; the console script for the options and their bounds."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone

import httpx2
import pytest
from kits.env_deploy import EXAMPLES, on_hub, put_env
from kits.hub import cli

from agentenv_local.errors import ValidationError
from agentenv_local.hosting.expiry import EXPIRED_REASON, sweep_expired


@pytest.fixture
def session(tmp_path):
    """An in-process hub with this test's own state (tmp_path/.agentenv, whatever lies above tmp_path)."""
    from kits.env_deploy import open_hub_session

    with open_hub_session(tmp_path, own_state=True) as s:
        yield s


def _stamp(record: dict) -> datetime:
    return datetime.fromisoformat(record["expires_at_utc"].replace("Z", "+00:00"))


def _wait_for(check, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return False


def test_the_sweep_tears_down_only_instances_past_their_ttl(session):
    put_env(session.store, "echo", EXAMPLES / "echo", module="server.py:Echo", environment_name="echo")
    envs, agents = session.hub.envs, session.hub.agents
    short = on_hub(session, envs.deploy("echo", ttl_seconds=60))
    forever = on_hub(session, envs.deploy("echo"))
    bot = on_hub(session, agents.deploy("scripted", ttl_seconds=120))
    assert short["ttl_seconds"] == 60 and "expires_at_utc" not in forever
    assert bot["ttl_seconds"] == 120 and _stamp(bot) > _stamp(short)
    with pytest.raises(ValidationError, match="ttl_seconds must be between 60 and 1209600"):
        on_hub(session, envs.deploy("echo", ttl_seconds=5))

    assert on_hub(session, sweep_expired(envs, agents)) == []  # nothing has run out yet
    later = _stamp(short) + timedelta(seconds=1)
    assert on_hub(session, sweep_expired(envs, agents, now=later)) == [short["instance_id"]]
    gone = session.store.records.get("env_instances", short["instance_id"])["body"]
    assert gone["status"] == "terminated" and gone["status_reason"] == EXPIRED_REASON
    with pytest.raises(httpx2.HTTPError):
        httpx2.get(short["gateway_url"] + "/state", timeout=2)
    much_later = datetime.now(timezone.utc) + timedelta(days=30)
    assert on_hub(session, sweep_expired(envs, agents, now=much_later)) == [bot["instance_id"]]
    assert [r["instance_id"] for r in envs.instances("running")] == [forever["instance_id"]]
    assert agents.instances("running") == []


def test_the_hubs_own_sweep_runs_on_its_loop(session):
    put_env(session.store, "echo", EXAMPLES / "echo", module="server.py:Echo", environment_name="echo")
    record = on_hub(session, session.hub.envs.deploy("echo", ttl_seconds=60))
    # as if its minute had passed: the sweep the hub started reads the record's expiry
    past = (datetime.now(timezone.utc) - timedelta(seconds=1)).isoformat().replace("+00:00", "Z")
    session.store.records.save("env_instances", record["instance_id"], {**record, "expires_at_utc": past})

    def stopped() -> bool:
        return session.store.records.get("env_instances", record["instance_id"])["body"]["status"] == "terminated"

    assert _wait_for(stopped), "the hub's sweep never tore the expired instance down"


def test_ttl_options_on_the_deploy_commands(tmp_path):
    project = tmp_path / "proj"
    (project / ".agentenv").mkdir(parents=True)  # this project's own state, whatever lies above tmp_path
    cli(project, "up", "--detach", check=True)
    try:
        folder = project / "echo-env"
        folder.mkdir()
        (folder / "server.py").write_text((EXAMPLES / "echo" / "server.py").read_text())
        (folder / "env.toml").write_text('module = "server.py:Echo"\nenvironment_name = "echo"\n')
        cli(project, "env", "put", "echo-env", "--id", "echo", check=True)
        record = json.loads(cli(project, "env", "deploy", "--id", "echo", "--ttl-seconds", "600", "--json",
                                check=True, timeout=120).stdout)  # stdout: the JSON only
        assert record["ttl_seconds"] == 600 and _stamp(record) > datetime.now(timezone.utc)
        found = json.loads(cli(project, "env", "instances", record["instance_id"], check=True).stdout)
        assert found["expires_at_utc"] == record["expires_at_utc"]
        agent = json.loads(cli(project, "agent", "deploy", "scripted", "--ttl-seconds", "3600", "--json",
                               check=True).stdout)
        assert agent["ttl_seconds"] == 3600
        bad = cli(project, "env", "deploy", "--id", "echo", "--ttl-seconds", "59")
        assert bad.returncode == 2 and "59 is not in the range 60<=x<=1209600" in bad.stderr
        assert [r["instance_id"] for r in json.loads(cli(project, "env", "instances", "--json",
                                                         check=True).stdout)] == [record["instance_id"]]
    finally:
        cli(project, "down")
