"""The secret store: environment variables first, then a private secrets file. Nothing is stored.

`secret:NAME` references in the config resolve here. The file is a flat mapping of name -> string,
TOML (`NAME = "value"`) or JSON (`{"NAME": "value"}`, when the name ends in `.json`). It must be
readable by its owner only (mode 0600), like an SSH key. Values are never logged or printed: errors
name the secret and the file, never the value.
"""

from __future__ import annotations

import os
import stat
import sys
import threading
from collections.abc import Mapping
from pathlib import Path

from agentenv_local.errors import ConfigError

__all__ = ["SecretStore"]


class SecretStore:
    """Look secrets up by name: `$NAME` (when `use_env`), then the secrets file.

    `environ` defaults to `os.environ` (read at lookup time). The file is read once, on the first
    lookup that needs it; a missing file means "no secrets in a file".
    """

    def __init__(self, file_path: Path | str | None, use_env: bool = True, *,
                 environ: Mapping[str, str] | None = None) -> None:
        self.file_path = Path(file_path).expanduser() if file_path is not None else None
        self.use_env = use_env
        self._environ = environ
        self._values: dict[str, str] | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:  # never the values
        return f"SecretStore(file_path={str(self.file_path)!r}, use_env={self.use_env})"

    @property
    def environ(self) -> Mapping[str, str]:
        return os.environ if self._environ is None else self._environ

    def get(self, name: str) -> str | None:
        if self.use_env:
            value = self.environ.get(name)
            if value is not None:
                return value
        return self._file_values().get(name)

    def require(self, name: str) -> str:
        value = self.get(name)
        if value is None:
            raise ConfigError(f"the secret {name!r} is not set", hint=self.how_to_set(name))
        return value

    def names(self) -> list[str]:
        """Names in the secrets file (not the environment)."""
        return sorted(self._file_values())

    def where(self) -> str:
        places = []
        if self.use_env:
            places.append("the environment")
        places.append(str(self.file_path) if self.file_path else "no secrets file")
        return " and ".join(places)

    def how_to_set(self, name: str) -> str:
        target = self.file_path or Path("secrets.toml")
        line = f'"{name}": "..."' if target.suffix.lower() == ".json" else f'{name} = "..."'
        tips = [f"add {line} to {target} (then `chmod 600 {target}`)"]
        if self.use_env:
            tips.insert(0, f"export {name}=...")
        return "; or ".join(tips)

    # -- the file ----------------------------------------------------------------------------

    def _file_values(self) -> dict[str, str]:
        with self._lock:
            if self._values is None:
                self._values = self._read_file()
            return self._values

    def _read_file(self) -> dict[str, str]:
        path = self.file_path
        if path is None:
            return {}
        try:
            st = path.stat()
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise ConfigError(f"cannot read the secrets file {path}: {exc.strerror}") from None
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(f"the secrets file {path} is not a regular file",
                              hint="point [secrets] file at a file, or remove it")
        if os.name == "posix" and sys.platform != "emscripten" and st.st_mode & 0o077:
            raise ConfigError(
                f"the secrets file {path} is readable by other users (mode {stat.S_IMODE(st.st_mode):04o})",
                hint=f"run `chmod 600 {path}`")
        try:
            text = path.read_bytes().decode("utf-8-sig")
        except UnicodeDecodeError:
            raise ConfigError(f"the secrets file {path} is not UTF-8 text") from None
        except OSError as exc:
            raise ConfigError(f"cannot read the secrets file {path}: {exc.strerror}") from None
        data = _parse_json(path, text) if path.suffix.lower() == ".json" else _parse_toml(path, text)
        return _flat(path, data)


def _parse_json(path: Path, text: str) -> object:
    from agentenv_local.untrusted import UntrustedInputError, parse_json

    try:
        return parse_json(text, what="it") if text.strip() else {}
    except UntrustedInputError as exc:
        raise ConfigError(f"cannot parse the secrets file {path}: {_no_values(exc)}",
                          hint="the file must be one JSON object of name -> string") from None


def _parse_toml(path: Path, text: str) -> object:
    from agentenv_local.untrusted import UntrustedInputError, parse_toml

    try:
        return parse_toml(text, what="it")
    except UntrustedInputError as exc:
        raise ConfigError(f"cannot parse the secrets file {path}: {_no_values(exc)}",
                          hint='the file must be flat TOML: NAME = "value" lines') from None


def _no_values(exc: Exception) -> str:
    # The message names the position only, never the text there: it may hold a secret.
    msg = str(exc)
    return msg.split(":", 1)[0] if "not valid Unicode" in msg else msg


def _flat(path: Path, data: object) -> dict[str, str]:
    if not isinstance(data, dict):
        raise ConfigError(f"the secrets file {path} must hold a mapping of name -> string",
                          hint="a JSON object, or TOML NAME = \"value\" lines")
    out: dict[str, str] = {}
    bad = []
    for name, value in data.items():
        if isinstance(value, str):
            out[str(name)] = value
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out[str(name)] = str(value)
        else:
            bad.append(f"{name}: expected a string, got {type(value).__name__}")
    if bad:
        raise ConfigError(f"the secrets file {path} must be flat (name -> string)", problems=bad,
                          hint="nested tables and lists are not allowed; quote each value")
    return out
