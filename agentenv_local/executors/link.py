"""One connection between the hub and a worker process: calls that are answered, and one-way notes sent in
batches, both ways, over a socket pair (JSON lines, as on the hub's socket: json_lines.py).

    call  {"id": n, "method": "documents.find", "args": [...], "kwargs": {...}}
    reply {"re": n, "result": ...} or {"re": n, "error": {"type", "message", "hint", "problems"}}
    notes {"notes": [["events.append", [...], {...}], ...]}      no reply

Ordering is what makes notes safe: a side sends its pending notes before each call, and the other side handles
what it reads in the order it came, so a worker that wrote (a note) and then reads (a call) reads its own write.
Notes are what a worker writes and never reads back the result of (journal entries, run updates, events): one
message carries every note of the last few milliseconds, instead of one round trip each.

A side's `handle(method, args, kwargs)` answers what the other side sends (and runs its notes, unless a
`handle_notes(notes)` takes each message's notes at once). The hub handles inline, on the reader
thread (in order: that is the ordering above). A worker handles on a thread of its own (`inline=False`): its
handlers wait for its event loop, which may itself be waiting for the answer to a call this reader delivers.
"""

from __future__ import annotations

import itertools
import logging
import socket
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from agentenv_local.errors import AgentenvError, HubError, from_wire
from agentenv_local.json_lines import decode, encode

log = logging.getLogger(__name__)

Handler = Callable[[str, list, dict], Any]
NotesHandler = Callable[[list[list]], None]
NOTE_FLUSH_S = 0.005  # how long a note may wait for others to share its message
MAX_LINE = 256 * 1024 * 1024  # a line past this is a broken peer, not a message


class LinkClosed(HubError):
    """The other end of a link is gone (its process exited or was killed)."""


class Link:
    def __init__(self, sock: socket.socket, handle: Handler, name: str, inline: bool = True,
                 on_close: Callable[[], None] | None = None, handle_notes: NotesHandler | None = None):
        self._sock = sock
        self._rfile = sock.makefile("rb")
        self._handle = handle
        self._handle_notes = handle_notes  # a message's notes at once (the hub writes them in one transaction)
        self._name = name
        self._on_close = on_close
        self._send_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._waiting: dict[int, Future] = {}
        self._waiting_lock = threading.Lock()
        self._notes: list[list] = []
        self._notes_lock = threading.Lock()
        self._note_pending = threading.Event()
        self._closed = threading.Event()
        self._pool = None if inline else ThreadPoolExecutor(max_workers=8, thread_name_prefix=f"{name}-calls")
        self._reader = threading.Thread(target=self._read, name=f"{name}-reader", daemon=True)
        self._flusher = threading.Thread(target=self._flush_soon, name=f"{name}-notes", daemon=True)

    def start(self) -> Link:
        self._reader.start()
        self._flusher.start()
        return self

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    # -- sending ---------------------------------------------------------------------------------------------
    def call(self, method: str, args: list | tuple = (), kwargs: dict | None = None,
             timeout: float | None = 300) -> Any:
        """Send `method` (after every note sent before it) and wait for the other side's answer."""
        answer: Future = Future()
        call_id = next(self._ids)
        with self._waiting_lock:
            if self._closed.is_set():
                raise LinkClosed(f"{self._name}: the other end is gone")
            self._waiting[call_id] = answer
        self._send(self._take_notes() + [{"id": call_id, "method": method, "args": list(args),
                                          "kwargs": kwargs or {}}])
        ok, value = answer.result(timeout)
        if not ok:
            raise from_wire(value)
        return value

    def note(self, method: str, args: list | tuple = (), kwargs: dict | None = None) -> None:
        """Send `method` with no answer, batched with the other notes of the next few milliseconds."""
        with self._notes_lock:
            self._notes.append([method, list(args), kwargs or {}])
        self._note_pending.set()

    def flush(self) -> None:
        """Send the pending notes now."""
        messages = self._take_notes()
        if messages:
            self._send(messages)

    def _take_notes(self) -> list[dict]:
        with self._notes_lock:
            notes, self._notes = self._notes, []
        return [{"notes": notes}] if notes else []

    def _flush_soon(self) -> None:
        while not self._closed.is_set():
            self._note_pending.wait()
            self._note_pending.clear()
            if self._closed.wait(NOTE_FLUSH_S):
                return
            try:
                self.flush()
            except LinkClosed:
                return

    def _send(self, messages: list[dict]) -> None:
        data = b"".join(encode(m) for m in messages)
        with self._send_lock:
            try:
                self._sock.sendall(data)
            except OSError as exc:
                self._close()
                raise LinkClosed(f"{self._name}: the other end is gone ({exc.strerror or exc})") from None

    # -- receiving -------------------------------------------------------------------------------------------
    def _read(self) -> None:
        try:
            while True:
                line = self._rfile.readline(MAX_LINE)
                if not line:
                    return
                if not line.endswith(b"\n"):
                    log.error("%s: a message over %d bytes; closing the link", self._name, MAX_LINE)
                    return
                message = decode(line)
                if "re" in message:
                    with self._waiting_lock:
                        waiting = self._waiting.pop(message["re"], None)
                    if waiting is not None:
                        waiting.set_result((True, message.get("result")) if "error" not in message
                                           else (False, message["error"]))
                elif "notes" in message:
                    if self._handle_notes is not None:
                        self._handle_notes(message["notes"])
                    else:
                        for method, args, kwargs in message["notes"]:
                            self._run(method, args, kwargs, None)
                elif self._pool is None:
                    self._run(message.get("method", ""), message.get("args") or [], message.get("kwargs") or {},
                              message.get("id"))
                else:
                    self._pool.submit(self._run, message.get("method", ""), message.get("args") or [],
                                      message.get("kwargs") or {}, message.get("id"))
        except (OSError, ValueError) as exc:
            if not self._closed.is_set():
                log.warning("%s: the link broke: %s", self._name, exc)
        finally:
            self._close()

    def _run(self, method: str, args: list, kwargs: dict, call_id: int | None) -> None:
        try:
            reply: dict = {"re": call_id, "result": self._handle(method, args, kwargs)}
        except AgentenvError as exc:
            reply = {"re": call_id, "error": exc.to_wire()}
        except Exception as exc:
            log.exception("%s: %s failed", self._name, method)
            reply = {"re": call_id, "error": {"type": "AgentenvError",
                                              "message": f"{self._name}: {method} failed: {type(exc).__name__}: {exc}"}}
        if call_id is None:
            if "error" in reply:  # a note that failed: nobody waits for it, so it is logged here
                log.warning("%s: %s failed: %s", self._name, method, reply["error"].get("message"))
            return
        try:
            self._send([reply])
        except LinkClosed:
            pass

    # -- closing ---------------------------------------------------------------------------------------------
    def _close(self) -> None:
        with self._waiting_lock:
            if self._closed.is_set():
                return
            self._closed.set()
            waiting, self._waiting = self._waiting, {}
        self._note_pending.set()
        for answer in waiting.values():
            answer.set_result((False, LinkClosed(f"{self._name}: the other end is gone").to_wire()))
        if self._on_close is not None:
            self._on_close()

    def close(self) -> None:
        """Send what is pending, then hang up (the other side reads the end of the stream)."""
        try:
            self.flush()
        except LinkClosed:
            pass
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._close()
        self._sock.close()
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
