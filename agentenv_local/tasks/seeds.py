"""Seeds: `<key>` placeholders in any string of any step, filled from one row of values.

Only keys present in the seed are replaced, so other angle-bracket text is left alone.
`--seeds FILE.csv` makes one run per CSV row.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentenv_local.errors import ValidationError

_PLACEHOLDER = re.compile(r"<([A-Za-z_][A-Za-z0-9_.-]*)>")


def apply_seed(value: Any, seed: dict[str, Any]) -> Any:
    if not seed:
        return value
    if isinstance(value, str):
        whole = _PLACEHOLDER.fullmatch(value)
        if whole and whole.group(1) in seed:  # a lone placeholder keeps the seed value's type
            return seed[whole.group(1)]
        return _PLACEHOLDER.sub(lambda m: str(seed[m.group(1)]) if m.group(1) in seed else m.group(0), value)
    if isinstance(value, list):
        return [apply_seed(v, seed) for v in value]
    if isinstance(value, dict):
        return {k: apply_seed(v, seed) for k, v in value.items()}
    return value


def placeholders(value: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(value, str):
        found.update(_PLACEHOLDER.findall(value))
    elif isinstance(value, list):
        for v in value:
            found |= placeholders(v)
    elif isinstance(value, dict):
        for v in value.values():
            found |= placeholders(v)
    return found


def read_seeds_csv(path: Path) -> list[dict[str, str]]:
    try:
        with path.open(newline="", encoding="utf-8-sig") as fh:
            rows = list(csv.DictReader(fh))
    except OSError as exc:
        raise ValidationError(f"cannot read seeds file {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise ValidationError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason})",
                              hint="save the seeds file as UTF-8 CSV") from exc
    except csv.Error as exc:
        raise ValidationError(f"{path}: not valid CSV: {exc}") from exc
    if not rows:
        raise ValidationError(f"{path}: no seed rows (the first line is the header, one run per following line)")
    for i, row in enumerate(rows, start=2):
        if None in row or any(v is None for v in row.values()):
            raise ValidationError(f"{path}: line {i} has a different number of columns than the header")
    return rows


def unused_columns_note(rows: Sequence[dict[str, str] | None] | None, tasks: list[Any]) -> str | None:
    """A note when seed columns fill no `<key>` placeholder in any of the tasks (likely a typo).

    Not an error: steps may also read the seed from the run's metadata.
    """
    if not rows or not rows[0]:
        return None
    used: set[str] = set()
    for steps in tasks:
        used |= placeholders(steps)
    unused = [c for c in rows[0] if c not in used]
    if not unused:
        return None
    there = ", ".join(f"<{p}>" for p in sorted(used)) or "none"
    return (f"note: seed column(s) {', '.join(repr(c) for c in unused)} fill no <placeholder> in the task(s); "
            f"placeholders there: {there}")
