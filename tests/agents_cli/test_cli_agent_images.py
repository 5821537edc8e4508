"""The CLI-agent images (hosting/agents/cli_image.py: the env runtime image plus Node and the CLI from the setup
cache) of claude-code and codex, built on real Podman at most once per session (the fixture), then found by their
tag; the tag follows its inputs; the build runs the CLI's --version in the image (a broken image fails it)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from agent_cli_kit import agentenv, cli_path, stored_run, write_model_config
from kits.hub import write_bundle

from agentenv_local.hosting.agents import cli_image
from agentenv_local.testing.fake_models import FakeModelServer

pytestmark = [pytest.mark.podman, pytest.mark.timeout(900)]  # a first image build takes minutes


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
    assert (agent["runtime"], agent["sandbox_type"], agent["on_host"]) == ("container", "podman", False), agent
    assert agent["a2a_card"]["name"] == "claude-code" and agent["a2a_url"].startswith("http://127.0.0.1:")
