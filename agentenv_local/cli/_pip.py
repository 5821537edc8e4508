"""pip of the interpreter agentenv runs on (`sys.executable -m pip`), for `agentenv plugin add|remove`.

Installing into that interpreter is what makes a plugin's entry points visible to agentenv; another pip
on PATH may belong to another environment. Every call is a real subprocess; what it would change is
asked of pip itself (`install --dry-run --report`) before anything changes.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata

from agentenv_local.errors import ValidationError

PIP = (sys.executable, "-m", "pip", "--disable-pip-version-check")


def normalized(name: str) -> str:
    """A distribution name as pip compares them (PEP 503): case, `_`, `.` and `-` do not matter."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass
class PipResult:
    ok: bool
    output: str


def run(args: list[str], *, timeout: float = 900) -> PipResult:
    """Run pip with `args`; its combined output (no traceback escapes: a failure is returned)."""
    try:
        proc = subprocess.run([*PIP, *args], capture_output=True, text=True, timeout=timeout, check=False,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return PipResult(False, f"pip {args[0]} did not finish in {timeout:.0f} s")
    return PipResult(proc.returncode == 0, (proc.stdout + proc.stderr).strip())


def planned_installs(specs: list[str], index_url: str | None) -> list[tuple[str, str]]:
    """(name, version) of every distribution `pip install SPECS` would install or change, asked of pip."""
    extra = ["--index-url", index_url] if index_url else []
    try:
        proc = subprocess.run([*PIP, "install", "--dry-run", "--quiet", "--report", "-", *extra, *specs],
                              capture_output=True, text=True, timeout=900, check=False, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise ValidationError("pip install --dry-run did not finish in 900 s; nothing was installed",
                              hint="check the network or give a local path or wheel") from None
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-8:])
        raise ValidationError(f"pip cannot install {' '.join(specs)}; nothing was installed:\n{tail}",
                              hint="check the names and versions (a local folder or wheel works offline)")
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise ValidationError("pip's --report output is not JSON; nothing was installed",
                              hint="upgrade pip (22.2 or newer): python -m pip install -U pip") from None
    return [(item["metadata"]["name"], item["metadata"]["version"]) for item in report.get("install", [])]


def installed(name: str) -> metadata.Distribution | None:
    """The installed distribution of that name (compared as pip does), or None."""
    try:
        return metadata.distribution(name)
    except metadata.PackageNotFoundError:
        pass
    wanted = normalized(name)
    for dist in metadata.distributions():
        if normalized(dist.metadata["Name"] or "") == wanted:
            return dist
    return None


def dependents(name: str, leaving: set[str]) -> list[str]:
    """Installed distributions (other than those in `leaving`) whose requirements name `name`."""
    wanted = normalized(name)
    out = set()
    for dist in metadata.distributions():
        own = normalized(dist.metadata["Name"] or "")
        if own in leaving:
            continue
        for req in dist.requires or []:
            match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
            if match and normalized(match.group(1)) == wanted and "extra ==" not in req:
                out.add(dist.metadata["Name"])
    return sorted(out)
