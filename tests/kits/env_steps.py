"""Helpers for the env step tests (`from kits.env_steps import ...`): a real Gateway over in-process
example envs, served on a free loopback port, the deploy record a `deploy_env` step would leave in the run state,
and Notebook, a tiny SDK env with a data plane."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated

from pydantic import Field

from agentenv_local.env import DataPart, Env, add_data, environment_card, get_data, reset_data, tool
from kits.data_plane import rpc
from kits.env_deploy import seed  # noqa: F401 - the tests' helper
from kits.gateway import gateway_serving, http, load

ROOT = Path(__file__).resolve().parents[2]


ENVS = ROOT / "examples" / "envs"


def example(name: str):
    return load(ENVS / name / "server.py")


def record(env_id: str, base: str, children: list[str]) -> dict:
    return {"env_id": env_id, "env_version": 1, "instance_id": f"{env_id}-inst-1", "gateway_url": base,
            "mcp_url": base + "/mcp", "environment_card": {}, "mcp_server_name": env_id,
            "children": [{"name": c} for c in children]}


@contextlib.contextmanager
def deployed_env(run, env_id: str, children: dict, **options):
    """Serve a gateway over `children` ({name: Env}) and record it in the run's deployed_envs."""
    from agentenv_local.gateway.children import ChildSpec

    specs = [ChildSpec(name, env) for name, env in children.items()]
    with gateway_serving(env_id, specs, **options) as (base, gw):
        run.state["deployed_envs"].append(record(env_id, base, list(children)))
        yield base, gw


def data_of(base: str, child: str) -> dict:
    return rpc(base, "data/get", child=child)["result"]["parts"][0]["data"]


def step_call_tool(base: str, tool: str, args: dict, role: str | None = None) -> dict:
    """A `call_tool` action through the gateway's REST `/step` (as `role`); the tool result as a dict. (An MCP
    client's call is kits.env_deploy.call_tool.)"""
    headers = {"AgentEnv-Role": role} if role else {}
    with http(base, **headers) as h:
        return h.post("/step", json={"action": "call_tool", "tool_name": tool, "arguments": args}).json()


@environment_card(name="notebook", description="Keeps notes.")
class Notebook(Env):
    """A tiny SDK env: one tool (add_note) and a data plane that keeps every note it is given."""

    def __init__(self) -> None:
        self.notes: list[str] = []

    @tool()
    def add_note(self, text: Annotated[str, Field(description="The note to keep")]) -> int:
        """Keep a note; returns how many there are."""
        self.notes.append(text)
        return len(self.notes)

    @reset_data
    def reset(self) -> None:
        self.notes.clear()

    @add_data
    def add(self, parts: list) -> None:
        for part in parts:
            self.notes.extend(part.data["notes"])

    @get_data
    def export(self) -> list:
        return [DataPart(data={"notes": list(self.notes)})]
