"""Shared parts of the coding-CLI tests: the installed CLI (or a skip), a clean environment for it, running
it, and JSON-lines parsing; for the agents' tests, one A2A turn, the no-model and missing-CLI errors, the
second turn resuming a session, a turn cancelled while a command runs (and the processes it leaves), and the
reference's smoke and office tasks under `agentenv run`. Per CLI stay its name, events, tools and config (the
fixtures are in conftest.py).

The CLIs come from scripts/setup-agent-clis.sh (.cache/agent-clis/<name>/). Absent, a test skips saying
so, unless AGENTENV_REQUIRE_AGENT_CLIS=1, which makes that a failure.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from agentenv_local import procs
from agentenv_local.agents.base import Agent
from agentenv_local.agents.cli_agents import harness
from agentenv_local.agents.types import TaskRequest, TaskResult, TextPart
from agentenv_local.testing.fake_models import FakeModelServer, RecordedRequest, Reply

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kits.reference_bundles import copy_reference_bundle  # noqa: E402 - the tests folder is on the path now
from kits.warm_cli import run_agentenv
from shell_responder import COMMAND  # noqa: E402

T = TypeVar("T")

ROOT = Path(__file__).resolve().parents[2]
CLI_CACHE = ROOT / ".cache" / "agent-clis"
MODEL_KEY = "sk-fake-agent-cli-key"


def cli_path(name: str, binary: str, *, venv: bool = False) -> Path:
    """The CLI's executable in the cache (an npm prefix, or with `venv` a Python venv), or skip (fail under
    AGENTENV_REQUIRE_AGENT_CLIS=1)."""
    path = CLI_CACHE / name / ("bin" if venv else "node_modules/.bin") / binary
    if not path.exists():
        message = f"{binary} is not installed in {CLI_CACHE / name}: run scripts/setup-agent-clis.sh"
        if os.environ.get("AGENTENV_REQUIRE_AGENT_CLIS") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return path


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    """A small environment: no inherited keys or proxies, HOME and XDG dirs inside the test's tmp dir."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8",
           "XDG_CONFIG_HOME": str(home / ".config"), "XDG_DATA_HOME": str(home / ".local" / "share"),
           "XDG_CACHE_HOME": str(home / ".cache"), "XDG_STATE_HOME": str(home / ".local" / "state"),
           "NO_COLOR": "1", "CI": "1"}
    env.update(extra)
    return env


