"""A small client of the Podman REST service for the calls on a sandbox's critical path.

Importing podman-py (requests, urllib3, rich) costs a one-shot command 60-170 ms of its ~1 s; the few
calls that make and remove a sandbox (ping, image exists, create, start, inspect, remove) need only HTTP/1.1 over the
service's unix socket, which the standard library's http.client speaks. Everything else (listing,
pruning, logs) still goes through podman-py, imported when first needed.

`create_spec()` renders the same libpod SpecGenerator that podman-py's `containers.create()` sends for
the keyword arguments the provider uses (tests/sandboxes/podman/test_libpod.py compares the two), so a
container gets exactly the hardening flags it got through podman-py.
"""

from __future__ import annotations

import http.client
import json
import socket
import urllib.parse
from pathlib import Path
from typing import Any

# The libpod API path every request goes to: Podman 4.x and 5.x services both serve v4.0.0.
API_PREFIX = "/v4.0.0/libpod"
_SIZE_UNITS = {"b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


class LibpodError(Exception):
    """The service answered a request with an error (`status`; `explanation`: the service's message)."""

    def __init__(self, status: int, explanation: str):
        super().__init__(f"{status}: {explanation}")
        self.status = status
        self.explanation = explanation


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float):
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.timeout)
            sock.connect(self._path)
        except BaseException:
            sock.close()
            raise
        self.sock = sock


class LibpodClient:
    """One connection per request: safe from any thread, and nothing to close."""

    def __init__(self, socket_path: Path | str, timeout: float = 120.0):
        self.socket_path = str(socket_path)
        self.timeout = timeout

    def request(self, method: str, path: str, body: Any = None, *, ok: tuple[int, ...] = (200, 201, 204, 304),
                timeout: float | None = None) -> tuple[int, bytes]:
        """(status, body) of `method API_PREFIX+path`; LibpodError for a status outside `ok`."""
        conn = _UnixConnection(self.socket_path, self.timeout if timeout is None else timeout)
        try:
            data = None if body is None else json.dumps(body, sort_keys=True).encode()
            headers = {"Content-Type": "application/json"} if data is not None else {}
            conn.request(method, API_PREFIX + path, body=data, headers=headers)
            response = conn.getresponse()
            status, payload = response.status, response.read()
        finally:
            conn.close()
        if status not in ok:
            raise LibpodError(status, _error_message(payload) or f"HTTP {status} from {method} {path}")
        return status, payload

    def ping(self, timeout: float) -> bool:
        status, payload = self.request("GET", "/_ping", timeout=timeout)
        return status == 200 and payload.strip() == b"OK"

    def image_exists(self, ref: str) -> bool:
        status, _ = self.request("GET", f"/images/{urllib.parse.quote_plus(ref)}/exists", ok=(204, 404))
        return status == 204

    def create_container(self, spec: dict[str, Any]) -> str:
        _, payload = self.request("POST", "/containers/create", spec)
        return str(json.loads(payload)["Id"])

    def start_container(self, name: str) -> None:
        self.request("POST", f"/containers/{urllib.parse.quote_plus(name)}/start")

    def remove_container(self, name: str) -> None:
        """`podman rm --force --time 0 --ignore NAME`: killed at once (no stop grace), gone already is fine."""
        self.request("DELETE", f"/containers/{urllib.parse.quote_plus(name)}?force=true&ignore=true&timeout=0")

    def inspect_container(self, name: str) -> dict[str, Any]:
        _, payload = self.request("GET", f"/containers/{urllib.parse.quote_plus(name)}/json")
        data = json.loads(payload)
        return data if isinstance(data, dict) else {}


def _error_message(payload: bytes) -> str:
    try:
        data = json.loads(payload)
    except ValueError:
        return payload.decode("utf-8", "replace").strip()
    if isinstance(data, dict):
        return str(data.get("message") or data.get("cause") or "").strip()
    return ""


def _bytes(size: str | int) -> int:
    """'512m' -> bytes, as podman-py reads mem_limit."""
    if isinstance(size, int):
        return size
    text = size.strip().lower()
    if text and text[-1] in _SIZE_UNITS:
        return int(float(text[:-1]) * _SIZE_UNITS[text[-1]])
    return int(text)


def create_spec(image: str, *, name: str, labels: dict[str, str], mounts: list[dict[str, Any]],
                volumes: dict[str, dict[str, Any]], network_mode: str, init: bool, stop_timeout: int,
                read_only: bool, cap_drop: list[str], no_new_privileges: bool, mem_limit: str, cpu_period: int,
                cpu_quota: int, pids_limit: int, environment: dict[str, str], working_dir: str,
                command: list[str] | None = None, userns_mode: str | None = None,
                idmappings: dict[str, list[dict[str, int]]] | None = None,
                network_options: dict[str, list[str]] | None = None,
                ports: dict[str, tuple[str, int]] | None = None) -> dict[str, Any]:
    """The SpecGenerator podman-py's `containers.create(image, **same keywords)` posts (empty values left out)."""
    all_mounts = [{"destination": m["target"], "options": list(m.get("options") or []), "source": m["source"],
                   "type": m["type"]}
                  for m in mounts]
    all_mounts += [{"destination": v["bind"], "options": list(v.get("extended_mode") or []), "source": src,
                    "type": "bind"} for src, v in volumes.items()]
    spec: dict[str, Any] = {
        "image": image, "name": name, "labels": dict(labels), "mounts": all_mounts, "netns": {"nsmode": network_mode},
        "init": init, "stop_timeout": stop_timeout, "read_only_filesystem": read_only, "cap_drop": list(cap_drop),
        "no_new_privileges": no_new_privileges, "env": dict(environment), "work_dir": working_dir,
        "resource_limits": {"cpu": {"period": cpu_period, "quota": cpu_quota},
                            "memory": {"limit": _bytes(mem_limit)}, "pids": {"limit": pids_limit}},
        "command": list(command) if command else None,
        "userns": {"nsmode": userns_mode} if userns_mode else None,
        "idmappings": idmappings, "network_options": network_options,
        "portmappings": [{"container_port": int(port.split("/")[0]), "host_ip": host_ip, "host_port": host_port,
                          "protocol": port.partition("/")[2] or "tcp"}
                         for port, (host_ip, host_port) in (ports or {}).items()],
    }
    return {k: v for k, v in spec.items() if v is not None and not (isinstance(v, (list, dict, str)) and not v)}
