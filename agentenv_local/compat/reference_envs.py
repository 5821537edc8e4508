"""Env folders as the reference writes them: `server.py` (written with its `agentenv_protocol` SDK), a
`requirements.txt` and a `Dockerfile`, and no `env.toml`. Such a folder is an `mcp_server` env whose server is
`python server.py`, run through `reference_server` so that our SDK stands in for `agentenv_protocol` where the
real one is not installed. The Dockerfile is never built here (its base image comes from a registry); the
requirements are checked against what the interpreter that runs the server has, never pip-installed."""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

from agentenv_local.errors import ValidationError

SERVER_FILE = "server.py"
REQUIREMENTS_FILE = "requirements.txt"
# What runs the folder's server.py: the launcher that puts the stand-in on the import path when it is needed.
LAUNCHER = "agentenv_local.compat.reference_server"
# The reference's env SDK, by distribution; the stand-in covers it where it is not installed.
PROTOCOL_DISTRIBUTION = "agentenv-framework-protocol"
ORIGIN = ("the reference's env folder (server.py, no env.toml): run as `python server.py`, with agentenv's "
          "stand-in for agentenv_protocol where the real one is not installed")

_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")
MAX_REQUIREMENTS_BYTES = 1 << 20


def is_reference_env_folder(folder: Path) -> bool:
    """A folder with the reference's server.py and no env.toml."""
    toml_path = folder / "env.toml"
    if toml_path.exists() or toml_path.is_symlink():
        return False
    return (folder / SERVER_FILE).is_file() and not (folder / SERVER_FILE).is_symlink()


def reference_env_table(folder: Path) -> dict | None:
    """The env.toml table a reference env folder stands for, or None when `folder` is not one; a
    ValidationError naming each requirement this interpreter does not have (and how to install it)."""
    if not is_reference_env_folder(folder):
        return None
    missing = missing_requirements(folder)
    if missing:
        raise ValidationError(f"envs/{folder.name}: its {REQUIREMENTS_FILE} names what cannot be had here",
                              problems=missing,
                              hint="agentenv runs the reference's server.py with the packages it has itself")
    return {"type": "mcp_server", "command": ["python", "-m", LAUNCHER, SERVER_FILE], "description": ORIGIN}


def requirement_names(text: str, where: str) -> tuple[list[str], list[str]]:
    """The distribution names a requirements.txt lists, and the lines it has that cannot be checked here."""
    names: list[str] = []
    problems: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        match = _NAME.match(line)
        if line.startswith("-") or match is None:
            problems.append(f"{where}:{number}: {line!r} is not a plain requirement; agentenv reads only "
                            "'name[extras] <version>' lines (it never runs pip)")
            continue
        names.append(match.group(0))
    return names, problems


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def missing_requirements(folder: Path) -> list[str]:
    """What the folder's requirements.txt names that this interpreter does not have, each with how to get it;
    the reference's own SDK is never missing (the stand-in covers it). Versions are not compared: the
    server runs with what is installed."""
    from agentenv_local.untrusted import UntrustedInputError, read_file

    path = folder / REQUIREMENTS_FILE
    where = f"envs/{folder.name}/{REQUIREMENTS_FILE}"
    if not path.exists() and not path.is_symlink():
        return []
    try:
        text = read_file(path, what=where, max_bytes=MAX_REQUIREMENTS_BYTES).decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return [f"{where}: not UTF-8 text (byte {exc.start}: {exc.reason})"]
    except UntrustedInputError as exc:
        return [str(exc)]
    names, problems = requirement_names(text, where)
    for name in names:
        if _normalized(name) == PROTOCOL_DISTRIBUTION:
            continue
        try:
            metadata.distribution(name)
        except metadata.PackageNotFoundError:
            problems.append(f"{where}: {name!r} is not installed where agentenv runs env servers, and agentenv "
                            f"never installs at deploy time; install it into agentenv's environment "
                            f"(pip install {name}) and deploy again")
    return problems
