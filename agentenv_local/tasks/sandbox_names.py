"""Sandbox provider names as tasks write them, mapped onto the providers installed here.

The reference's bundles say `sandbox_type: "local"`: its local provider runs a `vm` sandbox as a
work folder with host subprocesses (our `process`) and a `container` sandbox in Docker (our
`podman`, falling back to `process` with a notice where Podman is not ready, so a reference bundle
still runs on a machine without it). Its cloud providers (modal, e2b, ...) have no counterpart offline:
naming one is a clear error that says what is installed and that `--sandbox` overrides a step's own
`sandbox_type`.
A provider installed under one of these names (a plugin called `local`, say) wins over the mapping.
"""

from __future__ import annotations

from agentenv_local.errors import ConfigError
from agentenv_local.plugins import registry

# The reference's spellings for providers on this machine -> ours, by sandbox_mode.
_LOCAL_SPELLINGS: dict[str, dict[str, str]] = {
    "local": {"vm": "process", "container": "podman,process"},
    "docker": {"vm": "podman", "container": "podman"},
}
# The reference's providers that run elsewhere (its built-in registry).
REFERENCE_CLOUD_PROVIDERS = frozenset({"modal", "modal_vm", "e2b", "sail_vm", "smol_vm", "tensorlake", "vercel",
                                       "tenki", "boxd", "daytona"})


def our_sandbox_type(name: str, mode: str = "vm") -> str:
    """`name` (one provider or a fallback chain "a,b") with the reference's spellings replaced by ours.

    `mode` is the sandbox_mode of what will run ("vm" or "container"): the reference's `local` means
    a different provider of ours for each. Raises ConfigError for the reference's cloud providers.
    """
    return ",".join(_one(part.strip(), mode) for part in name.split(",") if part.strip())


def _one(name: str, mode: str) -> str:
    if registry().get("sandbox_providers", name) is not None:
        return name
    spelling = _LOCAL_SPELLINGS.get(name)
    if spelling is not None:
        return spelling.get(mode, spelling["vm"])
    if name in REFERENCE_CLOUD_PROVIDERS:
        installed = ", ".join(sorted(registry().available("sandbox_providers"))) or "none"
        raise ConfigError(
            f"sandbox provider {name!r} is a cloud provider of the reference and does not run here",
            hint=f"installed providers: {installed}; run with --sandbox process (or podman), which overrides "
                 "a step's sandbox_type, or change the step's sandbox_type")
    return name
