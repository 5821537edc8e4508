"""The CLI-agent images (hosting/agents/cli_image.py: the env runtime image plus Node and the CLI from the setup
cache) of claude-code and codex (gemini, opencode and pi: on first use), built on real Podman at most once per
session (the fixtures), then found by their tag; the tag follows its inputs; the build runs the CLI's --version in
the image (a broken image fails it).

A CLI turn in Podman: `deploy_agent` of claude-code, codex, gemini, opencode or pi under `--sandbox podman` (or the
step's `sandbox_type: podman`) runs our A2A agent and the real CLI in its image, on the fake model server through
the agent's model proxy: the reference's smoke task (the CLI's shell tool runs `echo $((6 * 7))`: 42) and the
office env task (the CLI calls search_emails through our gateway under the role 'agent', purge_mailbox hidden by
RBAC); the stored trajectory shows the CLI's tool calls and the run records a Podman container agent whose
container has no network but the relay to those two endpoints (hosting/agents/agent_net.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_cli_kit import (
    MODEL_KEY,
    agentenv,
    cli_path,
    run_office_task,
    run_reference_smoke,
    smoke_bundle_of,
    stored_run,
    tool_calls,
    write_model_config,
)
from kits.hub import write_bundle
from shell_responder import COMMAND, ShellResponder

from agentenv_local.hosting.agents import cli_image
from agentenv_local.testing.fake_models import FakeModelServer

pytestmark = [pytest.mark.podman, pytest.mark.timeout(900)]  # a first image build takes minutes
PODMAN = ("--sandbox", "podman")


def anthropic_model(server: FakeModelServer) -> dict[str, str]:
    return {"api": "anthropic", "base_url": server.root_url, "default": "claude-sonnet-4-5"}


def openai_model(server: FakeModelServer) -> dict[str, str]:
    return {"api": "openai", "base_url": server.base_url, "default": "gpt-5-codex"}


class CountingProvider:
    """A Podman provider whose build_image calls are counted, and whose runtime image is the one it first
    answered (the runtime's tag follows every source file, which other work in this tree may change meanwhile)."""

    def __init__(self, provider: Any) -> None:
        self.provider, self.builds, self.runtime = provider, 0, ""

    def runtime_image(self, on_line: Any = None) -> str:
        self.runtime = self.runtime or str(self.provider.runtime_image(on_line=on_line))
        return self.runtime

    def list_images(self) -> list[dict[str, Any]]:
        return list(self.provider.list_images())

    def build_image(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        self.builds += 1
        return dict(self.provider.build_image(*args, **kwargs))


@pytest.fixture(scope="session")
def cli_agent_images(podman_base_image: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The claude-code and codex images, built once for the session; a second ask builds nothing."""
    from sandboxes.podman import PodmanSandboxProvider

    cli_path("claude-code", "claude")
    cli_path("codex", "codex")
    provider = PodmanSandboxProvider(tmp_path_factory.mktemp("cli-images") / ".agentenv", {"pool_size": 0})
    try:
        counting = CountingProvider(provider)
        refs = {name: cli_image.ensure_agent_image(counting, name) for name in ("claude-code", "codex")}
        built = counting.builds
        assert refs == {name: cli_image.ensure_agent_image(counting, name) for name in refs}
        assert counting.builds == built  # found by its tag: the same inputs build nothing
    finally:
        asyncio.run(provider.aclose())
    return refs


@pytest.fixture(scope="session")
def agent_images(podman_base_image: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentImages]:
    """The image of any other CLI, built on first ask (once per session: a second ask builds nothing)."""
    from sandboxes.podman import PodmanSandboxProvider

    provider = PodmanSandboxProvider(tmp_path_factory.mktemp("more-cli-images") / ".agentenv", {"pool_size": 0})
    try:
        yield AgentImages(CountingProvider(provider))
    finally:
        asyncio.run(provider.aclose())


class AgentImages:
    """CLI-agent images built through one counting provider, each once."""

    def __init__(self, counting: CountingProvider) -> None:
        self.counting = counting
        self.refs: dict[str, str] = {}

    def __call__(self, agent: str, binary: str, *, venv: bool = False) -> str:
        cli_path(agent if not venv else "openhands-venv", binary, venv=venv)
        if agent not in self.refs:
            # the runtime image of now: an older one may be gone (a build after a source change replaces it)
            self.counting.runtime = ""
            self.refs[agent] = cli_image.ensure_agent_image(self.counting, agent)
            built = self.counting.builds
            assert cli_image.ensure_agent_image(self.counting, agent) == self.refs[agent]
            assert self.counting.builds == built  # found by its tag
        return self.refs[agent]


def in_podman(project: Path, drop: tuple[str, ...]) -> dict[str, Any]:
    """The deployed agent of the project's last run, checked to have run in a Podman container."""
    run, shown = stored_run(project, drop)
    [agent] = run["context"]["deployed_agents"]
    assert (agent["runtime"], agent["sandbox_type"], agent["on_host"]) == ("container", "podman", False), agent
    assert agent["network"] == "relay"  # network none: only the model endpoint and the gateway (agent_net.py)
    assert MODEL_KEY not in shown
    return dict(agent)


def test_the_image_tag_follows_its_inputs(cli_agent_images: dict[str, str]) -> None:
    runtime = "localhost/agentenv/env-runtime:0123456789abcdef"
    digest = cli_image.agent_digest("claude-code", runtime)
    assert digest == cli_image.agent_digest("claude-code", runtime)
    assert digest != cli_image.agent_digest("claude-code", runtime.replace("0123", "4567"))
    assert digest != cli_image.agent_digest("codex", runtime)
    assert cli_agent_images["claude-code"].startswith("localhost/agentenv/agent-claude-code:")


def test_the_image_carries_node_and_its_container_mounts_the_cli_read_only(cli_agent_images: dict[str, str]) -> None:
    """The CLI (hundreds of MB) is not copied into the image: a container of it mounts the setup cache's install
    read-only at /opt/agent-clis/NAME (what steps/agent.py passes as read_only_mounts)."""
    from sandboxes.podman.engine import run_podman

    ref = cli_agent_images["claude-code"]
    proc = run_podman(["run", "--rm", ref, "sh", "-c", "node --version && ls -A /opt/agent-clis/claude-code | wc -l"],
                      {}, timeout=120)
    out = proc.stdout.decode()
    assert proc.returncode == 0 and out.startswith("v") and out.split()[-1] == "0", out + proc.stderr.decode()
    mounts = cli_image.agent_mounts("claude-code")
    assert mounts == {"/opt/agent-clis/claude-code": str(cli_image.cli_cache("claude-code"))}
    python, venv = cli_image.openhands_paths()
    assert cli_image.agent_mounts("openhands") == {str(python): str(python), str(venv): str(venv)}


def test_an_agent_without_an_image_says_which_have_one() -> None:
    with pytest.raises(cli_image.AgentImageError) as err:
        cli_image.cli_cache("tool-loop")
    assert "openhands" in (err.value.hint or "") and "claude-code" in (err.value.hint or "")


def test_deploy_agent_of_claude_code_with_sandbox_type_podman_runs_in_its_image(cli_agent_images: dict[str, str],
                                                                                 tmp_path: Path) -> None:
    """The deploy only (the agent answers its card and takes its config in the container); a prompted turn
    is left to the CLI tests."""
    project = tmp_path / "proj"
    (project / ".agentenv").mkdir(parents=True)
    write_bundle(tmp_path, "b", {"t": [{"id": "deploy", "type": "deploy_agent", "a2a_agent_id": "claude-code",
                                        "sandbox_type": "podman", "ready_timeout_seconds": 120}]})
    with FakeModelServer(api_key="sk-fake") as server:
        write_model_config(project, api="anthropic", base_url=server.root_url, default="claude-sonnet-4-5")
        out = agentenv(project, "run", str(tmp_path / "b"), drop=("ANTHROPIC_",))
    assert out.returncode == 0 and "passed" in out.stdout, out.stdout + out.stderr
    run, _ = stored_run(project, ("ANTHROPIC_",))
    [agent] = run["context"]["deployed_agents"]
    assert (agent["runtime"], agent["sandbox_type"], agent["on_host"], agent["network"]) == \
        ("container", "podman", False, "relay"), agent
    assert agent["a2a_card"]["name"] == "claude-code" and agent["a2a_url"].startswith("http://127.0.0.1:")


def test_claude_code_smoke_runs_in_podman(cli_agent_images: dict[str, str], tmp_path: Path) -> None:
    bundle = smoke_bundle_of(tmp_path, "claude-code")
    trajectory = run_reference_smoke(bundle, "claude-code", ShellResponder(), anthropic_model, ("ANTHROPIC_",),
                                     run_args=PODMAN)
    in_podman(bundle.parent / "proj", ("ANTHROPIC_",))
    [call] = tool_calls(trajectory)
    assert (call["name"], call["result"].strip(), call["is_error"]) == ("Bash", "42", False)
    assert COMMAND in call["args"]["command"]


def test_codex_smoke_runs_in_podman(cli_agent_images: dict[str, str], tmp_path: Path) -> None:
    bundle = smoke_bundle_of(tmp_path, "codex")
    trajectory = run_reference_smoke(bundle, "codex", ShellResponder(), openai_model, ("OPENAI_",), run_args=PODMAN)
    in_podman(bundle.parent / "proj", ("OPENAI_",))
    assert [(c["name"], c["result"].strip()) for c in tool_calls(trajectory)] == [("command_execution", "42")]


def test_claude_code_in_podman_calls_an_office_tool_through_the_gateway(cli_agent_images: dict[str, str],
                                                                       tmp_path: Path) -> None:
    responder = ShellResponder(mcp_tool="__search_emails", mcp_args={"query": "acme pricing"})
    offered = run_office_task(tmp_path, "claude-code", responder, anthropic_model, ("ANTHROPIC_",), "/v1/messages",
                              solver={"sandbox_type": "podman", "ready_timeout_seconds": 120})
    assert responder.called == ["mcp__office__search_emails"]
    assert offered and all("mcp__office__purge_mailbox" not in names for names in offered)  # the role's RBAC
    in_podman(tmp_path / "proj", ("ANTHROPIC_",))


def test_codex_in_podman_calls_an_office_tool_through_the_gateway(cli_agent_images: dict[str, str],
                                                                 tmp_path: Path) -> None:
    responder = ShellResponder(mcp_tool=".search_emails", mcp_args={"query": "acme pricing"})
    offered = run_office_task(tmp_path, "codex", responder, openai_model, ("OPENAI_",), "/v1/responses",
                              solver={"sandbox_type": "podman", "ready_timeout_seconds": 120})
    assert len(responder.called) == 1 and responder.called[0].endswith("search_emails"), responder.called
    assert offered and all(not any(n.endswith("purge_mailbox") for n in names) for names in offered)
    in_podman(tmp_path / "proj", ("OPENAI_",))


# --- gemini, opencode, pi (their images built on first use) -------------------------------------------------------

GEMINI_MODEL = "gemini-2.5-flash"
EXPR = "expr 6 '*' 7"  # Gemini CLI refuses `$((6 * 7))` as command substitution (test_cli_gemini.py)


def gemini_model(server: FakeModelServer) -> dict[str, str]:
    return {"base_url": server.root_url, "default": GEMINI_MODEL}


def test_gemini_smoke_runs_in_podman(agent_images: AgentImages, tmp_path: Path) -> None:
    agent_images("gemini", "gemini")
    bundle = smoke_bundle_of(tmp_path, "gemini")
    trajectory = run_reference_smoke(bundle, "gemini", ShellResponder(command=EXPR), gemini_model,
                                     ("GEMINI_", "GOOGLE_"), run_args=PODMAN)
    in_podman(bundle.parent / "proj", ("GEMINI_", "GOOGLE_"))
    assert [(c["name"], c["args"]["command"], c["result"].strip()) for c in tool_calls(trajectory)] == \
        [("run_shell_command", EXPR, "42")]


def test_gemini_in_podman_calls_an_office_tool_through_the_gateway(agent_images: AgentImages,
                                                                  tmp_path: Path) -> None:
    agent_images("gemini", "gemini")
    responder = ShellResponder(mcp_tool="search_emails", mcp_args={"query": "acme pricing"})
    offered = run_office_task(tmp_path, "gemini", responder, gemini_model, ("GEMINI_", "GOOGLE_"),
                              f"/v1beta/models/{GEMINI_MODEL}:streamGenerateContent",
                              solver={"sandbox_type": "podman", "ready_timeout_seconds": 120})
    assert len(responder.called) == 1 and responder.called[0].endswith("search_emails"), responder.called
    assert offered and all(not any(n.endswith("purge_mailbox") for n in names) for names in offered)
    in_podman(tmp_path / "proj", ("GEMINI_", "GOOGLE_"))


def test_opencode_smoke_runs_in_podman(agent_images: AgentImages, tmp_path: Path) -> None:
    agent_images("opencode", "opencode")
    bundle = smoke_bundle_of(tmp_path, "opencode")
    trajectory = run_reference_smoke(bundle, "opencode", ShellResponder(), anthropic_model, ("ANTHROPIC_",),
                                     run_args=PODMAN)
    in_podman(bundle.parent / "proj", ("ANTHROPIC_",))
    assert [(c["name"], c["args"]["command"], c["result"].strip()) for c in tool_calls(trajectory)] == \
        [("bash", COMMAND, "42")]


def test_opencode_in_podman_calls_an_office_tool_through_the_gateway(agent_images: AgentImages,
                                                                    tmp_path: Path) -> None:
    agent_images("opencode", "opencode")
    responder = ShellResponder(mcp_tool="_search_emails", mcp_args={"query": "acme pricing"})
    offered = run_office_task(tmp_path, "opencode", responder, anthropic_model, ("ANTHROPIC_",), "/v1/messages",
                              solver={"sandbox_type": "podman", "ready_timeout_seconds": 120})
    assert responder.called == ["office_search_emails"]
    assert offered and all("office_purge_mailbox" not in names for names in offered)
    in_podman(tmp_path / "proj", ("ANTHROPIC_",))


def test_pi_smoke_runs_in_podman(agent_images: AgentImages, tmp_path: Path) -> None:
    agent_images("pi", "pi")
    bundle = smoke_bundle_of(tmp_path, "pi")
    trajectory = run_reference_smoke(bundle, "pi", ShellResponder(), lambda server: {
        "api": "openai", "base_url": server.base_url, "default": "fake-model"}, ("ANTHROPIC_",), run_args=PODMAN)
    in_podman(bundle.parent / "proj", ("ANTHROPIC_",))
    assert [(c["name"], c["args"]["command"], c["result"].strip()) for c in tool_calls(trajectory)] == \
        [("bash", COMMAND, "42")]


def test_pi_in_podman_calls_an_office_tool_through_our_extension(agent_images: AgentImages, tmp_path: Path) -> None:
    """pi_mcp.js (our pi extension, shipped in the package) lists the gateway's tools through the relay."""
    agent_images("pi", "pi")
    responder = ShellResponder(mcp_tool="_search_emails", mcp_args={"query": "acme pricing"})
    offered = run_office_task(tmp_path, "pi", responder, lambda server: {
        "api": "openai", "base_url": server.base_url, "default": "fake-model"}, ("ANTHROPIC_",),
        "/v1/chat/completions", solver={"sandbox_type": "podman", "ready_timeout_seconds": 120})
    assert responder.called == ["office_search_emails"]
    assert offered and all("office_purge_mailbox" not in names for names in offered)
    in_podman(tmp_path / "proj", ("ANTHROPIC_",))


# --- openhands: its own Python 3.12 and tmux in the image (cli_image.py) ---------------------------------------------

def openhands_model(server: FakeModelServer) -> dict[str, str]:
    return {"api": "openai", "base_url": server.base_url, "default": "fake-model"}


def test_openhands_smoke_runs_in_podman(agent_images: AgentImages, tmp_path: Path) -> None:
    agent_images("openhands", "openhands", venv=True)
    bundle = smoke_bundle_of(tmp_path, "openhands")
    trajectory = run_reference_smoke(bundle, "openhands", ShellResponder(), openhands_model, ("ANTHROPIC_",),
                                     run_args=PODMAN)
    in_podman(bundle.parent / "proj", ("ANTHROPIC_",))
    assert [(c["name"], c["args"]["command"], c["result"].strip()) for c in tool_calls(trajectory)] == \
        [("terminal", COMMAND, "42")]


def test_openhands_in_podman_calls_an_office_tool_through_the_gateway(agent_images: AgentImages,
                                                                     tmp_path: Path) -> None:
    agent_images("openhands", "openhands", venv=True)
    responder = ShellResponder(mcp_tool="search_emails", mcp_args={"query": "acme pricing", "security_risk": "LOW"})
    offered = run_office_task(tmp_path, "openhands", responder, openhands_model, ("ANTHROPIC_",),
                              "/v1/chat/completions", solver={"sandbox_type": "podman", "ready_timeout_seconds": 120})
    assert len(responder.called) == 1 and responder.called[0].endswith("search_emails"), responder.called
    assert offered and all(not any(n.endswith("purge_mailbox") for n in names) for names in offered)
    in_podman(tmp_path / "proj", ("ANTHROPIC_",))
