"""What every coding-CLI agent shares: its config (the model endpoint, the key write-only), finding the CLI,
running one turn of it in its own process group while its JSON-lines event stream is read as it arrives,
the A2A context -> CLI session map, and cancel/timeout (the whole process group is stopped). The CLI never gets
the `[model]` key: it calls the agent's model proxy (model_proxy.py) with a per-agent token, and the proxy adds the
key. ``shutdown`` (the A2A server's stop) ends the proxy and removes the private HOME and workspace.

A CLI harness subclasses ``CliAgent`` and says how to start a turn (``argv``, ``cli_env``) and what each event
of the stream means (``on_event``, which appends trajectory events and fills the turn's ``CliTurn``).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, cast

from pydantic import Field

from agentenv_local.procs import kill_group, running

from ..base import Agent
from ..model_config import ModelEndpointConfig, request_headers
from ..types import TaskRequest, TaskResult, TrajectoryLog, Usage
from .model_proxy import ModelProxy

MAX_CONTEXTS = 1024
STREAM_LINE_LIMIT = 16 * 1024 * 1024  # one stream-json event can carry a large tool result
STDERR_TAIL_CHARS = 2000
KILLED_GONE_WITHIN_S = 10.0  # how long a cancel waits for the killed processes to be gone
PROJECT_ROOT = Path(__file__).resolve().parents[3]  # the checkout that scripts/setup-agent-clis.sh fills
CLI_CACHE = PROJECT_ROOT / ".cache" / "agent-clis"
_TURN_FILES: contextvars.ContextVar[list[Path] | None] = contextvars.ContextVar("cli_turn_files", default=None)
_TURN_SECRETS: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("cli_turn_secrets", default=())
MODEL_SETTING_HINT = ("set [model] base_url and [model] default (or [model.roles] agent) in .agentenv/config.toml, "
                      "or pass --model; see docs/models.md")


class CliAgentError(Exception):
    """A turn that cannot run or failed; `message` is already masked and said in one line."""

    def __init__(self, code: str, message: str, error_type: Literal["agent_error", "infra_error"] = "agent_error"):
        super().__init__(message)
        self.code, self.message, self.error_type = code, message, error_type


class CliAgentConfig(ModelEndpointConfig):
    """agent-config/v1 of a CLI agent. deploy_agent sends the run's [model] endpoint as base_url, api, api_key,
    max_retries and request_timeout_s (as it does for tool-loop; the key is write-only: model_config.py)."""

    api: Literal["openai", "anthropic"] = "anthropic"
    command: str | None = None  # the CLI's executable, when neither the setup cache nor PATH has it
    workspace: str | None = None  # the folder the CLI works in (default: a private folder per agent)
    allowed_tools: list[str] | None = None  # None: the harness's default tool set (plus every MCP server's)
    env_vars: dict[str, str] = Field(default_factory=dict)  # more variables for the CLI (not secrets: shown)


@dataclass
class CliTurn:
    """What one turn's event stream said, filled by ``on_event``."""

    session_id: str | None = None
    final_text: str | None = None
    is_error: bool = False
    error_text: str | None = None
    tool_calls: int = 0
    usage: dict[str, Any] = field(default_factory=dict)
    pending_tools: dict[str, dict[str, Any]] = field(default_factory=dict)  # tool_use id -> {name, args}


