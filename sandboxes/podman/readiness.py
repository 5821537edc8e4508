"""Is Podman set up here? Answered from files alone, so `sandbox.default = "auto"` decides at once.

`agentenv sandbox setup` (or the first explicit podman run) probes this machine's fixes and leaves a
marker beside the probed containers.conf. The marker records a fingerprint of the container
configuration the probe passed with (our fixes file, else the `CONTAINERS_CONF` Podman was given). `auto`
takes Podman only when the marker is there and the configuration in force still matches it: a Podman that
was never set up, or whose configuration changed since, would otherwise be found out only by a container
start that fails (`error setting rlimit ...`) after the service has started and the base image was built.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

from .engine import auto_conf_path, conf_path

SETUP_HINT = "run `agentenv sandbox setup`"


def marker_path() -> Path:
    return auto_conf_path().with_suffix(".probed")


def conf_fingerprint(config: dict[str, Any] | None = None) -> str:
    """A digest of the containers.conf our podman commands run with (our fixes, else the caller's)."""
    path = conf_path(config)
    if path is None and os.environ.get("CONTAINERS_CONF"):
        path = Path(os.environ["CONTAINERS_CONF"])
    if path is None:
        return "podman-defaults"
    try:
        text = path.read_bytes()
    except OSError:
        text = b"(unreadable)"
    return hashlib.sha256(str(path).encode() + b"\0" + text).hexdigest()[:16]


def mark_set_up(config: dict[str, Any] | None = None) -> None:
    """Record that a probe passed with the configuration in force now."""
    marker = marker_path()
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps({"at": time.time(), "conf": conf_fingerprint(config)}))


def not_ready_reason(config: dict[str, Any] | None = None) -> str | None:
    """Why Podman is not known to be ready here (one line naming the setup command), or None.

    A `containers_conf` of the user's own is trusted as it is (nothing is probed for it). A marker written
    before fingerprints were recorded is trusted too (the machines it came from were set up)."""
    if (config or {}).get("containers_conf"):
        return None
    try:
        recorded = json.loads(marker_path().read_text())
    except FileNotFoundError:
        return f"Podman is installed but not set up here: {SETUP_HINT}"
    except (OSError, ValueError):
        return f"Podman's setup record {marker_path()} is unreadable: {SETUP_HINT}"
    wanted = recorded.get("conf") if isinstance(recorded, dict) else None
    if wanted is not None and wanted != conf_fingerprint(config):
        return f"Podman's container configuration changed since it was set up: {SETUP_HINT}"
    return None
