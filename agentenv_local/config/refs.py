"""`env:NAME` and `secret:NAME` references, each with an optional `?default`.

A reference is a whole string value: `env:OLLAMA_URL?http://127.0.0.1:11434` reads $OLLAMA_URL and
falls back to the text after the first `?`. `secret:OPENAI_KEY` reads the secret store. They are
resolved lazily, when a value is read, never when the file is loaded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_REF = re.compile(r"^(env|secret):([^?]*)(?:\?(.*))?\Z", re.DOTALL)
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-/]*\Z")


@dataclass(frozen=True)
class Ref:
    kind: str  # "env" | "secret"
    name: str
    default: str | None
    text: str

    @property
    def valid_name(self) -> bool:
        return bool(_NAME.match(self.name))


def parse_ref(value: object) -> Ref | None:
    """The reference a value spells, or None if it is a plain value."""
    if not isinstance(value, str):
        return None
    m = _REF.match(value)
    if not m:
        return None
    return Ref(kind=m.group(1), name=m.group(2), default=m.group(3), text=value)


def is_ref(value: object) -> bool:
    return parse_ref(value) is not None
