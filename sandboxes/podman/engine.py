"""Finding Podman and making it work on this machine.

Podman's defaults fail on some Linux hosts (cgroups v1 with crun, ulimits above the host's hard
limits). `configure()` probes a real `podman run` and, only when it fails for one of those known
reasons, writes a containers.conf with the fix (runtime runc, explicit ulimits no higher than our
own hard limits). Every podman command and service we start gets `CONTAINERS_CONF` pointing at
that file. A laptop where the defaults work gets no file at all.

Settings (`[sandbox.providers.podman]`): `podman` (the binary), `containers_conf` (a file of yours;
then nothing is probed or written).
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
from pathlib import Path
from typing import Any

from agentenv_local.errors import AgentenvError

INSTALL_HINT = ("install Podman (Debian/Ubuntu: `sudo apt-get install -y podman runc`; Fedora: `sudo dnf install "
                "podman`; macOS: `brew install podman && podman machine init && podman machine start`), or use "
                "`--sandbox process`")


class PodmanUnavailable(AgentenvError):
    """Podman is not installed, or it cannot run a container here."""


def user_config_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "agentenv"


def auto_conf_path() -> Path:
    """The containers.conf that `configure()` writes when this machine needs one (one per machine)."""
    return user_config_dir() / "containers.conf"


def podman_binary(config: dict[str, Any] | None = None) -> str:
    configured = (config or {}).get("podman")
    found = shutil.which(configured or "podman")
    if not found:
        raise PodmanUnavailable(
            f"Podman is not installed (no {configured or 'podman'!r} on PATH)", hint=INSTALL_HINT)
    return found


def conf_path(config: dict[str, Any] | None = None) -> Path | None:
    """The containers.conf our podman commands use: the configured one, else the probed one if any."""
    configured = (config or {}).get("containers_conf")
    if configured:
        return Path(configured).expanduser()
    auto = auto_conf_path()
    return auto if auto.is_file() else None


def podman_env(config: dict[str, Any] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    path = conf_path(config)
    if path is not None:
        env["CONTAINERS_CONF"] = str(path)
    return env


def run_podman(args: list[str], config: dict[str, Any] | None = None, *, timeout: float = 120,
               input: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([podman_binary(config), *args], env=podman_env(config), capture_output=True,
                          timeout=timeout, input=input, check=False)


# -- probing ---------------------------------------------------------------------------------
def _host_ulimits(ceiling: int = 65536) -> list[str]:
    """Explicit ulimits no higher than our own hard limits (and `ceiling`)."""
    limits = []
    for name, res in (("nofile", resource.RLIMIT_NOFILE), ("nproc", resource.RLIMIT_NPROC)):
        _soft, hard = resource.getrlimit(res)
        cap = 1 << 20 if hard == resource.RLIM_INFINITY else hard
        value = min(cap, ceiling)
        limits.append(f"{name}={value}:{value}")
    return limits


def render_conf(*, runtime: str | None, ulimits: list[str] | None) -> str:
    lines = ["# Written by `agentenv sandbox setup`: the fixes this machine's Podman needs.", "[containers]",
             "init = true"]
    if ulimits:
        lines.append("default_ulimits = [" + ", ".join(f'"{u}"' for u in ulimits) + "]")
    if runtime:
        lines += ["[engine]", f'runtime = "{runtime}"']
    return "\n".join(lines) + "\n"


def _try_run(image: str, env: dict[str, str], binary: str) -> tuple[bool, str]:
    proc = subprocess.run([binary, "run", "--rm", "--network", "none", image, "true"], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    return proc.returncode == 0, (proc.stderr or proc.stdout).strip()


def configure(probe_image: str, config: dict[str, Any] | None = None, *, log=print) -> dict[str, Any]:
    """Probe `podman run` with `probe_image`; write the containers.conf fixes this machine needs.

    Returns {"conf": path or None, "fixes": [...]}; raises PodmanUnavailable when nothing works.
    """
    binary = podman_binary(config)
    if (config or {}).get("containers_conf"):
        ok, err = _try_run(probe_image, podman_env(config), binary)
        if not ok:
            raise PodmanUnavailable(f"podman cannot run a container with your containers_conf: {err}")
        return {"conf": str(conf_path(config)), "fixes": ["(your containers_conf)"]}
    target = auto_conf_path()
    try:
        return _probe(probe_image, binary, target, log)
    except BaseException:
        target.unlink(missing_ok=True)  # never leave a half-right fix behind
        raise


def _probe(probe_image: str, binary: str, target: Path, log) -> dict[str, Any]:
    base_env = {k: v for k, v in os.environ.items() if k != "CONTAINERS_CONF"}
    ok, err = _try_run(probe_image, base_env, binary)
    if ok:
        target.unlink(missing_ok=True)
        return {"conf": None, "fixes": []}
    runtime = None
    ulimits = None
    ceiling = 65536
    fixes = []
    for _ in range(8):  # each failure names one problem; fix it and try again
        lowered = err.lower()
        if ("cgroup" in lowered and "crun" in lowered or "hybrid" in lowered) and runtime is None:
            if not shutil.which("runc"):
                raise PodmanUnavailable(f"podman's runtime crun fails here ({err.splitlines()[-1]})",
                                        hint="install runc (`sudo apt-get install -y runc`)")
            runtime = "runc"
            fixes.append("runtime runc (crun cannot run containers with this machine's cgroups)")
        elif "rlimit" in lowered and ceiling >= 1024:
            # Podman's defaults exceed what this machine lets a container have; some hosts refuse even
            # less than our own hard limits, so step down until one is accepted.
            ulimits = _host_ulimits(ceiling)
            ceiling //= 4
            fixes = [f for f in fixes if not f.startswith("ulimits")]
            fixes.append(f"ulimits {', '.join(ulimits)} (podman's defaults exceed this machine's limits)")
        else:
            raise PodmanUnavailable(f"podman cannot run a container here: {err}",
                                    hint="check `podman info`; see docs/sandboxes.md, Troubleshooting")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(render_conf(runtime=runtime, ulimits=ulimits))
        log(f"podman: applying fix: {fixes[-1]}")
        ok, err = _try_run(probe_image, {**base_env, "CONTAINERS_CONF": str(target)}, binary)
        if ok:
            return {"conf": str(target), "fixes": fixes}
    raise PodmanUnavailable(f"podman still cannot run a container after {', '.join(fixes)}: {err}")
