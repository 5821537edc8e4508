"""The options of one run: what `agentenv run --sandbox/--agent/--keep` (and the TUI) ask of the runner.

One typed object from the command line through the hub socket to `Runner.submit`:

    RunOptions(sandbox="process", keep=True)

On the run record they are stored as before: `keep`, and `overrides` (also the run state's metadata
`user_overrides`) holding the `sandbox` and `agent` that were given. Steps read them typed, as
`ctx.options`; a resumed run rebuilds them from the record (`RunOptions.from_stored`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from agentenv_local.errors import ValidationError


@dataclass(frozen=True)
class RunOptions:
    sandbox: str | None = None  # provider for every step's sandbox (overrides its sandbox_type and [sandbox] default)
    agent: str | None = None  # agent for deploy_agent steps that name none (overrides [agents] default)
    keep: bool = False  # keep sandboxes after the run (no teardown)

    def overrides(self) -> dict[str, str]:
        """The per-run settings as the run record and its state keep them (only those given)."""
        return {name: value for name, value in (("sandbox", self.sandbox), ("agent", self.agent)) if value}

    @classmethod
    def from_stored(cls, overrides: Mapping[str, Any] | None, keep: bool = False) -> RunOptions:
        """The options a run was started with, from its record's `overrides` (or the state's
        `user_overrides`) and `keep`; anything that is not a name is left out."""
        given = overrides if isinstance(overrides, Mapping) else {}

        def name(key: str) -> str | None:
            value = given.get(key)
            return value if isinstance(value, str) and value else None

        return cls(sandbox=name("sandbox"), agent=name("agent"), keep=bool(keep))

    def to_wire(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_wire(cls, value: RunOptions | Mapping[str, Any] | None) -> RunOptions:
        """Options from the hub socket (a dict), or as given in this process; refuses unknown keys and types."""
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        if not isinstance(value, Mapping):
            raise ValidationError(f"run options are an object, not {type(value).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(value) - known)
        if unknown:
            raise ValidationError(f"unknown run option(s): {', '.join(map(str, unknown))}",
                                  hint=f"run options are {', '.join(sorted(known))}")
        for name in ("sandbox", "agent"):
            if value.get(name) is not None and not isinstance(value[name], str):
                raise ValidationError(f"run option {name!r} is a name (a string), not {value[name]!r}")
        if not isinstance(value.get("keep", False), bool):
            raise ValidationError(f"run option 'keep' is true or false, not {value['keep']!r}")
        return cls(sandbox=value.get("sandbox") or None, agent=value.get("agent") or None,
                   keep=bool(value.get("keep", False)))
