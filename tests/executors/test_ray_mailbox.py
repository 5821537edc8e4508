"""The mailbox between the hub and its Ray workers, on a real Ray cluster and a real DuckDB store: a worker's
store calls land in the hub's store in order, errors come back typed, object bytes travel once per key, and
only the methods a worker may call are answered."""

from __future__ import annotations

import pytest
from kits.ray_cluster import require_ray, short_temp_dir, start_cluster, stop_cluster
from kits.store import open_store


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    require_ray()
    import ray

    cluster = start_cluster(short_temp_dir())
    ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
    try:
        yield ray
    finally:
        ray.shutdown()
        stop_cluster(cluster)


@pytest.fixture
def hub(tmp_path, driver):
    from agentenv_local.executors.ray_bridge import HubBridge

    store = open_store(tmp_path)
    calls: list[str] = []

    def dispatch(method: str, args: list, kwargs: dict):
        calls.append(method)
        namespace, _, name = method.partition(".")
        return getattr(getattr(store, namespace), name)(*args, **kwargs)

    bridge = HubBridge(dispatch)
    try:
        yield store, bridge, calls
    finally:
        bridge.close()
        store.close()


def on_worker(driver, fn, *args):
    """Run `fn(store, *args)` in a Ray task on the node with the `second` resource, through the mailbox."""
    @driver.remote(resources={"second": 1}, num_cpus=0)
    def task(mailbox, run_id, *rest):
        from agentenv_local.executors.ray_mailbox import MailboxStore

        return fn(MailboxStore(mailbox, run_id), *rest)
    return driver.get(task.remote(*args), timeout=120)


def test_a_workers_writes_land_in_the_hubs_store_in_order(driver, hub):
    store, bridge, _ = hub
    store.runs.create({"run_id": "r1", "task_id": "t", "task_version": 1, "status": "queued", "created_at": 1.0})

    def work(s):
        seqs = [s.runs.journal_append("r1", f"step{i}", "success", {"i": i}) for i in range(5)]
        s.runs.update("r1", {"status": "running"})
        s.events.append("step.started", {"n": 1}, run_id="r1", step_id="step0")
        s.events.flush()
        return seqs, s.runs.get("r1")["status"]

    seqs, status = on_worker(driver, work, bridge.mailbox, "r1")
    assert seqs == [1, 2, 3, 4, 5] and status == "running"
    assert [e["step_id"] for e in store.runs.journal("r1")] == [f"step{i}" for i in range(5)]
    assert [e["kind"] for e in store.events.query(run_id="r1")] == ["step.started"]


def test_errors_come_back_typed_and_unknown_methods_are_refused(driver, hub):
    _, bridge, calls = hub

    def work(s):
        from agentenv_local.errors import NotFoundError

        try:
            s.runs.get("no-such-run")
        except NotFoundError as exc:
            found = exc.message
        try:
            s.runs.mark_interrupted(None)
        except AttributeError as exc:
            refused = str(exc)
        return found, refused

    found, refused = on_worker(driver, work, bridge.mailbox, "r2")
    assert "no-such-run" in found and "does not take that call from workers" in refused
    assert "runs.mark_interrupted" not in calls  # refused on the worker, never sent


def test_object_bytes_are_put_into_rays_store_once_per_key(driver, hub):
    store, bridge, calls = hub
    store.objects.put("artifacts/a/v1/data.bin", b"x" * 100_000)

    def work(s):
        return [len(s.objects.get("artifacts/a/v1/data.bin")) for _ in range(3)]

    assert on_worker(driver, work, bridge.mailbox, "r3") == [100_000] * 3
    assert on_worker(driver, work, bridge.mailbox, "r4") == [100_000] * 3  # another worker, same node
    assert calls.count("objects.get") == 1  # read from the store once; Ray served the rest


def test_a_cancel_reaches_the_worker(driver, hub):
    _, bridge, _ = hub

    def work(s):
        return s.cancelled()

    assert on_worker(driver, work, bridge.mailbox, "r5") is False
    bridge.cancel("r5")
    assert on_worker(driver, work, bridge.mailbox, "r5") is True
