"""Container children: an `image` env started in a container by a sandbox provider (`podman` by default: mode
"container", its `container_port` published on 127.0.0.1 and reached as a URL child; removed at teardown)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path
from typing import Any

from agentenv_local.errors import AgentenvError, NotFoundError
from agentenv_local.http_guard import ADMIN_TOKEN_ENV

from .instance import DeployError, Instance, answers
from .providers import EnvHost, EnvProvider
from .records import McpServerEnv

CONTAINER_PORT = 8000  # where an image env serves in its container, unless it sets container_port
IMAGE_PROVIDER = "podman"  # the sandbox provider that runs image envs (deploy_env's sandbox_type may name another)
PODMAN_NOTE = "container images come with the Podman sandboxes"

log = logging.getLogger(__name__)


class ContainerChildren:
    """Starts image children with the sandbox providers of the hub's RunServices (or a deploy's own), else with
    providers it makes itself and closes in `aclose`."""

    def __init__(self, paths: Any, services: Any = None):
        self.paths = paths
        self.services = services
        self._own_providers: dict[str, Any] = {}

    def has_own_providers(self) -> bool:
        return bool(self._own_providers)

    def provider(self, inst: Instance, where: str, image: str) -> Any:
        name = inst.options.get("sandbox_type") or IMAGE_PROVIDER
        services = inst.options.get("services") or self.services
        try:
            if services is not None and hasattr(services, "sandbox_provider"):
                provider = services.sandbox_provider(name)
            elif name in self._own_providers:
                provider = self._own_providers[name]
            else:
                provider = self._own_providers[name] = self._make_provider(name)
        except AgentenvError as e:
            raise DeployError(f"{where}: is an image env ({image}), and {PODMAN_NOTE}, but its sandbox provider "
                              f"{name!r} is not available: {e.message}", hint=e.hint) from None
        if "container" not in getattr(provider, "supported_modes", ()):
            raise DeployError(f"{where}: is an image env ({image}); the {name!r} sandbox provider cannot run "
                              "container images", hint=f'use sandbox_type "{IMAGE_PROVIDER}" (the default)')
        return provider

    def _make_provider(self, name: str) -> Any:
        from agentenv_local.errors import ConfigError
        from agentenv_local.plugins import registry

        cls = registry().get("sandbox_providers", name)
        if cls is None:
            reason = registry().failure("sandbox_providers", name)
            raise ConfigError(f"no sandbox provider named {name!r}" + (f" ({reason})" if reason else ""),
                              hint="check `agentenv plugin list`")
        config: dict = {}
        with contextlib.suppress(Exception):  # the project's [sandbox.providers.NAME], when it can be read
            from agentenv_local.config import load_config

            config = load_config(Path(self.paths.state_dir).parent).get(f"sandbox.providers.{name}") or {}
        return cls(self.paths.state_dir, dict(config))

    async def start(self, inst: Instance, child_name: str, where: str, senv: McpServerEnv,
                    ready_timeout: float) -> tuple[str, dict]:
        """Start the child's container and wait until its server answers; (its MCP URL, its record entry)."""
        from agentenv_local.sandbox_api import SandboxSpec

        image = str(senv.image)
        provider = self.provider(inst, where, image)
        port = senv.container_port or CONTAINER_PORT
        fields: dict[str, Any] = {}
        for key in ("cpu", "memory_mb"):
            if inst.options.get(key):
                fields[key] = inst.options[key]
        spec = SandboxSpec(name=f"env-{child_name}"[:120], mode="container", image=image, exposed_ports=[port],
                           env_vars={**senv.env_vars, "MCP_HOST": "0.0.0.0", "MCP_PORT": str(port),
                                     "ENVIRONMENT_NAME": child_name,
                                     # its published data plane on 127.0.0.1 takes the admin token too
                                     **({ADMIN_TOKEN_ENV: inst.admin_token} if inst.admin_token else {})},
                           run_id=inst.run_id, labels={"agentenv.env-instance": inst.instance_id}, **fields)
        image_for = getattr(provider, "image_for", None)
        try:
            if image_for is not None:  # a missing image fails here, before any container or service starts
                await asyncio.to_thread(image_for, spec)
            sandbox = await provider.create(spec)
        except AgentenvError as e:
            raise DeployError(container_problem(where, image, e), hint=e.hint) from None
        inst.sandboxes.append(sandbox)
        base = (getattr(sandbox, "tunnel_urls", None) or {}).get(str(port))
        if not base:
            raise DeployError(f"{where}: its container ({sandbox.sandbox_id}) has no published port {port}")
        url = base.rstrip("/") + senv.mcp_path
        await wait_container(where, provider, sandbox, base.rstrip("/"), url, ready_timeout)
        return url, {"name": child_name, "kind": "container", "url": url, "image": image,
                     "sandbox_id": sandbox.sandbox_id, "sandbox_type": provider.name, "container_port": port}

    async def aclose(self) -> None:
        """Close the providers this made (a run's providers close with it)."""
        providers, self._own_providers = list(self._own_providers.values()), {}
        for provider in providers:
            close = getattr(provider, "aclose", None)
            if close is not None:
                with contextlib.suppress(Exception):
                    await close()


