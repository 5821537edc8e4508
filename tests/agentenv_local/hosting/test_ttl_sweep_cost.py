"""The hub's TTL sweep (every 5 s, on the hub's loop) reads only running instances: under load a warm hub's loop
spent about 30% of its time decoding every env instance record ever made (each episode adds one) for it. Counts
the records decoded; the sweep still tears down what ran out."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from kits.env_deploy import EXAMPLES, on_hub, put_env

from agentenv_local.hosting.expiry import sweep_expired


@pytest.fixture
def session(tmp_path):
    from kits.env_deploy import open_hub_session

    with open_hub_session(tmp_path, own_state=True) as s:
        yield s


def test_the_sweep_decodes_only_running_instances(session, monkeypatch):
    from datetime import datetime

    import stores.documents as documents

    for i in range(300):  # what a long-lived hub accumulates: instances of finished episodes
        session.store.records.save("env_instances", f"old-env-{i}", {"instance_id": f"old-env-{i}",
                                                                     "status": "torn_down"})
        session.store.records.save("agent_instances", f"old-agent-{i}", {"instance_id": f"old-agent-{i}",
                                                                         "status": "terminated"})
    put_env(session.store, "echo", EXAMPLES / "echo", module="server.py:Echo", environment_name="echo")
    short = on_hub(session, session.hub.envs.deploy("echo", ttl_seconds=60))

    decoded: list[Any] = []
    real = documents.loads

    def counting(text: Any) -> Any:
        decoded.append(text)
        return real(text)

    monkeypatch.setattr(documents, "loads", counting)
    expires = datetime.fromisoformat(short["expires_at_utc"].replace("Z", "+00:00"))
    assert on_hub(session, sweep_expired(session.hub.envs, session.hub.agents)) == []
    assert len(decoded) == 1  # the one running instance, not the 600 stopped ones
    later = expires + timedelta(seconds=1)
    assert on_hub(session, sweep_expired(session.hub.envs, session.hub.agents, now=later)) == [short["instance_id"]]
    assert len(session.hub.envs.instances()) == 301 and session.hub.envs.instances("running") == []
    assert len(session.hub.agents.instances("terminated")) == 300
