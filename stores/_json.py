"""JSON helpers shared by the stores: compact dumps that keep non-ASCII readable."""

from __future__ import annotations

import json
import re
from typing import Any

from agentenv_local.errors import printable

_SURROGATE = re.compile("[\ud800-\udfff]")


def dumps(value: Any) -> str:
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # A name with bytes that are not UTF-8 (a file a sandbox made, say): DuckDB's JSON takes no
        # lone surrogate, so it is kept as the text `\xff`, as it is shown everywhere else.
        text = _SURROGATE.sub(lambda m: json.dumps(printable(m.group()))[1:-1], text)
    return text


def loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)
