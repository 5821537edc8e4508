"""Helpers for the gateway server tests (`from kits.gateway import ...`): real transports only: uvicorn on
a free loopback port in a thread, env subprocesses, mcp 2.x clients over HTTP."""

from __future__ import annotations

import contextlib

# The transports (uvicorn on a free port, env subprocesses, `agentenv env dev`) are the env tests' kit.
from kits.env_sdk import (
    DEV_V1,
    DEV_V2,
    ECHO,
    NOTES,
    ROOT,
    DevProcess,
    env_subprocess,
    free_port,
    serving_app,
)

__all__ = ["DEV_V1", "DEV_V2", "ECHO", "NOTES", "ROOT", "DevProcess", "env_subprocess", "free_port", "serving_app",
           "gateway_serving", "http", "load"]


def load(path):
    from agentenv_local.env import load_env

    return load_env(path)


@contextlib.contextmanager
def gateway_serving(name, children, **options):
    """A Gateway over `children`, served over HTTP; yields (base URL, gateway).

    These tests check the reference's control-plane semantics, so the gateway is built with the reference's open
    control plane (`control_plane_auth=False`) unless a test asks otherwise; the admin token is tested in
    tests/reliability/test_control_plane.py."""
    from agentenv_local.gateway.server import Gateway

    options.setdefault("control_plane_auth", False)
    gw = Gateway(name, children, **options)
    with serving_app(gw.app()) as base:
        yield base, gw


def http(base, **headers):
    import httpx2

    return httpx2.Client(base_url=base, headers=headers, timeout=30)