def run_cli(argv: list[str], *, env: dict[str, str], cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    """Run a CLI to its end (stdin closed: a headless run must not wait for input)."""
    return subprocess.run([str(a) for a in argv], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL, start_new_session=True)


def json_lines(stdout: str) -> list[dict]:
    """The JSON objects of a JSON-lines event stream (other lines, e.g. warnings, are skipped)."""
    events = []
    for line in stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                events.append(json.loads(line))
            except ValueError:
                continue
    return events


def explain(proc: subprocess.CompletedProcess, server: FakeModelServer) -> str:
    """What to print when a CLI run is not what the test expects: exit code, output tails, the requests."""
    reqs = "\n".join(f"  {r.method} {r.path} -> {r.status} {r.problems[:3]}" for r in server.requests)
    return (f"exit {proc.returncode}\n--- stdout (tail)\n{proc.stdout[-3000:]}\n--- stderr (tail)\n"
            f"{proc.stderr[-2000:]}\n--- model requests\n{reqs}")


def turn_request(agent: Agent, text: str, context: str, task: str, *, mcp: dict[str, Any] | None = None,
                 **config: Any) -> TaskRequest:
    """One A2A turn for `agent` as its server would hand it over: the text, the context and task ids, the
    agent-config fields validated by the agent's own config model, and the MCP servers registered on it."""
    return TaskRequest(task_id=task, context_id=context, parts=(TextPart(text=text),),
                       config=agent.config_model.model_validate(config), mcp_servers=mcp or {})


def agent_error(agent: Agent, req: TaskRequest, code: str) -> str:
    """Run one turn that must fail with `<agent>.<code>`; the error's message (for the caller's own checks)."""
    result = asyncio.run(agent.run(req))
    assert result.error is not None and result.error.code == f"{agent.name}.{code}", result
    return result.error.message


def assert_no_model_is_one_line(agent: Agent, monkeypatch: pytest.MonkeyPatch, task: str = "t-n",
                                **config: Any) -> str:
    """Without a model endpoint (no LITELLM_BASE_URL either) a turn fails with `<agent>.no_model`, one line naming
    the [model] setting; the message, for the caller's own checks."""
    monkeypatch.delenv("LITELLM_BASE_URL", raising=False)
    message = agent_error(agent, turn_request(agent, "hi", "ctx-n", task, **config), "no_model")
    assert "[model]" in message and "\n" not in message, message
    return message


def missing_cli_error(agent: Agent, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                      base_url: str = "http://127.0.0.1:9") -> str:
    """With no CLI in the cache nor on PATH a turn fails with `<agent>.cli_not_found` pointing at the setup
    script; the message, for the caller's own checks."""
    monkeypatch.setattr(harness, "CLI_CACHE", tmp_path / "no-cache")
    monkeypatch.setenv("PATH", str(tmp_path))
    req = turn_request(agent, "hi", "ctx-m", "t-m", base_url=base_url, api_key="sk-x-secret", model="m")
    message = agent_error(agent, req, "cli_not_found")
    assert "scripts/setup-agent-clis.sh" in message, message
    return message


# --- processes: a turn cancelled while the CLI's shell runs a command that never ends -----------------------------

LONG_COMMAND = "python3 -c 'import time; time.sleep(300)'"  # Claude Code refuses a plain `sleep 300`


class LongCommandResponder:
    """A fake model's responder asking the CLI's shell tool `tool` (once offered, until answered) for
    LONG_COMMAND: the tool's `args`; then "ok"."""

    def __init__(self, tool: str, **args: Any) -> None:
        self.tool, self.args = tool, args

    def __call__(self, req: RecordedRequest) -> Reply:
        if any(t["name"] == self.tool for t in req.tools) and not req.answered_tools:
            return Reply.tool_call(self.tool, self.args)
        return Reply(text="ok")


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie does not)."""
    return procs.running(pid)


def is_sleep(pid: int) -> bool:
    """Whether `pid` is LONG_COMMAND itself: a Python running its code. Not a process that only names it in its
    arguments (a shell's `-c`, OpenHands' `tmux send-keys`), which is gone a moment later: a cancel test that took
    one for the command found no command running a poll later (CI, the OpenHands and pi cancel tests)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return Path(os.fsdecode(argv[0])).name.startswith("python") and b"import time; time.sleep(300)" in argv[1:]


def sleepers_under(pid: int) -> list[int]:
    """The LONG_COMMANDs under `pid`."""
    return [child for child in harness.descendants(pid) if is_sleep(child)]


def group_members(pgid: int) -> list[int]:
    """The live processes of process group `pgid`."""
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                members.append(int(entry.name))
    return members


