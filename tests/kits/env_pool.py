"""Helpers for the env pool tests: a hub with `[envs.pool]` settings, an env that counts its starts, slot records."""

from __future__ import annotations

from pathlib import Path

import httpx2

from kits.env_deploy import on_hub, open_hub_session, put_env

COUNTER_ENV = '''
from pathlib import Path

from agentenv_local.env import DataPart, Env, add_data, environment_card, get_data, reset_data, tool

STARTS = Path({starts!r})


@environment_card(name="counter", description="Counts how often it is made.")
class Counter(Env):
    def __init__(self) -> None:
        with STARTS.open("a") as f:
            f.write("start\\n")
        self.items: list = []
        self.greeting = "hello"
        self.broken = False

    @tool()
    def add_item(self, item: str) -> int:
        """Keep an item."""
        self.items.append(item)
        return len(self.items)

    @tool()
    def set_greeting(self, text: str) -> str:
        """Change the greeting (state its data plane does not reset)."""
        self.greeting = text
        return text

    @tool()
    def break_reset(self) -> str:
        """Make the next data/reset fail."""
        self.broken = True
        return "broken"

    @reset_data
    def reset(self) -> None:
        if self.broken:
            raise RuntimeError("this reset is broken")
        self.items.clear()

    @add_data
    def add(self, parts: list) -> None:
        self.items += [p.data for p in parts if p.kind == "data"]

    @get_data
    def export(self) -> list:
        return [DataPart(data={{"items": self.items}})]
'''


def hub(tmp_path: Path, **pool: object):
    """A hub session in its own state folder, with `[envs.pool]` set to `pool`."""
    state = tmp_path / ".agentenv"
    state.mkdir(parents=True)
    if pool:
        (state / "config.toml").write_text("[envs.pool]\n" + "".join(f"{k} = {v!r}\n".replace("'", '"')
                                                                     for k, v in pool.items()))
    return open_hub_session(tmp_path)


def put_counter(session, tmp_path: Path, env_id: str = "counter", **fields) -> Path:
    folder = tmp_path / "counter-src"
    folder.mkdir(exist_ok=True)
    starts = tmp_path / "starts.log"
    (folder / "server.py").write_text(COUNTER_ENV.format(starts=str(starts)))
    put_env(session.store, env_id, folder, module="server.py:Counter", environment_name="counter", **fields)
    return starts


def starts_of(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def call(record: dict, tool: str, args: dict, role: str | None = None) -> dict:
    headers = {"AgentEnv-Role": role} if role else {}
    r = httpx2.post(record["gateway_url"] + "/step", json={"action": "call_tool", "tool_name": tool,
                                                          "arguments": args}, headers=headers, timeout=30)
    return r.json()


def slot_records(session) -> dict[str, dict]:
    from agentenv_local.hosting.envs.pool import SLOTS
    from agentenv_local.query import Query

    return {r["id"]: r["body"] for r in session.store.records.query(Query(SLOTS))}


def deploy(session, env_id: str, **options) -> dict:
    return on_hub(session, session.hub.envs.deploy(env_id, **options))


def teardown(session, record: dict) -> dict:
    return on_hub(session, session.hub.envs.teardown(record["instance_id"]))
