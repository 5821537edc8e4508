"""Env triggers (``urn:agentenv:triggers/v1``): the reference gateway's trigger spec, run by a
transport-free engine that the gateway drives.

Public API::

    engine = TriggerEngine(clock, actions, seed=run_seed, known_tools=..., on_event=...)
    engine.register(body) / engine.remove(body) / engine.clear() / engine.state()
    await engine.on_tool_call(tool, args, result, role)   # after each proxied call
    await engine.tick()  /  asyncio.create_task(engine.run_driver())
    await engine.drain()  /  await engine.aclose()
    engine.to_dict()  /  TriggerEngine.from_dict(data, clock, actions)

Bad input raises :class:`TriggerError` (``.status`` 400, ``.message`` the reference's text).
See ``docs/environments/triggers.md``.
"""

from .engine import TriggerEngine
from .host import ActionRunner, ClockLike
from .models import TriggerSpec
from .records import STATUSES
from .results import echo_args
from .runtime import EVENT_KINDS
from .spec import WEBSITE_UNSUPPORTED, TriggerError

# The `features` the gateway card's triggers/v1 extension advertises: the reference's list, less
# `website` (this version deploys no website envs).
FEATURES = ("named_executors", "provoking_roles", "action_delay", "executor_hours", "unless",
            "executor_hours_time_zone")

__all__ = [
    "EVENT_KINDS",
    "FEATURES",
    "STATUSES",
    "WEBSITE_UNSUPPORTED",
    "ActionRunner",
    "ClockLike",
    "TriggerEngine",
    "TriggerError",
    "TriggerSpec",
    "echo_args",
]
