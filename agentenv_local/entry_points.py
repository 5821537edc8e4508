"""The entry points of the distributions on sys.path, read straight from their `*.dist-info` (or `*.egg-info`)
folders.

Every command looks up at least one plugin group (agentenv_local/plugins.py). `importlib.metadata` answers the
same question, but importing it (email, zipfile, csv, its path machinery) costs more CPU than the lookup:
~90 ms of a short command's ~450 ms on these machines, measured. This reads the two small files it needs, as
`importlib.metadata.entry_points()` does: the folders of each sys.path entry in order, the first distribution
of a name winning (a later copy of it, e.g. an older install behind an editable one, is ignored).

    for point in scan():
        point.group, point.name, point.value, point.distribution, point.version
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass

_SUFFIXES = (".dist-info", ".egg-info")


@dataclass(frozen=True)
class EntryPoint:
    group: str
    name: str
    value: str  # "module:attr"
    distribution: str
    version: str


def normalized_name(name: str) -> str:
    """A distribution's name as packaging compares names (PEP 503): `Pydantic_Core` -> `pydantic-core`."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _header(folder: str) -> tuple[str, str]:
    """Name and Version from a distribution's METADATA (or PKG-INFO): the header, up to its first blank line."""
    name = version = ""
    for file_name in ("METADATA", "PKG-INFO"):
        try:
            with open(os.path.join(folder, file_name), encoding="utf-8", errors="replace") as handle:
                for line in handle:
                    if not line.strip():
                        break
                    key, _, value = line.partition(":")
                    if key == "Name" and not name:
                        name = value.strip()
                    elif key == "Version" and not version:
                        version = value.strip()
        except OSError:
            continue
        break
    return name, version


def _parse(text: str) -> dict[str, list[tuple[str, str]]]:
    """entry_points.txt (an INI file: `[group]`, then `name = module:attr` lines) by group."""
    groups: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = groups.setdefault(line[1:-1].strip(), [])
        elif current is not None and "=" in line:
            name, _, value = line.partition("=")
            current.append((name.strip(), value.strip()))
    return groups


def _distribution_folders() -> list[str]:
    folders: list[str] = []
    for entry in dict.fromkeys(sys.path):  # in order, each once
        root = entry or os.getcwd()
        try:
            names = sorted(os.listdir(root))
        except OSError:  # a zip, a missing folder
            continue
        folders += [os.path.join(root, name) for name in names if name.endswith(_SUFFIXES)]
    return folders


def scan() -> list[EntryPoint]:
    """Every entry point of the distributions on sys.path now (the caller keeps what it needs: plugins.py's
    registry scans once, so a registry made after an install sees it)."""
    points: list[EntryPoint] = []
    seen: set[str] = set()
    for folder in _distribution_folders():
        # "name-version.dist-info": the first distribution of a name wins, as in importlib.metadata
        stem = os.path.basename(folder).rsplit(".", 1)[0]
        key = normalized_name(stem.split("-", 1)[0])
        if key in seen:
            continue
        seen.add(key)
        try:
            with open(os.path.join(folder, "entry_points.txt"), encoding="utf-8", errors="replace") as handle:
                text = handle.read()
        except OSError:  # most distributions have none
            continue
        name, version = _header(folder)
        for group, pairs in _parse(text).items():
            points += [EntryPoint(group, ep_name, value, name or stem, version or "?") for ep_name, value in pairs]
    return points
