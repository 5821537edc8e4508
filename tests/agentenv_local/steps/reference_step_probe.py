"""Run by the reference's interpreter (.venv-ref): its step types' `__init__` fields, and which step dicts its
own classes accept (`from_dict`). Reads a JSON command on stdin, writes JSON on stdout."""

import inspect
import json
import sys

from agent_env.task_step.registry import get_task_step_registry


def fields() -> dict:
    out = {}
    for name, cls in get_task_step_registry().items():
        params = inspect.signature(cls.__init__).parameters
        out[name] = {k: {"annotation": str(p.annotation),
                         "required": p.default is inspect.Parameter.empty}
                     for k, p in params.items() if k not in ("self", "args", "kwargs")}
    return out


def accepts(cases: list) -> list:
    registry = get_task_step_registry()
    verdicts = []
    for case in cases:
        try:
            registry[case["type"]].from_dict(case)
            verdicts.append(None)
        except Exception as exc:  # the reference refuses it: why
            verdicts.append(f"{type(exc).__name__}: {exc}")
    return verdicts


command = json.load(sys.stdin)
json.dump(fields() if command["do"] == "fields" else accepts(command["cases"]), sys.stdout)
