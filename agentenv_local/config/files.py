"""The config file: which one (`$AGENTENV_CONFIG`, else `<state dir>/config.toml`) and reading it as bounded
UTF-8 TOML, with errors that say where a syntax error is."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path

from agentenv_local.errors import ConfigError
from agentenv_local.nofollow import file_kind
from agentenv_local.untrusted import UntrustedInputError, parse_toml


def discover(state_dir: Path, environ: Mapping[str, str]) -> Path | None:
    """The one config file: $AGENTENV_CONFIG (must exist), else `<state dir>/config.toml` if present."""
    named = environ.get("AGENTENV_CONFIG")
    if named:
        path = Path(named).expanduser()
        path = path if path.is_absolute() else Path.cwd() / path
        if str(path) == os.devnull:  # the usual way to say "no config file at all"
            return None
        problem = _not_a_config_file(path)
        if problem:
            raise ConfigError(f"AGENTENV_CONFIG points to {problem}: {path}",
                              hint="fix the path in AGENTENV_CONFIG, or unset it to use .agentenv/config.toml")
        return path.resolve()
    candidate = state_dir / "config.toml"
    problem = _not_a_config_file(candidate)
    if problem == "a missing file":
        return None
    if problem:
        raise ConfigError(f"the config file {candidate} is {problem}",
                          hint=f"replace it with a TOML file, or move it aside: mv {candidate} {candidate}.bak")
    return candidate


MAX_CONFIG_BYTES = 1 << 20  # a config file is a few KB; more is a mistake (or /dev/zero)


def _not_a_config_file(path: Path) -> str | None:
    """Why `path` cannot be the config file (None if it is a regular file)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return "a missing file"
    except OSError as exc:
        return f"a path that cannot be checked ({exc.strerror or exc})"
    if stat.S_ISDIR(st.st_mode):
        return "a directory"
    if not stat.S_ISREG(st.st_mode):
        return f"{file_kind(st.st_mode)}, not a regular file"
    if st.st_size > MAX_CONFIG_BYTES:
        return f"a file of {st.st_size} bytes, over the limit of {MAX_CONFIG_BYTES} for a config file"
    return None


def read_toml(path: Path) -> dict:
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read the config file {path}: {exc.strerror or exc}",
                          hint="check that the file exists and that you may read it") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"the config file {path} is over the limit of {MAX_CONFIG_BYTES} bytes",
                          hint="a config file is a few lines of TOML; check that it is the right file")
    try:
        text = raw.decode("utf-8-sig")  # a UTF-8 BOM is tolerated
    except UnicodeDecodeError as exc:
        raise ConfigError(f"the config file {path} is not UTF-8 text (bad byte at offset {exc.start})",
                          hint="save it as UTF-8") from None
    try:
        return parse_toml(text, what=f"the config file {path}")
    except UntrustedInputError as exc:
        msg = str(exc)
        m = re.search(r"\(at line (\d+), column (\d+)\)", msg)
        if m or "not valid TOML" in msg:  # a syntax error: say where, as tomllib does
            where = f"line {m.group(1)}, column {m.group(2)}" if m else "at the end of the file"
            reason = msg.split(" is not valid TOML: ", 1)[-1]
            reason = re.sub(r"\s*\(at (line \d+, column \d+|end of document)\)\s*$", "", reason)
            raise ConfigError(f"cannot parse {path}: {where}: {reason}",
                              hint="fix the TOML syntax there (https://toml.io), then run `agentenv config show`",
                              ) from None
        raise ConfigError(msg,
                          hint="fix that value, then run `agentenv config show`") from None
