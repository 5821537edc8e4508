"""Env pool settings and opt-outs (hosting/envs/pool.py): `[envs.pool] size` and `idle_seconds`, `pool = false` in
an env.toml (or a multi env's), `deploy(pool=False)`; subprocess envs are never pooled."""

from __future__ import annotations

import asyncio

from kits.env_deploy import EXAMPLES, on_hub, put_env
from kits.env_pool import deploy, hub, put_counter, slot_records, starts_of, teardown


def test_pools_off_with_size_zero_and_subprocess_envs_are_never_pooled(tmp_path):
    with hub(tmp_path, size=0) as session:
        starts = put_counter(session, tmp_path)
        for _ in range(2):
            teardown(session, deploy(session, "counter"))
        assert starts_of(starts) == 2 and slot_records(session) == {}
    with hub(tmp_path / "sub") as session:
        put_env(session.store, "echo-sub", EXAMPLES / "echo", module="server.py:Echo", run_as="subprocess",
                environment_name="echo")
        record = deploy(session, "echo-sub")
        assert "pool_slot" not in record
        teardown(session, record)
        assert slot_records(session) == {}


def test_the_pool_keeps_at_most_size_and_stops_idle_slots(tmp_path):
    with hub(tmp_path, size=1, idle_seconds=0.5) as session:
        starts = put_counter(session, tmp_path)
        records = [deploy(session, "counter") for _ in range(2)]
        for record in records:
            teardown(session, record)
        statuses = sorted(r["status"] for r in slot_records(session).values())
        assert statuses == ["pooled", "terminated"]  # the second found the pool full
        full = [r for r in slot_records(session).values() if r["status"] == "terminated"][0]
        assert "full" in full["status_reason"]
        assert starts_of(starts) == 2

        def all_stopped() -> bool:
            return all(r["status"] == "terminated" for r in slot_records(session).values())

        for _ in range(200):  # idle exit: the hub stops it by itself
            if all_stopped():
                break
            on_hub(session, asyncio.sleep(0.05))
        assert all_stopped()
        assert not list((session.paths.state_dir / "envs").glob("env*"))
        assert session.hub.envs.pool.idle() == []
