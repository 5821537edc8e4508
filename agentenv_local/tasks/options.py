"""The options of one run: what `agentenv run --sandbox/--agent/--keep/--model/...` (and the TUI) ask
of the runner.

One typed object from the command line through the hub socket to `Runner.submit`:

    RunOptions(sandbox="process", keep=True, judge_model="qwen3:32b")

On the run record they are stored as before: `keep`, and `overrides` (also the run state's metadata
`user_overrides`) holding the `sandbox`, `agent` and the per-run models (`agent_model`, `user_model`,
`judge_model`, the reference's keys) that were given. Steps read them typed, as `ctx.options`; a
resumed run rebuilds them from the record (`RunOptions.from_stored`).

`start_step` and `context` (`task run --start-step N --context-json FILE`) only shape how a run
starts: the first N steps count as done and the run's state starts from `context`. The journal keeps
what they did, so a resume needs neither.

A model option is a model's name only: its endpoint and key still come from `[model]` (keys only as
secret:/env: references), and a value that looks like a key is refused before anything runs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from agentenv_local.errors import ValidationError

MODEL_ROLES = {"agent": "agent_model", "user": "user_model", "judge": "judge_model"}  # role -> option
_NAMES = ("sandbox", "agent", *MODEL_ROLES.values(), "executor", "ray_address")  # kept in the run's `overrides`
EXECUTORS = ("local", "workers", "ray")
_FLAGS = {"agent_model": "--model", "user_model": "--user-model", "judge_model": "--judge-model"}
# Shapes of API keys: a provider's prefix, or one long run of letters and digits with no separator
# (a model name is words, versions and sizes joined by - . : / _).
_KEY_PREFIX = re.compile(r"^(sk-|sk_|xai-|gsk_|ghp_|gho_|github_pat_|hf_|glpat-|r8_|AIza)")
_LONG_TOKEN = re.compile(r"[A-Za-z0-9]{24,}")


def model_name_problem(value: str) -> str | None:
    """Why `value` cannot be a model name given on the command line, or None when it can."""
    if not value.strip() or len(value) > 200 or any(c.isspace() or not c.isprintable() for c in value):
        return "is not a model name (one word of at most 200 printable characters)"
    if value.startswith(("secret:", "env:")):
        return "is a reference: a model option takes a model's name; keys stay in [model] api_key"
    if _KEY_PREFIX.match(value) or any(re.search(r"[A-Za-z]", t) and re.search(r"[0-9]", t)
                                       for t in _LONG_TOKEN.findall(value)):
        return "looks like an API key, not a model name; keys go in [model] api_key as secret:NAME"
    return None


@dataclass(frozen=True)
class RunOptions:
    sandbox: str | None = None  # provider for every step's sandbox (overrides its sandbox_type and [sandbox] default)
    agent: str | None = None  # agent for deploy_agent steps that name none (overrides [agents] default)
    keep: bool = False  # keep sandboxes after the run (no teardown)
    # The model each role runs on, whatever the task names (over [model.roles] / [model] default too).
    agent_model: str | None = None  # the solver: --model (--agent-model on task/eval run)
    user_model: str | None = None  # the user simulator: --user-model
    judge_model: str | None = None  # the judge: --judge-model
    start_step: int = 0  # steps before this 0-based index count as done (task run --start-step)
    context: Mapping[str, Any] | None = field(default=None, compare=False)  # the state to start from
    executor: str | None = None  # where the run executes: local (the hub) or ray (over [executor] kind)
    ray_address: str | None = None  # the Ray cluster (over [executor] ray_address)

    def __post_init__(self) -> None:
        for name, flag in _FLAGS.items():
            value = getattr(self, name)
            if value is not None and (problem := model_name_problem(value)):
                raise ValidationError(f"{flag} {_shown(value, 'API key' in problem)} {problem}",
                                      hint="name a model your [model] endpoint serves, e.g. --judge-model qwen3:32b")
        if isinstance(self.start_step, bool) or not isinstance(self.start_step, int) or self.start_step < 0:
            raise ValidationError(f"--start-step must be a step index >= 0, not {self.start_step!r}")
        if self.executor is not None and self.executor not in EXECUTORS:
            raise ValidationError(f"--executor {self.executor!r} is not one of {', '.join(EXECUTORS)}")
        if self.ray_address is not None and (not self.ray_address.strip() or len(self.ray_address) > 300):
            raise ValidationError("--ray-address must be the head's HOST:PORT (or auto)")
        if self.context is not None and not isinstance(self.context, Mapping):
            raise ValidationError(f"a run's starting context is a JSON object, not {type(self.context).__name__}",
                                  hint="give --context-json a file written by --output-dir")

    def model_for(self, role: str) -> str | None:
        """The model named on the command line for a role ("agent", "user", "judge"), if any."""
        option = MODEL_ROLES.get(role)
        return getattr(self, option) if option else None

    def overrides(self) -> dict[str, str]:
        """The per-run settings as the run record and its state keep them (only those given)."""
        return {name: value for name in _NAMES if (value := getattr(self, name))}

    @classmethod
    def from_stored(cls, overrides: Mapping[str, Any] | None, keep: bool = False) -> RunOptions:
        """The options a run was started with, from its record's `overrides` (or the state's
        `user_overrides`) and `keep`; anything that is not a name is left out."""
        given = overrides if isinstance(overrides, Mapping) else {}

        def name(key: str) -> str | None:
            value = given.get(key)
            return value if isinstance(value, str) and value else None

        def model(key: str) -> str | None:
            value = name(key)
            return value if value and model_name_problem(value) is None else None

        executor = name("executor")
        return cls(sandbox=name("sandbox"), agent=name("agent"), keep=bool(keep), agent_model=model("agent_model"),
                   user_model=model("user_model"), judge_model=model("judge_model"),
                   executor=executor if executor in EXECUTORS else None, ray_address=name("ray_address"))

    def to_wire(self) -> dict[str, Any]:
        """The options as a dict for the hub socket; the newer ones only when given, so a hub started by
        an earlier version still takes a run that does not use them."""
        wire = asdict(self)
        wire["context"] = dict(self.context) if self.context is not None else None
        return {k: v for k, v in wire.items() if k in ("sandbox", "agent", "keep") or v not in (None, 0)}

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
        for name in _NAMES:
            if value.get(name) is not None and not isinstance(value[name], str):
                raise ValidationError(f"run option {name!r} is a name (a string), not {value[name]!r}")
        if not isinstance(value.get("keep", False), bool):
            raise ValidationError(f"run option 'keep' is true or false, not {value['keep']!r}")
        return cls(keep=bool(value.get("keep", False)), start_step=value.get("start_step", 0),
                   context=value.get("context"), **{name: value.get(name) or None for name in _NAMES})


def _shown(value: str, key_like: bool) -> str:
    """A refused value in an error: enough to recognise, never a whole key."""
    return repr(value[:4] + "..." if key_like else value if len(value) <= 40 else value[:40] + "...")
