"""Where configuration can come from, found or not: for `agentenv config sources` and `config debug`.

Unlike `load_config`, nothing here raises on a bad file or variable: a layer that cannot be read is
reported with why, since "the file I edited is not being read" is what these commands are for.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentenv_local.config import schema
from agentenv_local.errors import ConfigError
from agentenv_local.paths import STATE_DIR_NAME, find_state_dir


def search_path(start: Path | None = None, environ: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """Every place looked at for the state dir and the config file, in the order they are looked at."""
    env = os.environ if environ is None else environ
    out: list[dict[str, Any]] = []
    home = env.get("AGENTENV_HOME")
    if home:
        path = Path(home).expanduser().resolve()
        out.append({"path": str(path), "why": "state dir from $AGENTENV_HOME", "exists": path.is_dir(), "used": True})
    else:
        here = (start or Path.cwd()).resolve()
        found = False
        for folder in (here, *here.parents):
            candidate = folder / STATE_DIR_NAME
            exists = candidate.is_dir()
            out.append({"path": str(candidate), "why": "state dir, walking up from the working directory",
                        "exists": exists, "used": exists and not found})
            if exists:
                found = True
                break
        if not found:
            out.append({"path": str(here / STATE_DIR_NAME), "why": "state dir when none is found (made when needed)",
                        "exists": False, "used": True})
    state_dir = find_state_dir(start, environ)
    named = env.get("AGENTENV_CONFIG")
    if named:
        path = Path(named).expanduser()
        path = path if path.is_absolute() else Path.cwd() / path
        out.append({"path": str(path), "why": "config file from $AGENTENV_CONFIG", "exists": path.exists(),
                    "used": str(path) != os.devnull})
    else:
        path = state_dir / "config.toml"
        out.append({"path": str(path), "why": "config file in the state dir", "exists": path.exists(),
                    "used": path.exists()})
    return out


def _file_layer(start: Path | None, environ: Mapping[str, str] | None) -> dict[str, Any]:
    from agentenv_local.config.checking import check_tree
    from agentenv_local.config.files import discover, read_toml

    env = os.environ if environ is None else environ
    state_dir = find_state_dir(start, environ)
    how = "from $AGENTENV_CONFIG" if env.get("AGENTENV_CONFIG") else "in the state dir"
    layer: dict[str, Any] = {"kind": "file", "where": str(state_dir / "config.toml"), "present": False,
                             "detail": how, "shadows": []}
    try:
        path = discover(state_dir, env)
    except ConfigError as exc:
        layer.update(where=env.get("AGENTENV_CONFIG") or layer["where"], detail=f"{how}; unreadable: {exc.message}")
        return layer
    if path is None:
        if env.get("AGENTENV_CONFIG"):
            layer.update(where=env["AGENTENV_CONFIG"], detail="$AGENTENV_CONFIG says no file")
        else:
            layer["detail"] = f"{how}; not there"
        return layer
    layer.update(where=str(path), present=True)
    try:
        layer["shadows"] = sorted(".".join(p) for p in check_tree(read_toml(path), str(path)))
    except ConfigError as exc:
        layer["detail"] = f"{how}; unreadable: {exc.message}"
    return layer


def sources(start: Path | None = None, environ: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """Every layer the configuration is built from, lowest precedence first, found or not.

    Each is {kind, where, present, detail, shadows}: `shadows` lists the keys the layer sets (over
    the layers before it).
    """
    env = os.environ if environ is None else environ
    layers: list[dict[str, Any]] = [
        {"kind": "default", "where": "built-in defaults", "present": True,
         "detail": f"{len(schema.leaves())} keys", "shadows": []},
        _file_layer(start, environ),
    ]
    known = schema.env_vars()
    for var, node in sorted(known.items()):
        layers.append({"kind": "env", "where": f"${var}", "present": bool(env.get(var)), "detail": "",
                       "shadows": [node.dotted]})
    for var in sorted(v for v in env if v.startswith(schema.ENV_PREFIX) and v not in known
                      and v not in schema.RESERVED_ENV):
        layers.append({"kind": "env", "where": f"${var}", "present": True,
                       "detail": "ignored: matches no config key", "shadows": []})
    layers.append(_secrets_layer(start, environ))
    layers.append({"kind": "code", "where": "overrides passed in code (load_config(overrides=...))",
                   "present": False, "detail": "none from the command line", "shadows": []})
    return layers


def _secrets_layer(start: Path | None, environ: Mapping[str, str] | None) -> dict[str, Any]:
    """Where `secret:` references are read: not a layer of keys, but a value's source all the same."""
    from agentenv_local.config.loader import load_config

    layer: dict[str, Any] = {"kind": "secrets", "where": "", "present": False,
                             "detail": "what secret: references read", "shadows": []}
    try:
        config = load_config(start, environ=environ)
        file_value, use_env = config.get("secrets.file"), config.get("secrets.use_env")
    except ConfigError as exc:
        layer.update(where="(unknown)", detail=f"the config cannot be loaded: {exc.message}")
        return layer
    path = Path(str(file_value)).expanduser()
    path = path if path.is_absolute() else config.state_dir / path
    layer.update(where=str(path), present=path.is_file(),
                 detail="what secret: references read" + ("; then the environment" if use_env else ""))
    return layer
