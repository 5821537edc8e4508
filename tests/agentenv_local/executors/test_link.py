"""The hub <-> worker link (executors/link.py) over a real socket pair: notes arrive before a later call, answers
and errors come back typed, a gone peer fails calls at once; and a message's run updates merged into one."""

from __future__ import annotations

import socket
import threading

import pytest

from agentenv_local.errors import NotFoundError
from agentenv_local.executors.link import Link, LinkClosed
from agentenv_local.executors.local_workers import coalesce_run_updates


@pytest.fixture
def pair():
    a_sock, b_sock = socket.socketpair()
    seen: list[tuple[str, list]] = []
    lock = threading.Lock()

    def hub_side(method, args, kwargs):
        with lock:
            seen.append((method, args))
        if method == "missing":
            raise NotFoundError("no such thing", hint="look elsewhere")
        if method == "seen":
            return [m for m, _ in seen[:-1]]
        return {"echo": args, **kwargs}

    hub = Link(a_sock, hub_side, "hub").start()
    worker = Link(b_sock, lambda m, a, k: None, "worker", inline=False).start()
    try:
        yield hub, worker, seen
    finally:
        worker.close()
        hub.close()


def test_notes_are_handled_before_a_later_call_in_order(pair):
    _, worker, _ = pair
    for i in range(50):
        worker.note("events.append", [i])
    assert worker.call("seen") == ["events.append"] * 50
    assert worker.call("echo", [1, b"\x00bytes"], {"k": "v"}) == {"echo": [1, b"\x00bytes"], "k": "v"}


def test_errors_come_back_typed(pair):
    _, worker, _ = pair
    with pytest.raises(NotFoundError) as caught:
        worker.call("missing")
    assert caught.value.hint == "look elsewhere"


def test_a_gone_peer_fails_calls_at_once(pair):
    hub, worker, _ = pair
    hub.close()
    with pytest.raises(LinkClosed):
        worker.call("echo", timeout=10)


def test_a_messages_run_updates_merge_into_one_at_the_last_place():
    notes = [["runs.update", ["a", {"status": "running", "steps": {"s1": "running"}}], {}],
             ["events.append", ["step.started"], {}],
             ["runs.update", ["b", {"status": "running"}], {}],
             ["runs.update", ["a", {"steps": {"s1": "passed"}}], {}],
             ["runs.update", ["a", {"generation": 2}], {"rev": 4}]]  # a checked update is never merged
    assert coalesce_run_updates(notes) == [
        ["events.append", ["step.started"], {}],
        ["runs.update", ["b", {"status": "running"}], {}],
        ["runs.update", ["a", {"status": "running", "steps": {"s1": "passed"}}], {}],
        ["runs.update", ["a", {"generation": 2}], {"rev": 4}]]
    assert coalesce_run_updates(notes[:3]) == notes[:3]
