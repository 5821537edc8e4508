"""The CLI-agent images (hosting/agents/cli_image.py: the env runtime image plus Node and the CLI from the setup
cache) of claude-code and codex, built on real Podman at most once per session (the fixture), then found by their
tag; the tag follows its inputs; the build runs the CLI's --version in the image (a broken image fails it).

A CLI turn in Podman: `deploy_agent` of claude-code or codex under `--sandbox podman` (or the step's
`sandbox_type: podman`) runs our A2A agent and the real CLI in its image, on the fake model server through the
agent's model proxy: the reference's smoke task (the CLI's shell tool runs `echo $((6 * 7))`: 42) and the office
env task (the CLI calls search_emails through our gateway under the role 'agent', purge_mailbox hidden by RBAC);
the stored trajectory shows the CLI's tool calls and the run records a Podman container agent whose container has
no network but the relay to those two endpoints (hosting/agents/agent_net.py)."""

from __future__ import annotations

import asyncio
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


def test_openhands_has_no_image_and_says_so() -> None:
    with pytest.raises(cli_image.AgentImageError) as err:
        cli_image.cli_cache("openhands")
    assert "Python 3.12" in (err.value.hint or "")


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
