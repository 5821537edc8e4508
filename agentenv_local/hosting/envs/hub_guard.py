"""What keeps an in-hub env (in_hub.py) from taking the hub down: every tool call it serves is guarded.

- its sync tools run on a daemon thread of the env's own (its calls stay one at a time, as they were on the
  loop), never on the hub's event loop nor its default executor;
- every call has a deadline (`call_timeout` in the env.toml, CALL_TIMEOUT_S by default): past it the call
  fails with an error naming the env and the fix (its thread is left to finish: Python cannot stop it);
- an `async def` tool is driven step by step: a step that holds the hub's loop longer than BLOCK_LIMIT_S
  (or the call_timeout, if lower) fails the call once it returns (a loop cannot be taken back from code
  that holds it);
- `sys.exit()` in a tool fails the call instead of stopping the hub's loop.

Each of these reports the env version "misbehaving" (on_misbehaving): in_hub.InHubProvider deploys it as a
subprocess from then on, for the rest of the hub's life, where the same fault only costs that env. What no
in-process guard can catch (os._exit, a segfault in C code, memory) is documented in docs/envs.md.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
import queue
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Generator
from concurrent.futures import Future
from typing import Any

log = logging.getLogger(__name__)

CALL_TIMEOUT_S = 300.0  # a tool call of an in-hub env that takes longer is failed
BLOCK_LIMIT_S = 2.0  # one uninterrupted stretch of an async tool on the hub's loop
FIX = 'run it as a subprocess: run_as = "subprocess" in its env.toml'


class Stepped:
    """Await a coroutine, timing each stretch it runs on the loop between two suspensions."""

    def __init__(self, coro: Coroutine[Any, Any, Any]):
        self.coro = coro
        self.longest = 0.0

    def __await__(self) -> Generator[Any, Any, Any]:
        coro = self.coro
        value: Any = None
        error: BaseException | None = None
        while True:
            started = time.monotonic()
            try:
                suspended = coro.send(value) if error is None else coro.throw(error)
            except StopIteration as done:
                self.longest = max(self.longest, time.monotonic() - started)
                return done.value
            finally:
                self.longest = max(self.longest, time.monotonic() - started)
            value, error = None, None
            try:
                value = yield suspended
            except BaseException as e:  # a cancellation (or what the loop threw in): handed to the coroutine
                error = e


class EnvThread:
    """One daemon thread running an env's sync handlers in order. A daemon: a handler that never returns must not
    hold the hub's exit (a ThreadPoolExecutor's workers are joined at exit)."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="in-hub-env", daemon=True)
        self._thread.start()

    def submit(self, job: Callable[[], Any]) -> Future:
        future: Future = Future()
        self._jobs.put((future, job))
        return future

    def _run(self) -> None:
        while True:
            item = self._jobs.get()
            if item is None:
                return
            future, job = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(job())
            except BaseException as e:  # SystemExit too: handed to the awaiting call, which reports it
                future.set_exception(e)

    def close(self) -> None:
        """Stop after the jobs queued so far (a hung one keeps its thread: it is a daemon)."""
        self._jobs.put(None)


class InHubGuard:
    """The guard of one in-hub env instance (set as its runtime's `guard`; env/runtime.py calls it)."""

    def __init__(self, label: str, on_misbehaving: Callable[[str], None], call_timeout: float | None = None):
        self.label = label  # "env NAME (in the hub)"
        self.on_misbehaving = on_misbehaving  # called with what it did
        self.call_timeout = call_timeout or CALL_TIMEOUT_S
        self.block_limit = min(BLOCK_LIMIT_S, self.call_timeout)
        self._thread: EnvThread | None = None  # made on the first sync call, again after close()

    def _fail(self, code: str, what: str) -> Exception:
        from agentenv_local.env.errors import EnvError

        self.on_misbehaving(what)
        log.warning("%s %s; its later deploys in this hub run it as a subprocess", self.label, what)
        return EnvError(code, f"{self.label} {what}; the call was failed and the hub marked the env misbehaving "
                              "(its later deploys in this hub run it as a subprocess)", hint=FIX, status=500)

    async def invoke(self, tool: str, fn: Callable, args: tuple, kwargs: dict) -> Any:
        """Run one handler of the env: a sync one on the env's thread, an async one timed step by step."""
        try:
            if inspect.iscoroutinefunction(fn):
                result = await self._stepped(tool, fn(*args, **kwargs))
            else:
                context = contextvars.copy_context()
                if self._thread is None:
                    self._thread = EnvThread()
                result = await asyncio.wrap_future(self._thread.submit(lambda: context.run(fn, *args, **kwargs)))
                if inspect.isawaitable(result):
                    result = await self._stepped(tool, result)
        except SystemExit as e:  # would stop the hub's loop if it got past a task
            raise self._fail("env_exited", f"called sys.exit({e.code!r}) in tool {tool!r}") from None
        return result

    async def _stepped(self, tool: str, awaitable: Awaitable) -> Any:
        if not inspect.iscoroutine(awaitable):
            return await awaitable
        stepped = Stepped(awaitable)
        result = await stepped
        if stepped.longest > self.block_limit:
            raise self._fail("env_blocked_hub", f"held the hub's event loop for {stepped.longest:.1f}s without "
                             f"yielding in tool {tool!r} (limit {self.block_limit:g}s): an async tool must "
                             "not block (use `await asyncio.sleep`, or a sync tool)")
        return result

    async def call(self, tool: str, dispatch: Coroutine[Any, Any, dict]) -> dict:
        """One tools/call with the deadline; a timeout answers an error result."""
        try:
            return await asyncio.wait_for(dispatch, self.call_timeout)
        except TimeoutError:
            from agentenv_local.env._results import error_result
            from agentenv_local.env.errors import EnvError

            error = self._fail("env_call_timeout", f"did not answer tool {tool!r} within its call_timeout "
                                                   f"of {self.call_timeout:g}s")
            assert isinstance(error, EnvError)
            return error_result(error)

    def close(self) -> None:
        """Let the env's thread go (the instance stopped); a later call (a pooled Env reused) makes a new one."""
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.close()
