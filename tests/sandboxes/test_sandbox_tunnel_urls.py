"""`Sandbox.tunnel_urls` is part of the interface: port -> URL a host process reaches, empty when a sandbox
publishes no ports; the process provider's sandboxes answer it through the interface."""

from __future__ import annotations

import asyncio
from typing import Literal

from agentenv_local.sandbox_api import ExecResult, Sandbox, SandboxSpec
from sandboxes.process import ProcessSandboxProvider


class _PortlessSandbox(Sandbox):
    """A plugin's sandbox that says nothing about ports."""

    type = "portless"

    async def exec(self, command: str | list[str], *, timeout: float | None = 120.0,
                   env: dict[str, str] | None = None, cwd: str = "/app") -> ExecResult:
        return ExecResult(0, "", "")

    async def write_file(self, path: str, data: bytes) -> None: ...

    async def read_file(self, path: str) -> bytes:
        return b""

    async def exists(self, path: str, kind: Literal["any", "file", "dir"] = "any") -> bool:
        return False

    async def list_files(self, path: str) -> list[str]:
        return []

    async def terminate(self) -> None: ...


def test_a_sandbox_that_publishes_no_ports_has_no_tunnel_urls():
    assert _PortlessSandbox("s1", SandboxSpec(name="s", exposed_ports=[8000])).tunnel_urls == {}


def test_the_process_sandbox_answers_through_the_interface(tmp_path):
    async def scenario() -> tuple[dict[str, str], dict[str, str]]:
        provider = ProcessSandboxProvider(tmp_path / "state")
        sandboxes: list[Sandbox] = [await provider.create(SandboxSpec(name="web", exposed_ports=[8000, 9001])),
                                    await provider.create(SandboxSpec(name="quiet"))]
        try:
            return sandboxes[0].tunnel_urls, sandboxes[1].tunnel_urls
        finally:
            for sandbox in sandboxes:
                await sandbox.terminate()

    published, quiet = asyncio.run(scenario())
    assert published == {"8000": "http://127.0.0.1:8000", "9001": "http://127.0.0.1:9001"}
    assert quiet == {}
