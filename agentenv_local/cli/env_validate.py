"""`agentenv env validate ENV`: run the env release gate against an env folder or a stored env.

It stores a small task (`env-validate/<env>`): `deploy_env`, then the gate steps (`steps/env_gates.py`), then
`validation_gate_aggregator`, runs it through the hub like any task (so the run, its rows and the env's stamped
`env_metadata` stay in the store to look at), and prints one line per gate. The run's teardown removes the env.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ._common import echo_json, session, table

# The gates `env validate` can run without an agent: the step that produces each.
GATE_STEPS = {
    "environment_card": "verify_env_card",
    "env_core_protocol": "verify_env_core_protocol",
    "mcp_tool_schema": "verify_mcp_tool_schema",
    "spec_conformance": "verify_spec_conformance",
}


def validation_task(env_id: str, version: int | None, gates: list[str]) -> list[dict]:
    """The task's steps: deploy, each gate (tolerant, so every gate runs), then the roll-up."""
    deploy: dict[str, Any] = {"id": "deploy", "type": "deploy_env", "env_id": env_id}
    if version is not None:
        deploy["env_version"] = version
    steps = [deploy]
    for gate in gates:
        steps.append({"id": gate, "type": GATE_STEPS[gate], "env_id": env_id, "depends_on": ["deploy"],
                      "fail_task_on_error": False})
    steps.append({"id": "validation_gate", "type": "validation_gate_aggregator", "env_id": env_id,
                  "required_gates": gates, "depends_on": gates})
    return steps


def _put_folder(s: Any, folder: Path, env_id: str) -> tuple[str, int]:
    """Store an env folder as the next version of `env_id`, as `agentenv env put` does."""
    from .env import put_env_folder

    return env_id, put_env_folder(s, folder, env_id)["version"]


def _rows(run: dict, gates: list[str]) -> list[dict]:
    from agentenv_local.steps.env_checks import gate_verdict

    verifications = run.get("verifications") or {}
    steps = run.get("steps") or {}
    rows = []
    for gate in gates:
        entry = verifications.get(gate)
        verdict = gate_verdict(entry)
        if entry is None:
            error = (steps.get(gate) or {}).get("error") or "the check did not run"
            detail = str(error)
        else:
            failed = [r for r in entry.get("results") or [] if not r.get("result") and not r.get("skipped")]
            total = len(entry.get("results") or [])
            detail = (f"{total - len(failed)}/{total} checks" + (": " + "; ".join(
                str(r.get("justification")) for r in failed[:3]) if failed else ""))
        rows.append({"gate": gate, "verdict": verdict, "detail": detail})
    return rows


@click.command("validate")
@click.argument("env", metavar="ENV")
@click.option("--id", "env_id", default=None, help="With a folder: the id to store it as (default: the folder's name).")
@click.option("--version", type=int, default=None, help="A stored env's version (default: the latest).")
@click.option("--gate", "gates", multiple=True, type=click.Choice(sorted(GATE_STEPS)),
              help="Run only these gates (repeatable; default: all four).")
@click.option("--json", "as_json", is_flag=True, help="Print the verdicts as JSON.")
def validate(env, env_id, version, gates, as_json):
    """Run the env release gate against ENV (an env folder, or a stored env's id): deploy it, check its card,
    data plane, tool schemas and MCP surface, roll the gates up, tear it down. Exits 1 when a gate fails."""
    from agentenv_local.bundles.materialize import _json_digest
    from agentenv_local.errors import ValidationError
    from agentenv_local.hub.launch import Job
    from agentenv_local.steps.env_checks import gate_summary
    from agentenv_local.tasks.options import RunOptions

    from ._drive import drive

    gates = list(gates) or list(GATE_STEPS)
    folder = Path(env)
    with session() as s:
        if folder.is_dir():
            if version is not None:
                raise ValidationError("--version is for a stored env; a folder is stored as a new version")
            env_id, version = _put_folder(s, folder.resolve(), env_id or folder.resolve().name)
            click.echo(f"Stored {folder} as env {env_id} v{version}.", err=True)
        else:
            if env_id is not None:
                raise ValidationError("--id is for a folder; ENV names a stored env here",
                                      hint=f"is {env!r} meant to be a folder? it does not exist")
            env_id = env
            if s.store.documents.find("envs", env_id, version) is None:
                raise ValidationError(f"no env {env_id!r}" + (f" v{version}" if version else "")
                                      + " in the store, and no folder of that name",
                                      hint="give an env folder (with env.toml), or see `agentenv env list`")
        steps = validation_task(env_id, version, gates)
        task_id = f"env-validate/{env_id}"
        body = {"steps": steps, "description": f"the env release gate for {env_id}"}
        doc = s.store.documents.put("tasks", task_id, body, digest=_json_digest(body), if_changed=True)
        [run] = drive(s, [Job(task_id, doc["version"], None, label=task_id, options=RunOptions())],
                      concurrency=1, verbose_steps=False, to_stderr=as_json)
    rows = _rows(run, gates)
    summary = (run.get("context") or {}).get("metadata", {}).get("validation_gate") \
        or gate_summary(run.get("verifications") or {}, gates)
    passed = bool(summary.get("passed")) and run.get("status") == "passed"
    if as_json:
        echo_json({"env_id": env_id, "env_version": version, "run_id": run["run_id"], "passed": passed,
                   "validation_gate": summary, "gates": rows, "verifications": run.get("verifications") or {}})
    else:
        table([[r["gate"], r["verdict"], r["detail"]] for r in rows], ["GATE", "VERDICT", "DETAIL"])
        if run.get("status") != "passed" and run.get("error"):
            click.echo(f"run {run['run_id']}: {run['error']}")
        click.echo(f"validation gate: {'passed' if passed else 'FAILED'} (run {run['run_id']}; "
                   f"`agentenv runs show {run['run_id']}` for every row)")
    return 0 if passed else 1