def record_started(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The pids of the processes the harness starts from now on (the CLI first)."""
    started: list[int] = []
    real_exec = asyncio.create_subprocess_exec

    async def recording_exec(*argv: str, **kwargs: object) -> asyncio.subprocess.Process:
        proc = await real_exec(*argv, **kwargs)  # type: ignore[arg-type]  # kwargs pass through unchanged
        started.append(proc.pid)
        return proc

    monkeypatch.setattr(harness.asyncio, "create_subprocess_exec", recording_exec)
    return started


def cancel_a_running_turn(agent: Agent, req: TaskRequest, started: list[int], snapshot: Callable[[int], T], *,
                          ready: Callable[[int, list[dict]], bool] | None = None, polls: int = 1200) -> T:
    """Run `req`, wait (0.1 s a poll) until `ready(cli_pid, events)` (by default: a LONG_COMMAND runs under the
    CLI), take `snapshot(cli_pid)` (e.g. sleepers_under: the LONG_COMMANDs under it, read before the cancel ends
    them), cancel the turn and await the cancellation; the snapshot."""
    is_ready = ready or (lambda pid, events: bool(sleepers_under(pid)))

    async def scenario() -> T:
        task = asyncio.ensure_future(agent.run(req))
        for _ in range(polls):  # until the CLI's shell runs the long command
            await asyncio.sleep(0.1)
            if started and is_ready(started[0], req.trajectory.events()):
                break
            if task.done():
                raise AssertionError(f"the turn ended before the command ran: {req.trajectory.events()}")
        else:
            task.cancel()
            raise AssertionError(f"the long command never started: {req.trajectory.events()}")
        taken = snapshot(started[0])
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return taken

    return asyncio.run(scenario())


def assert_no_process_left(pids: list[int], *, group: int | None = None, cli: int | None = None,
                           who: str = "the CLI") -> None:
    """None of `pids` runs any more, nor (if given) a process of process group `group`, nor the CLI `cli`."""
    if group is not None:
        assert group_members(group) == [], f"a process of {who}'s group is still running"
    if cli is not None:
        assert not alive(cli), f"{who} is still running"
    assert not [pid for pid in pids if alive(pid)], f"a process {who} started is still running"


# --- the reference's `agents` bundle under `agentenv run` (a real hub) ---------------------------------------------


def agentenv(cwd: Path, *args: str, drop: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """`agentenv ARGS` in `cwd`, without the AGENTENV_ and LITELLM_ variables of this process nor those starting
    with one of `drop` (the CLI's own key variables)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTENV_", *drop, "LITELLM_"))}
    return run_agentenv(list(args), cwd=cwd, env=env, timeout=400)


def smoke_bundle_of(tmp_path: Path, agent_name: str) -> Path:
    """The reference's `agents` bundle with its `<agent_name>-smoke` task only, and a project folder `proj` (with
    an empty .agentenv) next to it."""
    bundle = copy_reference_bundle("agents", tmp_path)
    for task in (bundle / "tasks").iterdir():
        if task.name != f"{agent_name}-smoke.json":
            task.unlink()
    (tmp_path / "proj" / ".agentenv").mkdir(parents=True)
    return bundle


def write_model_config(project: Path, **model: str) -> None:
    """The project's .agentenv/config.toml: a [model] table of `model` and the fake server's key."""
    lines = [f'{key} = "{value}"' for key, value in {**model, "api_key": MODEL_KEY}.items()]
    (project / ".agentenv" / "config.toml").write_text("[model]\n" + "\n".join(lines) + "\n")


def stored_run(project: Path, drop: tuple[str, ...]) -> tuple[dict, str]:
    """The project's last run as `agentenv runs show --json` gives it: parsed, and the text (to search)."""
    runs = json.loads(agentenv(project, "runs", "list", "--json", drop=drop).stdout)
    shown = agentenv(project, "runs", "show", runs[0]["run_id"], "--json", drop=drop).stdout
    return json.loads(shown), shown


def run_reference_smoke(bundle: Path, agent_name: str, responder: Callable[[RecordedRequest], Reply],
                        model: Callable[[FakeModelServer], dict[str, str]], drop: tuple[str, ...],
                        run_args: tuple[str, ...] = ()) -> list[dict]:
    """Run the `<agent_name>-smoke` task of `bundle` (from smoke_bundle_of) with the fake model server as [model]
    (`model(server)`: its api, base_url and default; `run_args`: more `agentenv run` flags): it passes with
    no malformed model request, its run names the agent, the key is in no stored byte. The stored trajectory."""
    project = bundle.parent / "proj"
    with FakeModelServer(api_key=MODEL_KEY, responder=responder) as server:
        write_model_config(project, **model(server))
        out = agentenv(project, "run", str(bundle), "--task", f"{agent_name}-smoke", *run_args, drop=drop)
        problems = [r.problems for r in server.requests if r.problems]
    assert out.returncode == 0 and "passed" in out.stdout, out.stdout + out.stderr
    assert not problems
    run, shown = stored_run(project, drop)
    assert run["context"]["deployed_agents"][0]["a2a_agent_id"] == agent_name
    assert MODEL_KEY not in shown  # the key never reaches the store
    [chat] = run["context"]["prompt_responses"]
    return chat["trajectory"]


def tool_calls(events: list[dict]) -> list[dict]:
    return [e for e in events if e.get("type") == "tool_call"]


def smoke_fails_without_model(bundle: Path, agent_name: str, drop: tuple[str, ...], *,
                              dry_run: bool = False) -> subprocess.CompletedProcess | None:
    """Without a [model] the `<agent_name>-smoke` task's run fails with one line naming `[model] base_url`
    (first, with `dry_run`, the dry run passes: returned for the caller's own checks)."""
    project = bundle.parent / "proj"
    dry = None
    if dry_run:
        dry = agentenv(project, "run", str(bundle), "--dry-run", drop=drop)
        assert dry.returncode == 0, dry.stdout + dry.stderr
    out = agentenv(project, "run", str(bundle), "--task", f"{agent_name}-smoke", drop=drop)
    assert out.returncode != 0
    lines = [line for line in (out.stdout + out.stderr).splitlines() if f"{agent_name} agent needs a model" in line]
    assert len(lines) == 1 and "[model] base_url" in lines[0], out.stdout + out.stderr
    return dry


def office_task(agent_name: str, solver: dict[str, Any] | None = None) -> dict[str, Any]:
    """A task: `agent_name` (role 'agent', purge_mailbox disabled for it) searches the office env's seeded mail
    (`solver`: more fields of its deploy_agent step)."""
    return {
        "description": f"{agent_name} reads the office env's mail through the gateway under the role 'agent'",
        "steps": [
            {"id": "deploy", "type": "deploy_env", "env_id": "office"},
            {"id": "seed_mail", "type": "load_artifact", "artifact_id": "mail-seed", "env_id": "office",
             "depends_on": ["deploy"]},
            {"id": "lock_down", "type": "modify_env_tool_access", "env_id": "office", "action": "disable",
             "role": "agent", "tools": ["purge_mailbox"], "depends_on": ["seed_mail"]},
            {"id": "solver", "type": "deploy_agent", "a2a_agent_id": agent_name, "agent_name": "solver",
             "env_ids": ["office"], "role": "agent", "depends_on": ["lock_down"], **(solver or {})},
            {"id": "ask", "type": "prompt_agent", "agent_name": "solver", "prompt_id": "ask",
             "prompt": "Search the mail for Acme pricing and tell me what you found.", "depends_on": ["solver"]},
            {"id": "check", "type": "agent_prompt_response_verifier", "prompt_id": "ask", "verifier_id": "answer",
             "criteria": [{"type": "response_contains", "needles": ["DONE"]}], "depends_on": ["ask"]},
        ],
    }


def run_office_task(tmp_path: Path, agent_name: str, responder: Callable[[RecordedRequest], Reply],
                    model: Callable[[FakeModelServer], dict[str, str]], drop: tuple[str, ...],
                    wire: str, solver: dict[str, Any] | None = None) -> list[list[str]]:
    """Run office_task(agent_name) on a copy of examples/support under `agentenv run` with the fake model server
    as [model]: it passes, and its one stored tool call is search_emails of the office server with the
    responder's arguments, answered from the seeded mail. The tool names offered in each model request to
    `wire` that offered tools. `solver`: more fields of the agent's deploy_agent step."""
    bundle = tmp_path / f"office-{agent_name}"
    shutil.copytree(ROOT / "examples" / "support", bundle)
    for task in (bundle / "tasks").iterdir():
        task.unlink()
    (bundle / "tasks" / f"office-{agent_name}.json").write_text(json.dumps(office_task(agent_name, solver)))
    project = tmp_path / "proj"
    (project / ".agentenv").mkdir(parents=True)
    with FakeModelServer(api_key=MODEL_KEY, responder=responder) as server:
        write_model_config(project, **model(server))
        out = agentenv(project, "run", str(bundle), drop=drop)
        offered = [r.tool_names for r in server.requests if r.path == wire and r.tools]
    assert out.returncode == 0 and "passed" in out.stdout, out.stdout + out.stderr
    run, _ = stored_run(project, drop)
    [chat] = run["context"]["prompt_responses"]
    [call] = tool_calls(chat["trajectory"])
    assert (call["server"], call["tool"], call["args"], call["is_error"]) == \
        ("office", "search_emails", {"query": "acme pricing"}, False)
    assert "e-02" in call["result"], call["result"]
    return offered


def second_turn_resumes(agent: Agent, server: FakeModelServer, config: dict[str, Any], session: str,
                        model_turn: Callable[[RecordedRequest], bool]) -> TaskResult:
    """After a first turn of context ctx-1 that ran shell_responder.COMMAND (session `session`), a second turn
    "What did it print?" (on a reset `server`) resumes that session: the last model request that is a
    `model_turn` carries the first turn's command and the new question. The second turn's result."""
    server.reset()
    second = turn_request(agent, "What did it print?", "ctx-1", "t-2", **config)
    again = asyncio.run(agent.run(second))
    assert again.error is None, (again, second.trajectory.events())
    assert next(e for e in second.trajectory.events() if e["type"] == "turn")["resume_session"] == session
    turn = [r for r in server.requests if model_turn(r)][-1]
    history = json.dumps(turn.messages)
    assert COMMAND in history and "What did it print?" in history  # the first turn is in the session
    assert again.usage.provider_details["session_id"] == session
    return again
