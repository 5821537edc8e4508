"""Where a step's JSON names a stored entity: the fields its type declares, walked into lists and nested objects.

A step type declares its entity-naming fields as class variables: `artifact_ref_fields`, `env_ref_fields` and
`agent_ref_fields` (the reference's `entity_refs`). Each entry is a path: a top-level field (`env_id`; a list
value means each of its strings, as `env_ids`), `name[]` for each element of a list (`cli_artifact_ids[]`),
and dots into nested objects (`snapshot_config.env_id`, `triggers[].when.env_id`). Bundles resolve bare names
at these places to their own entities, and a dry run checks that each one exists.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

# Entity kind -> the step class variable that declares its fields. "output_artifact": the artifact a step
# writes under the id it is given (snapshot_env's snapshot_id, ...), which a later step of the task may read.
REF_FIELDS = {"artifact": "artifact_ref_fields", "env": "env_ref_fields", "agent": "agent_ref_fields",
              "output_artifact": "output_artifact_ref_fields"}


@dataclass(frozen=True)
class RefSite:
    """One entity name found in a step: `owner[key]` holds `value`; `path` is concrete (`env_ids[1]`)."""

    path: str
    field: str  # the top-level step field the path starts at
    value: str
    owner: dict | list
    key: str | int

    def rewrite(self, value: str) -> None:
        self.owner[self.key] = value  # type: ignore[index]  # a dict's key is a str, a list's an int


def declared_paths(cls: Any, kind: str) -> tuple[str, ...]:
    """The paths step class `cls` (None: an unknown type) declares for entity `kind` (a key of REF_FIELDS)."""
    return tuple(getattr(cls, REF_FIELDS[kind], ()) or ())


def ref_sites(raw: dict, cls: Any, kind: str) -> Iterator[RefSite]:
    """Every string at a path `cls` declares for `kind` in step JSON `raw` (None and other values skipped)."""
    for path in declared_paths(cls, kind):
        parts = path.split(".")
        yield from _walk(raw, parts, "", parts[0].removesuffix("[]"))


def _walk(node: Any, parts: list[str], trail: str, field: str) -> Iterator[RefSite]:
    if not isinstance(node, dict):
        return
    head, rest = parts[0], parts[1:]
    key = head.removesuffix("[]")
    value = node.get(key)
    here = f"{trail}.{key}" if trail else key
    if value is None:
        return
    # A list at a plain top-level name is a list of names too (env_ids), as it always was here.
    if isinstance(value, list) and (head.endswith("[]") or (not rest and not trail)):
        for i, item in enumerate(value):
            if rest:
                yield from _walk(item, rest, f"{here}[{i}]", field)
            elif isinstance(item, str):
                yield RefSite(f"{here}[{i}]", field, item, value, i)
    elif rest:
        yield from _walk(value, rest, here, field)
    elif isinstance(value, str):
        yield RefSite(here, field, value, node, key)
