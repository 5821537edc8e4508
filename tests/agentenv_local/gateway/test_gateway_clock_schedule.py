"""The clock's `schedule` mode (what `agentenv replay` arms a wall-clock env's gateway with): each proxied tool call
gets the next of the given times, the env reading exactly it, over a real gateway, for an env in the gateway's
process and one in a subprocess, through /step and through MCP; the last time is held (and counted) once the
schedule runs out; bad schedules are refused; the state survives to_dict/from_dict."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from kits.gateway import ECHO, env_subprocess, gateway_serving, http

from agentenv_local.env import Env, ToolContext, environment_card, tool
from agentenv_local.gateway.children import ChildSpec
from agentenv_local.gateway.clock import ClockError, VirtualClock

TIMES = ["2026-12-01T22:57:06.934338+00:00", "2026-12-01T22:57:06.939912+00:00", "2026-12-01T22:57:07.000001+00:00",
         "2026-12-01T23:10:00+00:00", "2026-12-01T23:10:00.5Z"]


@environment_card(name="ledger")
class Ledger(Env):
    @tool()
    def record(self, ctx: ToolContext, what: str) -> dict:
        """Dates an entry with the env's now, as an env on the wall clock dates what it writes."""
        return {"what": what, "at": ctx.now().isoformat()}


def moment(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


@pytest.fixture()
def scheduled():
    """A gateway over an in-process env (ledger) and a subprocess one (echo, over HTTP), its clock in mode
    schedule."""
    with env_subprocess(ECHO) as (echo_base, _proc), \
            gateway_serving("replayed", [ChildSpec("ledger", Ledger()), ChildSpec("echo", echo_base + "/mcp")]) \
            as (base, gw):
        with http(base) as h:
            armed = h.put("/clock/set-time", json={"virtual_time": TIMES[0], "mode": "schedule", "schedule": TIMES})
            assert armed.status_code == 200, armed.text
        yield base, gw


def step(h, tool: str, arguments: dict) -> dict:
    r = h.post("/step", json={"action": "call_tool", "tool_name": tool, "arguments": arguments},
               headers={"AgentEnv-Role": "clerk"})
    assert r.status_code == 200 and not r.json()["isError"], r.text
    return r.json()["structuredContent"]


def test_each_call_gets_its_scheduled_time_in_process_and_in_a_subprocess_env(scheduled):
    from mcp import Client

    base, gw = scheduled
    seen: list[str] = []
    with http(base) as h:
        assert h.get("/clock/state").json()["schedule_left"] == 5
        assert h.get("/clock/time").json() == {"virtual_time": "2026-12-01T22:57:06.934338Z"}  # t0 until a call
        seen.append(step(h, "record", {"what": "a"})["at"])
        seen.append(step(h, "whoami", {})["now"])

    async def over_mcp() -> None:  # the MCP path (the fast lane to a URL child) ticks alike
        async with Client(base + "/mcp") as c:
            seen.append((await c.call_tool("whoami", {})).structured_content["now"])
            seen.append((await c.call_tool("record", {"what": "b"})).structured_content["at"])

    asyncio.run(over_mcp())
    with http(base) as h:
        seen.append(step(h, "whoami", {})["now"])
        assert h.get("/clock/state").json()["schedule_left"] == 0
        # the schedule ran out: the clock holds its last time, and counts the calls past it
        seen.append(step(h, "record", {"what": "c"})["at"])
        seen.append(step(h, "whoami", {})["now"])
        state = h.get("/clock/state").json()
        assert (state["mode"], state["schedule_left"], state["schedule_overrun"]) == ("schedule", 0, 2)
        assert h.get("/clock/time").json() == {"virtual_time": "2026-12-01T23:10:00.500000Z"}
    assert [moment(t) for t in seen] == [moment(t) for t in [*TIMES, TIMES[-1], TIMES[-1]]]


def test_reads_and_the_clock_tool_do_not_move_a_schedule_and_a_refused_call_takes_no_time(scheduled):
    base, _ = scheduled
    with http(base) as h:
        assert h.post("/tools/disable", json={"role": "clerk", "tools": ["record"]}).status_code == 200
        for _ in range(3):
            h.get("/clock/time")
            h.get("/clock/state")
            h.post("/step", json={"action": "call_tool", "tool_name": "get_time", "arguments": {}},
                   headers={"AgentEnv-Role": "clerk"})
        refused = h.post("/step", json={"action": "call_tool", "tool_name": "record", "arguments": {"what": "x"}},
                         headers={"AgentEnv-Role": "clerk"})
        assert refused.status_code == 403
        assert h.get("/clock/state").json()["schedule_left"] == 5
        assert moment(step(h, "whoami", {})["now"]) == moment(TIMES[0])


@pytest.mark.parametrize("body, message", [
    ({"mode": "schedule"}, "mode 'schedule' needs schedule: a list of RFC3339 times, the Nth given to the Nth tool "
                           "call, got NoneType"),
    ({"mode": "schedule", "schedule": "2026-12-01T10:00:00Z"}, "mode 'schedule' needs schedule: a list of RFC3339 "
                                                               "times, the Nth given to the Nth tool call, got str"),
    ({"mode": "schedule", "schedule": ["2026-12-01T10:00:00Z", "noon"]},
     "invalid RFC3339 schedule[1] 'noon': expected YYYY-MM-DDThh:mm:ss[.fff](Z|+hh:mm)"),
    ({"mode": "frozen", "schedule": []}, "schedule applies only to mode 'schedule', not 'frozen'"),
    ({"mode": "schedule", "schedule": [], "virtual_seconds_per_real_second": 60},
     "virtual_seconds_per_real_second applies only to mode 'wall': a schedule clock moves only when advanced"),
])
def test_a_bad_schedule_is_refused_and_changes_nothing(body: dict, message: str):
    clock = VirtualClock()
    clock.arm("2025-03-10T09:00:00Z", mode="frozen")
    with pytest.raises(ClockError) as caught:
        clock.arm_from_body({"virtual_time": "2026-12-01T10:00:00Z", **body})
    assert (caught.value.status, caught.value.message) == (400, message)
    assert (clock.mode, clock.generation, clock.schedule_left) == ("frozen", 1, None)


def test_a_schedule_clock_is_restored_where_it_was():
    clock = VirtualClock()
    clock.arm(TIMES[0], mode="schedule", schedule=TIMES[:2])
    clock.tick_tool_call()
    restored = VirtualClock.from_dict(clock.to_dict())
    assert (restored.mode, restored.schedule_left, restored.now()) == ("schedule", 1, moment(TIMES[0]))
    assert restored.tick_tool_call() == moment(TIMES[1])
    assert restored.tick_tool_call() == moment(TIMES[1]) and restored.schedule_overrun == 1
    clock.clear()
    assert clock.schedule_left is None and "schedule" not in clock.to_dict()
