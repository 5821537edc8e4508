"""The built-in top-level commands, as entries of the `agentenv_local.cli` entry-point group.

Built-ins register exactly like a plugin's commands (pyproject.toml names each one here), so `agentenv`
has one way in for every command. Each is a LazyCommand: its name and one-line help are known without
importing its module, which is imported only when the command runs (so `agentenv --help` stays fast).
A plugin can use LazyCommand for the same reason.
"""

from __future__ import annotations

import importlib
from typing import Any

import click


class LazyCommand(click.Command):
    """A command known by "module:attribute" and a one-line help; the module is imported when it runs."""

    def __init__(self, name: str, target: str, short_help: str) -> None:
        super().__init__(name, short_help=short_help, help=short_help)
        self.target = target

    def load(self) -> click.Command:
        module_name, _, attr = self.target.partition(":")
        obj: Any = importlib.import_module(module_name)
        for part in filter(None, attr.split(".")):
            obj = getattr(obj, part)
        if not isinstance(obj, click.Command):
            raise TypeError(f"{self.target} is a {type(obj).__name__}, not a click command")
        return obj


def plugin_problem(name: str, obj: Any) -> str | None:
    """Why `obj` cannot be the command `agentenv NAME` (an `agentenv_local.cli` entry), or None."""
    if not isinstance(obj, click.Command):
        return f"it is a {type(obj).__name__}, not a click command (or group)"
    return None


run = LazyCommand("run", "agentenv_local.cli.run:run", "Run a bundle's tasks, or list the bundles there are.")
runs = LazyCommand("runs", "agentenv_local.cli.runs:runs", "List, show, resume, cancel and diff runs.")
human = LazyCommand("human", "agentenv_local.cli.human:human",
                    "Answer the questions human agents of live runs wait on.")
task = LazyCommand("task", "agentenv_local.cli.task:task", "Create, get, validate and run stored tasks.")
artifact = LazyCommand("artifact", "agentenv_local.cli.artifact:artifact",
                       "Put, get and list artifacts (files and file bundles).")
eval_group = LazyCommand("eval", "agentenv_local.cli.eval:eval_group", "Create and run evals (sets of tasks).")
env = LazyCommand("env", "agentenv_local.cli.env:env_group",
                  "Put, deploy and develop environments (MCP servers, multi envs).")
gateway = LazyCommand("gateway", "agentenv_local.cli.gateway:gateway_group",
                      "Use a deployed env's gateway from stdio MCP clients.")
export = LazyCommand("export", "agentenv_local.cli.export:export_group",
                   "Export finished runs as episodes (JSONL or Parquet) for training.")
agent = LazyCommand("agent", "agentenv_local.cli.agent:agent_group", "Store, list, deploy and validate A2A agents.")
sandbox = LazyCommand("sandbox", "agentenv_local.cli.sandbox:sandbox_group",
                      "Set up Podman; list, exec into, read logs of and prune sandboxes.")
image = LazyCommand("image", "agentenv_local.cli.image:image_group",
                    "Build, import and list images in Podman's local storage.")
docs = LazyCommand("docs", "agentenv_local.cli.docs:docs_group",
                   "Search and read the docs, or serve them over MCP (offline).")
config = LazyCommand("config", "agentenv_local.cli.config:config",
                     "Show the resolved configuration and where each value came from.")
plugin = LazyCommand("plugin", "agentenv_local.cli.plugin:plugin",
                     "List, show and check installed plugins; add and remove them with pip.")
bundle = LazyCommand("bundle", "agentenv_local.cli.bundle:bundle_group",
                   "Create bundle folders (new, or a stored task or eval).")
replay = LazyCommand("replay", "agentenv_local.cli.replay:replay",
                     "Replay recorded runs against the current env and report what differs.")
up = LazyCommand("up", "agentenv_local.cli.hub:up", "Start a long-lived hub for this project.")
down = LazyCommand("down", "agentenv_local.cli.hub:down", "Stop this project's hub.")
store = LazyCommand("store", "agentenv_local.cli.store:store_group",
                    "Move the project's object store to another one (migrate-objects, cleanup-objects).")
