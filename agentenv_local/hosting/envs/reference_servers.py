"""The `reference_server` env provider: a reference env folder's server.py (compat/reference_envs.py), run
through compat/reference_server.py with agentenv's stand-in for `agentenv_protocol` where the real one is
missing. On a sandbox provider that runs containers (the deploy's sandbox_type: `podman`, which the reference's
`local` is for containers) it runs in a container of agentenv's runtime image, with the env's files written
into its /app; otherwise (no sandbox_type, or `process`) as a subprocess, as a `command` env does. The folder's
Dockerfile is never built: its base image comes from a registry. Not in a container, it is loaded into the hub
instead when it can be (reference_in_hub.py: no env_vars, nothing started at import), as a module env is."""

from __future__ import annotations

import asyncio
from typing import Any

from agentenv_local.compat.reference_envs import LAUNCHER, SERVER_FILE
from agentenv_local.http_guard import ADMIN_TOKEN_ENV

from .containers import CONTAINER_PORT, ContainerChildren, container_problem, remove_containers, wait_container
from .in_hub import InHubProvider
from .instance import DeployError, Instance
from .providers import EnvHost, EnvProvider
from .records import McpServerEnv
from .reference_in_hub import ensure_stand_in, in_hub_class
from .subprocesses import start_subprocess_child, stop_subprocesses

APP = "/app"
READY_MARKER = ".agentenv-files-written"  # written last: the server starts once every file is in place


def is_reference_server(server: McpServerEnv) -> bool:
    """Whether `server` is a reference env folder's server.py (the command compat/reference_envs.py gives it)."""
    return (server.command or [])[1:] == ["-m", LAUNCHER, SERVER_FILE]


class ReferenceServerProvider(EnvProvider):
    name = "reference_server"

    def __init__(self, host: EnvHost):
        super().__init__(host)
        self.containers = ContainerChildren(host.paths, host.services)
        self.in_hub = InHubProvider(host)

    async def start(self, inst: Instance, child_name: str, where: str, server: McpServerEnv) -> tuple[Any, dict]:
        folder = self.host.materialize(inst, child_name, server)
        if not self._in_container(inst):
            cls = None if server.env_vars else in_hub_class(folder)
            if cls is not None:  # its Env class, loaded as `module = "server.py:<cls>"` would be
                ensure_stand_in()
                module = server.model_copy(update={"command": None, "module": f"{SERVER_FILE}:{cls}"})
                return await self.in_hub.start_in(inst, child_name, where, folder, module, apart=server, named=True)
            return await start_subprocess_child(inst, child_name, where, folder, server, self.host.ready_timeout)
        from agentenv_local.errors import AgentenvError
        from agentenv_local.sandbox_api import SandboxSpec

        provider = self.containers.provider(inst, where, "agentenv's runtime image")
        try:
            image = await asyncio.to_thread(provider.runtime_image)
        except AgentenvError as e:
            raise DeployError(f"{where}: cannot run its server.py in a container: {e.message}", hint=e.hint) from None
        port = CONTAINER_PORT
        fields = {key: inst.options[key] for key in ("cpu", "memory_mb") if inst.options.get(key)}
        spec = SandboxSpec(
            name=f"env-{child_name}"[:120], mode="container", image=image, exposed_ports=[port],
            command=["python", "-m", LAUNCHER, f"{APP}/{SERVER_FILE}", "--wait-for", f"{APP}/{READY_MARKER}"],
            env_vars={**server.env_vars, "MCP_HOST": "0.0.0.0", "MCP_PORT": str(port), "ENVIRONMENT_NAME": child_name,
                      **({ADMIN_TOKEN_ENV: inst.admin_token} if inst.admin_token else {})},
            run_id=inst.run_id, labels={"agentenv.env-instance": inst.instance_id}, **fields)
        try:
            sandbox = await provider.create(spec)
        except AgentenvError as e:
            raise DeployError(container_problem(where, image, e), hint=e.hint) from None
        inst.sandboxes.append(sandbox)
        for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):
            await sandbox.write_file(f"{APP}/{path.relative_to(folder).as_posix()}", path.read_bytes())
        await sandbox.write_file(f"{APP}/{READY_MARKER}", b"")
        base = ((getattr(sandbox, "tunnel_urls", None) or {}).get(str(port)) or "").rstrip("/")
        if not base:
            raise DeployError(f"{where}: its container ({sandbox.sandbox_id}) has no published port {port}")
        url = base + server.mcp_path
        await wait_container(where, provider, sandbox, base, url, self.host.ready_timeout)
        return url, {"name": child_name, "kind": "container", "url": url, "image": image,
                     "sandbox_id": sandbox.sandbox_id, "sandbox_type": provider.name, "container_port": port}

    @staticmethod
    def _in_container(inst: Instance) -> bool:
        """Whether the deploy's sandbox provider runs containers (podman); none named, or `process`: a subprocess."""
        from agentenv_local.plugins import registry

        name = inst.options.get("sandbox_type")
        cls = registry().get("sandbox_providers", name) if name else None
        return cls is not None and "container" in getattr(cls, "supported_modes", ())

    async def stop(self, inst: Instance) -> None:
        await self.in_hub.stop(inst)
        await stop_subprocesses(inst)
        await remove_containers(inst)

    def holds_resources(self) -> bool:
        return self.containers.has_own_providers()

    async def aclose(self) -> None:
        await self.containers.aclose()