class CliAgent(Agent):
    """The base of the coding-CLI agents; see the module doc."""

    config_model = CliAgentConfig
    #: the cache folder (.cache/agent-clis/<cli_cache_name>) and executable name of the CLI
    cli_cache_name: ClassVar[str] = ""
    cli_binary: ClassVar[str] = ""
    install_hint: ClassVar[str] = "run scripts/setup-agent-clis.sh"
    trajectory_format: ClassVar[str] = "agentenv-cli-agent/1"
    #: where the CLI finds skills, under its private HOME: skill-config's skills land in NAME/SKILL.md there
    skills_folder: ClassVar[str] = ""

    def __init__(self, **config: Any) -> None:
        super().__init__(**config)
        self._sessions: OrderedDict[str, str] = OrderedDict()
        self._home: Path | None = None
        self._workspace: Path | None = None
        self._proxy = ModelProxy()  # the CLI reaches the model through it: the real key stays in this process

    # --- what a harness says --------------------------------------------------------------------------------

    def argv(self, executable: str, request: TaskRequest, cfg: CliAgentConfig, session_id: str | None) -> list[str]:
        raise NotImplementedError

    def cli_env(self, cfg: CliAgentConfig, base_url: str, api_key: str | None) -> dict[str, str]:
        raise NotImplementedError

    def on_event(self, event: dict[str, Any], turn: CliTurn, log: TrajectoryLog) -> None:
        raise NotImplementedError

    # --- the parts they share -------------------------------------------------------------------------------

    def find_cli(self, cfg: CliAgentConfig) -> str:
        """The setup script's cache, else PATH, else the config field `command`; else one clear error."""
        cached = CLI_CACHE / self.cli_cache_name / "node_modules" / ".bin" / self.cli_binary
        if cached.is_file() and os.access(cached, os.X_OK):
            return str(cached)
        on_path = shutil.which(self.cli_binary)
        if on_path:
            return on_path
        if cfg.command:
            found = shutil.which(cfg.command)
            if found:
                return found
            raise CliAgentError(f"{self.name}.cli_not_found",
                                f"the {self.name} CLI (config command {cfg.command!r}) is not an executable here")
        raise CliAgentError(f"{self.name}.cli_not_found",
                            f"the {self.name} CLI `{self.cli_binary}` is not installed: {self.install_hint}")

    def endpoint(self, cfg: CliAgentConfig) -> tuple[str, str | None]:
        """The model endpoint and key: agent-config's, else the one the hub hands agents in the environment."""
        if cfg.base_url:
            return cfg.base_url, cfg.api_key.get_secret_value() if cfg.api_key else None
        env_url = os.environ.get("LITELLM_BASE_URL")
        if env_url:  # the env's key only ever goes to the env's endpoint
            return env_url, (cfg.api_key.get_secret_value() if cfg.api_key else None) or \
                os.environ.get("LITELLM_API_KEY") or None
        raise CliAgentError(f"{self.name}.no_model", f"the {self.name} agent has no model endpoint: "
                                                    + MODEL_SETTING_HINT)

    def model_route(self, cfg: CliAgentConfig) -> tuple[str, str, str | None]:
        """(the URL the CLI calls, the token it sends, the real key): the model proxy's route to `endpoint`."""
        base_url, key = self.endpoint(cfg)
        try:
            url, token = self._proxy.route(base_url, key, self.model_headers(cfg))
        except ValueError as exc:
            raise CliAgentError(f"{self.name}.bad_model_url", f"{exc}; " + MODEL_SETTING_HINT) from None
        return url, token, key

    def model_headers(self, cfg: CliAgentConfig) -> dict[str, str]:
        """The headers the model proxy adds: agent-config's model_headers (deploy_agent sends the endpoint's
        [model.headers]), after, for the env's endpoint, LITELLM_EXTRA_HEADERS (a JSON object, as the reference
        hands them)."""
        try:
            return request_headers(cfg)
        except ValueError as exc:
            raise CliAgentError(f"{self.name}.bad_model_headers", str(exc)) from None

    async def shutdown(self) -> None:
        """The agent stops: its model proxy ends and the HOME and workspace it made are removed."""
        self._proxy.close()
        for folder in (self._home, self._workspace):  # a workspace of the config's is the user's: kept
            if folder is not None:
                await asyncio.to_thread(shutil.rmtree, folder, True)
        self._home = self._workspace = None

    def model_name(self, cfg: CliAgentConfig) -> str:
        """The model's name, or one clear error naming the setting."""
        if not cfg.model:
            raise CliAgentError(f"{self.name}.no_model", f"the {self.name} agent has no model: set [model] default "
                                "(or [model.roles] agent) in .agentenv/config.toml, or pass --model")
        return cfg.model

    @staticmethod
    def prompt_text(request: TaskRequest) -> str:
        """The turn's text, then its data (if any) as JSON."""
        prompt = request.text
        if request.data:
            prompt = (prompt + "\n\n" if prompt else "") + json.dumps(request.data, ensure_ascii=False, default=str)
        return prompt

    def private_home(self) -> Path:
        """A HOME of this agent's own: the CLI's settings, sessions and caches stay out of the user's."""
        if self._home is None:
            self._home = Path(tempfile.mkdtemp(prefix=f"agentenv-{self.name}-home-"))
        return self._home

    def workspace(self, cfg: CliAgentConfig) -> Path:
        if cfg.workspace:
            path = Path(cfg.workspace).expanduser()
            path.mkdir(parents=True, exist_ok=True)
            return path
        if self._workspace is None:
            self._workspace = Path(tempfile.mkdtemp(prefix=f"agentenv-{self.name}-work-"))
        return self._workspace

    def base_env(self, home: Path) -> dict[str, str]:
        """PATH and a private HOME (XDG dirs in it): nothing of the hub's environment, so no secret of ours."""
        return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8",
                "XDG_CONFIG_HOME": str(home / ".config"), "XDG_DATA_HOME": str(home / ".local" / "share"),
                "XDG_CACHE_HOME": str(home / ".cache"), "XDG_STATE_HOME": str(home / ".local" / "state"),
                "NO_COLOR": "1", "CI": "1"}

    async def run(self, request: TaskRequest) -> TaskResult:
        from agentenv_local.config.masking import mask_known_secrets

        cfg = cast(CliAgentConfig, request.config)  # the server validated it with our config_model
        log = request.trajectory
        log.set_format(self.trajectory_format)
        session_id = self._sessions.get(request.context_id)
        log.append({"type": "turn", "input": request.text, "data": request.data, "resume_session": session_id})
        secrets: list[str] = []  # the key and the proxy's token: masked in anything said
        try:
            _, key = self.endpoint(cfg)  # no endpoint, or no CLI: said before the proxy starts
            secrets = [key] if key else []
            secrets += [v.get_secret_value() for v in cfg.model_headers.values()]
            executable = self.find_cli(cfg)
            proxy_url, token, key = self.model_route(cfg)
            secrets = [token, *secrets]
            _TURN_SECRETS.set(tuple(secrets))  # this task's own value: _run_cli masks the CLI's stderr with them
            turn = await self._run_cli(executable, request, cfg, session_id, proxy_url, token)
        except CliAgentError as exc:
            message = mask_known_secrets(exc.message, secrets)
            log.append({"type": "fail", "code": exc.code, "message": message, "error_type": exc.error_type})
            return TaskResult.failure(exc.code, message, error_type=exc.error_type)
        if turn.session_id:
            self._sessions[request.context_id] = turn.session_id
            self._sessions.move_to_end(request.context_id)
            while len(self._sessions) > MAX_CONTEXTS:
                self._sessions.popitem(last=False)
        usage = Usage(tool_call_count=turn.tool_calls, input_tokens=turn.usage.get("input_tokens"),
                      output_tokens=turn.usage.get("output_tokens"), total_tokens=turn.usage.get("total_tokens"),
                      cost_usd=turn.usage.get("cost_usd"),
                      provider_details={"cli": self.name, "model": cfg.model, "session_id": turn.session_id})
        if turn.is_error or turn.final_text is None:
            message = mask_known_secrets(turn.error_text or f"the {self.name} CLI gave no final answer", secrets)
            log.append({"type": "fail", "code": f"{self.name}.failed", "message": message,
                        "error_type": "agent_error"})
            return TaskResult.builder().failed(f"{self.name}.failed", message).usage(usage).build()
        return TaskResult.builder().succeeded().add_text(turn.final_text).usage(usage).build()

    def install_skills(self, request: TaskRequest) -> None:
        """The skills registered over skill-config/v1, each as `skills_folder`/NAME/SKILL.md in the private HOME
        (front matter added when the text has none: the CLIs read name and description from it). The HOME is
        this agent's own folder, and the CLI runs as the same user: no link there reaches further than the CLI
        itself could; the file itself is still never written through a link."""
        if not self.skills_folder or not request.skills:
            return
        for skill in request.skills:
            name, text = str(skill["name"]), str(skill.get("skill_md") or "")
            if not text.lstrip().startswith("---"):
                text = (f"---\nname: {name}\ndescription: {json.dumps(str(skill.get('description') or name))}\n"
                        f"---\n\n{text}")
            folder = self.private_home() / self.skills_folder / name  # a name is [A-Za-z0-9._-] (skill-config)
            try:
                folder.mkdir(mode=0o700, parents=True, exist_ok=True)
                path = folder / "SKILL.md"
                path.unlink(missing_ok=True)  # a link there goes, the file is made new
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    f.write(text)
            except OSError as exc:
                raise CliAgentError(f"{self.name}.skill_not_written",
                                    f"could not write skill {name!r} for the {self.name} CLI: {exc}",
                                    "infra_error") from None

    async def _run_cli(self, executable: str, request: TaskRequest, cfg: CliAgentConfig, session_id: str | None,
                       base_url: str, key: str | None) -> CliTurn:
        self.install_skills(request)
        _TURN_FILES.set([])  # this task's own list: the turn's files go when it ends (or is cancelled)
        try:
            return await self._run_cli_process(executable, request, cfg, session_id, base_url, key)
        finally:
            for path in _TURN_FILES.get() or []:
                path.unlink(missing_ok=True)

    def turn_file(self, path: str | Path) -> str:
        """Mark a file made for this turn only (an MCP config, instructions): removed when the turn ends."""
        files = _TURN_FILES.get()
        if files is not None:
            files.append(Path(path))
        return str(path)

    async def _run_cli_process(self, executable: str, request: TaskRequest, cfg: CliAgentConfig,
                               session_id: str | None, base_url: str, key: str | None) -> CliTurn:
        from agentenv_local.config.masking import mask_known_secrets

        env = {**self.base_env(self.private_home()), **cfg.env_vars, **self.cli_env(cfg, base_url, key)}
        argv = self.argv(executable, request, cfg, session_id)
        log = request.trajectory
        turn = CliTurn()
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, cwd=str(self.workspace(cfg)), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, start_new_session=True, limit=STREAM_LINE_LIMIT)
        except OSError as exc:
            raise CliAgentError(f"{self.name}.cli_failed", f"could not start the {self.name} CLI: {exc}",
                                "infra_error") from None
        assert proc.stdout is not None and proc.stderr is not None
        stderr_task = asyncio.ensure_future(proc.stderr.read())
        try:
            async for raw in proc.stdout:
                line = raw.decode("utf-8", errors="replace").strip()
                if not line.startswith("{"):
                    continue
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if isinstance(event, dict):
                    self.on_event(event, turn, log)
            code = await proc.wait()
            stderr = (await stderr_task).decode("utf-8", errors="replace")
        except BaseException:  # cancelled or timed out: leave nothing of the CLI running
            await asyncio.to_thread(stop_cli, proc.pid)
            stderr_task.cancel()
            raise
        kill_group(proc.pid)  # what the CLI left running in its group (a shell's background child)
        if code != 0 and turn.final_text is None:
            tail = mask_known_secrets(stderr.strip()[-STDERR_TAIL_CHARS:], [key or "", *_TURN_SECRETS.get()])
            log.append({"type": "cli_exit", "exit_code": code, "stderr": tail})
            turn.is_error = True
            turn.error_text = turn.error_text or f"the {self.name} CLI exited with {code}: " + (
                tail.splitlines()[-1] if tail else "no output")
        return turn


def stop_cli(pid: int) -> None:
    """Stop the CLI's process group, then whatever it started in sessions of their own (Claude Code runs each
    shell command with setsid, so the group alone would leave a long command running)."""
    from agentenv_local.procs import stop_group

    tree = descendants(pid)
    with contextlib.suppress(OSError):
        stop_group(pid, grace_s=2.0)  # SIGTERM first: a CLI cleans up its own shells when it can
    for child in tree:
        with contextlib.suppress(OSError):
            pgid = os.getpgid(child)
            if pgid == child:  # a group (session) leader the CLI started: the whole group goes
                kill_group(pgid)
            os.kill(child, 9)
    # Return once they are gone, not once they are told: on a loaded machine a killed process can run on for a
    # moment, and a caller told the turn is cancelled found the CLI's long command still running.
    deadline = time.monotonic() + KILLED_GONE_WITHIN_S
    while any(running(child) for child in tree) and time.monotonic() < deadline:
        time.sleep(0.01)


def descendants(pid: int) -> list[int]:
    """Every live process under `pid` (children first found first), read from /proc."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 1:
            parents.setdefault(int(fields[1]), []).append(int(entry.name))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            if child not in found:
                found.append(child)
                todo.append(child)
    return found