def container_problem(where: str, image: str, e: AgentenvError) -> str:
    if isinstance(e, NotFoundError) and "local storage" in e.message:
        return (f"{where}: its image {image} is not in Podman's local storage ({PODMAN_NOTE}, which never "
                "pull from a registry)")
    if type(e).__name__ == "PodmanUnavailable":
        return f"{where}: is an image env ({image}), and {PODMAN_NOTE}, which cannot run here: {e.message}"
    return f"{where}: cannot start its container from {image}: {e.message}"


async def wait_container(where: str, provider: Any, sandbox: Any, base: str, url: str, ready_timeout: float) -> None:
    """Until the server in the container answers (`/ready`, else its MCP path below 500); a container
    that stops, or a server that never answers, fails with the container's logs."""
    import httpx2

    loop = asyncio.get_running_loop()
    deadline = loop.time() + ready_timeout
    checked = loop.time()

    async def logs() -> str:
        try:
            text = (await asyncio.to_thread(provider.logs, sandbox.sandbox_id, 40)).strip()
        except Exception as e:
            text = f"(cannot read its logs: {e})"
        return text or "(nothing)"

    async with httpx2.AsyncClient(timeout=2.0) as http:
        while True:
            if await answers(http, base, url):
                return
            if loop.time() - checked > 0.5:
                checked = loop.time()
                try:
                    await provider.get(sandbox.sandbox_id)
                except NotFoundError:
                    raise DeployError(f"{where}: its container ({sandbox.sandbox_id}) stopped before its "
                                      f"server was ready; its logs:\n{await logs()}") from None
            if loop.time() > deadline:
                raise DeployError(f"{where}: its server did not answer at {url} within {ready_timeout:g}s "
                                  f"(container {sandbox.sandbox_id}); its logs:\n{await logs()}",
                                  hint="the image must serve MCP over HTTP on 0.0.0.0:$MCP_PORT "
                                       f"(the env's container_port, default {CONTAINER_PORT})")
            await asyncio.sleep(0.05)


async def remove_containers(inst: Instance) -> None:
    """Remove the instance's containers; what cannot be removed is logged (`agentenv sandbox prune` finds it)."""
    for sandbox in inst.sandboxes:
        try:
            await asyncio.wait_for(sandbox.terminate(), 60)
        except Exception:
            log.exception("env instance %s: could not remove container %s", inst.instance_id, sandbox.sandbox_id)
    inst.sandboxes.clear()


class ContainerProvider(EnvProvider):
    """The `container` env provider: an `image` env in a container of a sandbox provider (ContainerChildren)."""

    name = "container"

    def __init__(self, host: EnvHost):
        super().__init__(host)
        self.containers = ContainerChildren(host.paths, host.services)

    async def start(self, inst: Instance, child_name: str, where: str, server: McpServerEnv) -> tuple[Any, dict]:
        return await self.containers.start(inst, child_name, where, server, self.host.ready_timeout)

    async def stop(self, inst: Instance) -> None:
        await remove_containers(inst)

    def holds_resources(self) -> bool:
        return self.containers.has_own_providers()

    async def aclose(self) -> None:
        await self.containers.aclose()
