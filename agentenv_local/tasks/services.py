"""What the runner hands to every step: the hub's stores, the config, and sandbox providers."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, Protocol

from agentenv_local.errors import ConfigError
from agentenv_local.paths import ProjectPaths
from agentenv_local.plugins import registry

log = logging.getLogger(__name__)


class Store(Protocol):
    """The hub's store (stores.database.DuckDBStore, found through the `stores` entry points): its sub-stores."""

    documents: Any
    records: Any
    runs: Any
    events: Any
    objects: Any


class Config(Protocol):
    """The resolved configuration (agentenv_local.config.Config)."""

    def get(self, path: str, default: Any = None) -> Any: ...


class EnvInstances(Protocol):
    """The hub's deployed env instances (hosting.envs.manager.EnvManager), as the env steps use them."""

    def instance(self, instance_id: str) -> dict: ...

    def admin_token(self, instance_id: str) -> str | None: ...

    async def deploy(self, env_id: str | None = None, version: int | None = None, run_id: str | None = None,
                     gateway_mode: str | None = None, resume: str | None = None,
                     metadata: dict | None = None, *, sandbox_type: str | None = None, cpu: float | None = None,
                     memory_mb: int | None = None, services: Any = None,
                     control_plane_auth: bool | None = None, pool: bool | None = None) -> dict: ...

    async def teardown(self, instance_id: str, reason: str | None = None) -> dict: ...


@dataclass
class RunServices:
    store: Store
    config: Config
    paths: ProjectPaths
    envs: EnvInstances | None = None  # None outside a hub (step tests): env steps say they need one
    _providers: dict[str, Any] = field(default_factory=dict)
    _review_waiters: dict[str, asyncio.Event] = field(default_factory=dict)
    _probed: dict[str, str | None] = field(default_factory=dict)
    # Why a provider earlier in the chain was passed over (shown once per run).
    sandbox_notice: str | None = None
    # The values `secret:` refs (and secret-shaped keys) of the config resolve to: masked wherever a
    # run writes (events, journal, results, errors). Read again when a run starts (`refresh_secrets`).
    _secrets: list[str] = field(default_factory=list)

    def refresh_secrets(self) -> None:
        values = getattr(self.config, "secret_values", None)
        try:
            self._secrets = list(values()) if values is not None else []
        except Exception:  # a config that cannot say keeps the values it said last time
            log.warning("could not read the config's secret values; masking with the last ones read")

    def mask(self, value: Any) -> Any:
        """`value` with every known secret value replaced by `***` (containers changed in place)."""
        if not self._secrets or value is None:
            return value
        from agentenv_local.config.masking import mask_known_secrets_in

        return mask_known_secrets_in(value, self._secrets)

    def _unusable(self, name: str, cls: Any) -> str | None:
        """Why provider `name` cannot be used here (asked once per hub), or None."""
        if getattr(cls, "unusable_reason", None) is None:
            return None
        if name not in self._probed:
            # The provider itself answers (and keeps what it started, such as a service, for the run).
            self._probed[name] = self.sandbox_provider(name).unusable_reason()
        return self._probed[name]

    def default_sandbox_type(self, preference: str | None = None) -> str:
        """The first provider of a fallback chain ("podman,process") that is installed and answers;
        "auto" is "podman,process"."""
        wanted = str(preference or self.config.get("sandbox.default") or "auto")
        chain = [n.strip() for n in wanted.replace("auto", "podman,process").split(",")]
        chain = [n for n in chain if n]
        skipped: list[str] = []
        for i, name in enumerate(chain):
            cls = registry().get("sandbox_providers", name)
            if cls is None:
                continue
            reason = self._unusable(name, cls) if i < len(chain) - 1 else None
            if reason is None:
                if skipped:
                    self.sandbox_notice = f"using the {name} sandbox provider: " + "; ".join(skipped)
                return name
            skipped.append(f"{name} is not usable here ({reason.splitlines()[0]})")
        return chain[-1] if chain else "process"  # unknown: sandbox_provider() explains what exists

    async def aclose(self) -> None:
        """With the hub: let providers free what they hold (a warm pool, a service they started)."""
        for provider in self._providers.values():
            close = getattr(provider, "aclose", None)
            if close is not None:
                try:
                    await close()
                except Exception:  # closing is best effort; the next prune finds leftovers
                    pass

    def sandbox_provider(self, name: str | None = None):
        name = name or self.default_sandbox_type()
        if name not in self._providers:
            cls = registry().get("sandbox_providers", name)
            if cls is None:
                known = ", ".join(sorted(registry().available("sandbox_providers"))) or "none"
                reason = registry().failure("sandbox_providers", name)
                raise ConfigError(
                    f"no sandbox provider named {name!r}" + (f" ({reason})" if reason else ""),
                    hint=f"installed providers: {known}; check `agentenv plugin list`",
                )
            provider_config = self.config.get(f"sandbox.providers.{name}") or {}
            self._providers[name] = cls(self.paths.state_dir, provider_config)
        return self._providers[name]

    def notify_review(self, review_id: str) -> None:
        event = self._review_waiters.get(review_id)
        if event is not None:
            event.set()

    async def review_signal(self, review_id: str, timeout: float) -> None:
        """Sleep until `notify_review(review_id)` or `timeout` seconds, whichever is first."""
        event = self._review_waiters.setdefault(review_id, asyncio.Event())
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except TimeoutError:
            pass
        finally:
            event.clear()
