"""Serving an agent from the command line.

    python -m agentenv_local.agents scripted --plan plan.json --port 0
    python -m agentenv_local.agents path/to/agent.py[:ClassName] --port 8000 --config '{"model": "x"}'
    python -m agentenv_local.agents package.module:ClassName

SPEC is ``scripted`` (the built-in scripted agent), a Python file or a dotted module, optionally ``:Name`` of an
``Agent`` subclass or instance (without it, the one defined there). Once listening it prints to stderr
``agentenv agent 'NAME' serving on http://HOST:PORT (card /.well-known/agent-card.json, a2a /a2a)``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .base import Agent


class AgentLoadError(Exception):
    """The SPEC names no agent that can be loaded."""


def load_agent(spec: str | type | Agent, **config: Any) -> Agent:
    from agentenv_local.env.serve import EnvLoadError, _split_target, load_module

    if isinstance(spec, Agent):
        return spec
    if isinstance(spec, type):
        if not issubclass(spec, Agent):
            raise AgentLoadError(f"{spec.__name__} is not a subclass of agentenv_local.agents.Agent")
        return spec(**config)
    from .builtin import named_agents

    spec = named_agents().get(spec, spec)
    module_ref, attr = _split_target(spec)
    try:
        module = load_module(module_ref)
    except EnvLoadError as e:
        raise AgentLoadError(str(e)) from None
    if attr:
        value = getattr(module, attr, None)
        if value is None:
            raise AgentLoadError(f"{module_ref} has no {attr!r}")
        candidates = [value]
    else:
        candidates = [v for v in vars(module).values() if isinstance(v, Agent)] or [
            v for v in vars(module).values()
            if isinstance(v, type) and issubclass(v, Agent) and v is not Agent and v.__module__ == module.__name__]
        if len(candidates) != 1:
            found = "none" if not candidates else ", ".join(getattr(c, "__name__", repr(c)) for c in candidates)
            raise AgentLoadError(f"{module_ref} must define exactly one Agent subclass (found: {found}); pick one "
                                 f"with {module_ref}:NAME")
    value = candidates[0]
    if isinstance(value, Agent):
        return value
    if isinstance(value, type) and issubclass(value, Agent):
        return value(**config)
    raise AgentLoadError(f"{spec} is a {type(value).__name__}, not an Agent subclass or instance")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agentenv_local.agents",
                                     description="Serve an agent over A2A (JSON-RPC at /a2a, card, /ext/*).")
    parser.add_argument("spec", help="'scripted', path/to/agent.py[:ClassName] or package.module[:ClassName]")
    parser.add_argument("--host", default=None, help="address to bind (default: $A2A_HOST or 127.0.0.1)")
    parser.add_argument("--port", type=int, default=None, help="port (default: $A2A_PORT or 8000; 0 = any free)")
    parser.add_argument("--config", default=None, help="initial config as a JSON object")
    parser.add_argument("--plan", default=None, help="the scripted agent's plan: a JSON file")
    parser.add_argument("--public-url", default=None, help="the base URL the card advertises")
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args(argv)
    try:
        config = json.loads(args.config) if args.config else {}
        if not isinstance(config, dict):
            raise ValueError("not an object")  # reported with the JSON errors
    except ValueError as e:
        print(f"Error: --config must be a JSON object ({e})", file=sys.stderr)
        return 2
    if args.plan:
        config["plan"] = args.plan
    try:
        agent = load_agent(args.spec, **config)
    except AgentLoadError as e:
        print(f"Error: {e}", file=sys.stderr)
        return 2
    except ValueError as e:   # pydantic: a bad config
        print(f"Error: the config is not valid for {args.spec}: {e}", file=sys.stderr)
        return 2
    from .server import serve

    try:
        serve(agent, args.host, args.port, log_level=args.log_level, public_url=args.public_url)
    except (OSError, ValueError) as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0
