"""Many commands reaching one hub at once: none is refused for want of room in the hub's listen backlog.

The cause (issue 25): the hub served its unix socket with socketserver's backlog of 5, and a client socket
with a timeout connects non-blocking, which on a full AF_UNIX backlog fails at once with EAGAIN ("Resource
temporarily unavailable") instead of waiting. 12 `agentenv run hello --k 5` started together lost 1-5 of them."""

from __future__ import annotations

import socket
import threading
import time

import pytest
from kits.hub import Background, runs_json

from agentenv_local.hub.session import connect_unix


def _listener(path, backlog: int) -> socket.socket:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(backlog)
    return server


def test_connects_wait_for_room_in_a_full_backlog(tmp_path):
    """A listener that accepts nobody for a moment, with a backlog of 1, and 20 clients connecting at once:
    each waits for room and gets in once the listener accepts (the old non-blocking connect failed with
    EAGAIN at once)."""
    path = tmp_path / "hub.sock"
    server = _listener(path, backlog=1)
    results: list[object] = []
    lock = threading.Lock()

    def client() -> None:
        try:
            sock = connect_unix(path, timeout=30)
        except OSError as e:
            outcome: object = e
        else:
            sock.close()
            outcome = "connected"
        with lock:
            results.append(outcome)

    threads = [threading.Thread(target=client) for _ in range(20)]
    for t in threads:
        t.start()
    # While the listener accepts nobody, nobody has failed: the ones past the backlog are waiting.
    time.sleep(0.3)
    with lock:
        assert [r for r in results if r != "connected"] == []
    accepted = []
    server.settimeout(30)
    while len(accepted) < 20:
        conn, _ = server.accept()
        accepted.append(conn)
    for t in threads:
        t.join(30)
    assert results == ["connected"] * 20
    for conn in accepted:
        conn.close()
    server.close()


def test_a_backlog_that_never_frees_is_a_timeout_not_eagain(tmp_path):
    path = tmp_path / "hub.sock"
    server = _listener(path, backlog=0)
    held: list[socket.socket] = []
    with pytest.raises(TimeoutError, match="no room for a new connection within 0.2 s"):
        for _ in range(8):  # the first fill the backlog (a backlog of 0 admits one), the next waits in vain
            held.append(connect_unix(path, timeout=0.2))
    assert 1 <= len(held) < 8
    for sock in held:
        sock.close()
    server.close()


def test_twelve_commands_started_together_all_run(tmp_path):
    """The table's case: 12 `agentenv run hello --k 5` started at once in one project, all 60 runs pass."""
    project = tmp_path / "proj"
    project.mkdir()
    commands = [Background(project, "run", "hello", "--k", "5") for _ in range(12)]
    try:
        for command in commands:
            command.expect(0, timeout=300)
    finally:
        for command in commands:
            if command.alive():
                command.kill9()
    rows = runs_json(project)
    assert len(rows) == 60
    assert {r["status"] for r in rows} == {"passed"}
