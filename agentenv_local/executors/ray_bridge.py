"""The hub's end of the mailbox: a thread that takes the workers' store calls, runs each through the hub's
own dispatch (`Hub.call`, the same methods and checks a CLI client gets), and answers.

`objects.get` is answered with an `ObjectRef`: the bytes are put into Ray's object store once per key and
the ref is kept while the hub runs, so every later read of that artifact version, on any node, is served by
Ray (a node fetches it once, then reads its local copy).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from agentenv_local.errors import AgentenvError

from .ray_mailbox import mailbox_class
from .run_worker import WORKER_STORE_METHODS

log = logging.getLogger(__name__)

Dispatch = Callable[[str, list, dict], Any]  # Hub.call(method, args, kwargs)


class HubBridge:
    """Answers Ray workers' store calls for as long as it runs."""

    def __init__(self, dispatch: Dispatch, name: str | None = None):
        self._dispatch = dispatch
        self.mailbox = mailbox_class().options(name=name).remote() if name else mailbox_class().remote()
        self._object_refs: dict[str, Any] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="agentenv-ray-bridge", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        import ray

        while not self._stop.is_set():
            try:
                calls = ray.get(self.mailbox.take.remote(0.5))
            except Exception as exc:  # the cluster went away: the executor sees its runs fail and says so
                if not self._stop.is_set():
                    log.warning("the Ray mailbox stopped answering: %s", exc)
                return
            if calls:
                answers = [self._answer(*call) for call in calls]
                self.mailbox.answer.remote(answers)

    def _answer(self, call_id: int, run_id: str, method: str, args: list, kwargs: dict) -> tuple[int, bool, Any]:
        namespace, _, name = method.partition(".")
        if name not in WORKER_STORE_METHODS.get(namespace, frozenset()):
            return call_id, False, {"type": "HubError", "message": f"{method} is not callable from a Ray worker"}
        try:
            if method == "objects.get":
                return call_id, True, self._object_ref(args, kwargs)
            return call_id, True, self._dispatch(method, args, kwargs)
        except AgentenvError as exc:
            return call_id, False, exc.to_wire()
        except Exception as exc:
            log.exception("a Ray worker's call %s for run %s failed", method, run_id)
            return call_id, False, {"type": "AgentenvError", "message": f"hub error: {type(exc).__name__}: {exc}"}

    def _object_ref(self, args: list, kwargs: dict) -> Any:
        import ray

        key = args[0] if args else kwargs["key"]
        ref = self._object_refs.get(key)
        if ref is None:
            ref = self._object_refs[key] = ray.put(self._dispatch("objects.get", [key], {}))
        return ref

    def cancel(self, run_id: str) -> None:
        self.mailbox.cancel.remote(run_id)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self._object_refs.clear()
