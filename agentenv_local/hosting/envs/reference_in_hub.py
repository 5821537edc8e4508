"""A reference env folder's server.py (its `agentenv_protocol` SDK, no env.toml) loaded into the hub, as a module
env is (in_hub.py), when that is safe: no env_vars (the hub's environment is shared), and a server.py whose only
code run at import is imports, definitions and a `__main__` guard (so importing it starts no server), with one
AgentEnvEnvironment class to instantiate. Otherwise it runs as a subprocess, as before (reference_servers.py).

Our SDK stands in for `agentenv_protocol` when the real one is not installed, as in the launcher
(compat/reference_server.py): here it is registered under that name in the hub's modules."""

from __future__ import annotations

import ast
import importlib.util
import sys
import threading
from pathlib import Path

from agentenv_local.compat.reference_envs import SERVER_FILE

BASE = "AgentEnvEnvironment"
_SERVE_CALLS = frozenset({"serve", "serve_stdio", "run"})
_lock = threading.Lock()


def _name(node: ast.expr) -> str:
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _main_guard(node: ast.stmt) -> bool:
    test = getattr(node, "test", None)
    return (isinstance(node, ast.If) and isinstance(test, ast.Compare) and _name(test.left) == "__name__"
            and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators))


def in_hub_class(folder: Path) -> str | None:
    """The one AgentEnvEnvironment class server.py defines, when importing it starts nothing; else None."""
    try:
        tree = ast.parse((folder / SERVER_FILE).read_bytes())
    except (OSError, SyntaxError, ValueError):
        return None  # the subprocess reports it, as before
    classes = [node.name for node in tree.body
               if isinstance(node, ast.ClassDef) and any(_name(base) == BASE for base in node.bases)]
    if len(classes) != 1:
        return None
    for node in tree.body:
        if _main_guard(node) or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call) and _name(sub.func) in _SERVE_CALLS:
                return None  # a server started at import would hold the load
    return classes[0]


def ensure_stand_in() -> None:
    """`agentenv_protocol` importable in the hub: the real one if installed, else our stand-in under its name."""
    from agentenv_local.compat.reference_server import SHIMS, needs_stand_in

    with _lock:
        if "agentenv_protocol" in sys.modules or not needs_stand_in():
            return
        init = SHIMS / "agentenv_protocol" / "__init__.py"
        spec = importlib.util.spec_from_file_location("agentenv_protocol", init,
                                                      submodule_search_locations=[str(init.parent)])
        assert spec is not None and spec.loader is not None  # a file we ship
        module = importlib.util.module_from_spec(spec)
        sys.modules["agentenv_protocol"] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules["agentenv_protocol"]
            raise
