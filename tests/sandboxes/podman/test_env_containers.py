"""Envs in containers: an `image` env is deployed in a Podman container (its port published on 127.0.0.1)
behind the hub's gateway; the example envs answer the same checks in the hub, as a subprocess and in a
container; a container that dies or never serves fails the deploy with its logs; teardown removes it.

The env runtime image (agentenv-local on the base image) and the echo and notes images are built once per
session (and not again while the sources are unchanged).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from kits.data_plane import rpc
from kits.env_deploy import (
    EXAMPLES,
    admin,
    call_tool,
    on_hub,
    open_hub_session,
    put_env,
    result_text,
)

ROOT = Path(__file__).resolve().parents[3]


pytestmark = [pytest.mark.podman,
              # With AGENTENV_REQUIRE_PODMAN=1 (CI) the conftest's podman_base_image fails instead.
              pytest.mark.skipif(shutil.which("podman") is None and os.environ.get("AGENTENV_REQUIRE_PODMAN") != "1",
                                 reason="podman is not on PATH (scripts/setup.sh --test installs it)")]

INSTANCE_LABEL = "agentenv.env-instance"


def podman(*args: str) -> subprocess.CompletedProcess:
    from sandboxes.podman.engine import podman_env

    return subprocess.run(["podman", *args], check=False, capture_output=True, text=True, env=podman_env({}),
                          timeout=120)


def instance_containers(instance_id: str) -> list[str]:
    out = podman("ps", "-a", "--filter", f"label={INSTANCE_LABEL}={instance_id}", "--format", "{{.Names}}").stdout
    return sorted(out.split())


def _build_images() -> dict:
    from sandboxes.podman import runtime_image

    refs = {"runtime": runtime_image.ensure_runtime_image({})}
    for name in ("echo", "notes"):
        refs[name] = runtime_image.build_env_image(EXAMPLES / name)["ref"]
    return refs


@pytest.fixture(scope="session")
def built_env_images(podman_base_image):
    """Builds the env runtime and the echo and notes images once (nothing when the sources are unchanged)."""
    started = time.monotonic()
    refs = _build_images()
    # What a failed test leaves is found (and removed) by the session's leak check, tests/conftest.py: not
    # every env-instance container on the machine, which other workers' tests may be using.
    yield {**refs, "seconds": round(time.monotonic() - started, 1)}


@pytest.fixture
def env_images(built_env_images):
    """{"runtime", "echo", "notes"}: the image refs for the sources as they are now (a source edited during
    the session gets its new images here; unchanged, this only checks they exist)."""
    return _build_images()


@pytest.fixture
def session(tmp_path, env_images):
    with open_hub_session(tmp_path) as s:
        yield s


def deploy(session, env_id: str, **kwargs) -> dict:
    return on_hub(session, session.hub.envs.deploy(env_id, **kwargs))


def teardown(session, record: dict) -> dict:
    return on_hub(session, session.hub.envs.teardown(record["instance_id"]))


# -- the image build ---------------------------------------------------------------------------
def test_runtime_image_is_cached_and_tagged_by_the_sources(env_images):
    from sandboxes.podman import images, runtime_image

    first = runtime_image.build_env_image(EXAMPLES / "echo")  # (the sources may have changed since the fixture)
    built: list[str] = []  # what a build would say: nothing, only digests and `podman image exists`
    runtime = runtime_image.ensure_runtime_image({}, on_line=built.append)
    again = runtime_image.build_env_image(EXAMPLES / "echo")
    assert built == []
    assert again["built"] is False and again["ref"] == first["ref"]
    info = images.inspect(runtime, {})
    assert images.labels_of(info)[images.LABEL_NAME] == "env-runtime"
    assert runtime.endswith(":" + runtime_image.runtime_digest({})[:16])
    proc = podman("run", "--rm", "--network", "none", again["ref"], "python", "-c",
                  "import agentenv_local.env, sys; print(sys.prefix)")
    assert proc.returncode == 0 and proc.stdout.strip() == "/opt/agentenv", proc.stderr


# -- deploying an image env ------------------------------------------------------------------------
def test_image_env_runs_in_a_container_behind_the_gateway_and_is_removed_at_teardown(session, env_images):
    put_env(session.store, "echo-box", image=env_images["echo"], environment_name="echo")
    record = deploy(session, "echo-box")
    [child] = record["children"]
    assert child["kind"] == "container" and child["image"] == env_images["echo"]
    assert child["sandbox_id"].startswith("podman-") and child["sandbox_type"] == "podman"
    assert child["container_port"] == 8000 and child["url"].startswith("http://127.0.0.1:")
    assert record["sandbox_id"] == child["sandbox_id"] and record["sandbox_type"] == "podman"
    assert record["environment_card"]["name"] == "echo"
    assert instance_containers(record["instance_id"]) == [child["sandbox_id"]]
    stored = session.store.records.get("env_instances", record["instance_id"])["body"]
    assert stored["status"] == "running" and stored["sandbox_id"] == child["sandbox_id"]

    names, result = call_tool(record["mcp_url"], "echo", {"text": "from a container"})
    assert "echo" in names and "call_count" not in names
    assert result_text(result) == "from a container"

    done = teardown(session, record)
    assert done["status"] == "terminated"
    assert instance_containers(record["instance_id"]) == []
    assert podman("container", "exists", child["sandbox_id"]).returncode == 1


def test_the_next_hub_removes_the_container_a_dead_hub_left(session, env_images):
    from agentenv_local.hosting.envs.manager import EnvManager

    put_env(session.store, "echo-left", image=env_images["echo"], environment_name="echo")
    record = deploy(session, "echo-left")
    [child] = record["children"]
    assert podman("container", "exists", child["sandbox_id"]).returncode == 0
    # A second manager on the same store is what the next hub makes: every instance recorded running is a
    # dead hub's leftover to it (its container is removed through the sandbox provider's remove_leftover).
    swept = EnvManager(session.store, session.paths).swept_at_start
    assert record["instance_id"] in swept
    assert podman("container", "exists", child["sandbox_id"]).returncode == 1
    stored = session.store.records.get("env_instances", record["instance_id"])["body"]
    assert stored["status"] == "terminated" and stored["status_reason"] == "hub stopped"


def test_server_topology_serves_the_container_itself(session, env_images):
    put_env(session.store, "echo-srv", image=env_images["echo"], environment_name="echo",
            env_provider_type="server")
    record = deploy(session, "echo-srv")
    try:
        assert record["gateway_url"] is None and record["env_provider_type"] == "server"
        assert record["mcp_url"] == record["children"][0]["url"] == record["server_url"] + "/mcp"
        assert record["environment_card"]["name"] == "echo"
        _names, result = call_tool(record["mcp_url"], "echo", {"text": "direct"})
        assert result_text(result) == "direct"
    finally:
        teardown(session, record)
    assert instance_containers(record["instance_id"]) == []


def test_deploy_env_in_a_run_uses_the_runs_podman_and_tears_down(tmp_path, env_images):
    from kits.hub import cli, runs_json, show_json, write_bundle

    project = tmp_path / "proj"
    project.mkdir()
    bundle = write_bundle(project, "b", {"uses-echo": [
        {"id": "env", "type": "deploy_env", "env_id": "echo", "memory_mb": 512},
        {"id": "call", "type": "run_code", "env_id": "echo", "script_artifact_id": "caller"}]},
        artifacts={"caller": {"main.py": CALL_ECHO}})
    env_dir = bundle / "envs" / "echo"
    env_dir.mkdir(parents=True)
    (env_dir / "env.toml").write_text(f'image = "{env_images["echo"]}"\n')

    proc = cli(project, "run", "./b", "--task", "uses-echo", timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [run] = runs_json(project)
    assert run["status"] == "passed"
    shown = show_json(project, run["run_id"])
    [deployed] = shown["context"]["deployed_envs"]
    assert deployed["torn_down"] is True and deployed["sandbox_id"].startswith("podman-")
    assert deployed["children"][0]["kind"] == "container"
    assert shown["context"]["metadata"]["script_results"]["call"] == "from the run"
    assert instance_containers(deployed["instance_id"]) == []
    assert podman("container", "exists", deployed["sandbox_id"]).returncode == 1


# run_code's script: call echo through the deployed env's gateway (so the run reached the container).
CALL_ECHO = """
from mcp import Client


async def run(input):
    async with Client(input["env"]["mcp_url"]) as client:
        result = await client.call_tool("echo", {"text": "from the run"})
    return "".join(getattr(c, "text", "") for c in result.content)
"""


# -- the same env tests, wherever the env runs ----------------------------------------------------------
SOURCES = {
    "in_process": lambda name, images: {"module": f"server.py:{name.title()}"},
    "subprocess": lambda name, images: {"module": f"server.py:{name.title()}", "run_as": "subprocess"},
    "container": lambda name, images: {"image": images[name]},
}


@pytest.fixture(params=list(SOURCES))
def deployed(request, session, env_images):
    """deployed(name) -> the record of the example env `name` deployed from the parametrized source."""
    records = []

    def make(name: str) -> dict:
        put_env(session.store, name, EXAMPLES / name, environment_name=name,
                **SOURCES[request.param](name, env_images))
        record = deploy(session, name)
        records.append(record)
        return record

    yield make
    for record in records:
        teardown(session, record)
        assert instance_containers(record["instance_id"]) == []


def test_echo_env_answers_the_same_wherever_it_runs(deployed, session):
    import asyncio

    from mcp import Client

    record = deployed("echo")
    assert record["environment_card"]["name"] == "echo"

    async def go():
        async with Client(record["mcp_url"]) as c:
            tools = {t.name for t in (await c.list_tools()).tools}
            said = await c.call_tool("echo", {"text": "same everywhere"})
            failed = await c.call_tool("fail", {"code": "nope"})
            return tools, said, failed

    tools, said, failed = asyncio.run(go())
    assert tools == {"echo", "whoami", "fail"}
    assert result_text(said) == "same everywhere"
    assert failed.is_error and failed.structured_content["code"] == "nope"
    plane = record["gateway_url"] + "/svc/mcp-echo/agentenv"
    token = admin(session, record)  # the data plane is the control plane's: it takes the admin token
    assert rpc(plane, "data/add", {"parts": [{"kind": "data", "data": {"k": 1}}]}, token)["result"] == {}
    exported = rpc(plane, "data/get", {}, token)["result"]["parts"][0]["data"]
    assert exported == {"loaded": [{"k": 1}], "calls": 1}
    # a server we started listens on 127.0.0.1 too: its own data plane refuses a caller without the token
    for child in record["children"]:
        if child["kind"] in ("subprocess", "container"):
            import httpx2

            direct = child["url"].removesuffix("/mcp") + "/agentenv"
            refused = httpx2.post(direct, json={"jsonrpc": "2.0", "id": 1, "method": "data/reset"}, timeout=30)
            assert refused.status_code == 401, (child["kind"], refused.text)
            assert rpc(direct, "data/get", {}, token)["result"]["parts"][0]["data"] == exported


def test_notes_env_answers_the_same_wherever_it_runs(deployed, session):
    record = deployed("notes")
    _names, added = call_tool(record["mcp_url"], "add_note", {"title": "Groceries", "body": "eggs", "tags": ["home"]})
    assert added.structured_content["title"] == "Groceries" and added.structured_content["tags"] == ["home"]
    names, listed = call_tool(record["mcp_url"], "list_notes", {"tag": "home"})
    assert {"add_note", "list_notes", "get_note", "search_notes", "delete_note"} <= set(names)
    assert [n["title"] for n in listed.structured_content["result"]] == ["Groceries"]
    plane = record["gateway_url"] + "/svc/mcp-notes/agentenv"
    notes = rpc(plane, "data/get", {}, admin(session, record))["result"]["parts"][0]["data"]["notes"]
    assert [(n["title"], n["body"]) for n in notes] == [("Groceries", "eggs")]


# -- failures -------------------------------------------------------------------------------------------
def _build_broken(podman_base_image: str, name: str, command: str) -> str:
    import tempfile

    from sandboxes.podman import images

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "Containerfile").write_text(f"ARG BASE\nFROM ${{BASE}}\nCMD {command}\n")
        return images.build(name, "1", Path(tmp), build_args={"BASE": podman_base_image}, network=False)["ref"]


def test_a_container_that_exits_at_start_fails_the_deploy_with_its_logs(session, podman_base_image):
    from agentenv_local.hosting.envs.manager import DeployError

    ref = _build_broken(podman_base_image, "test-env-exits",
                        '["python3", "-c", "import sys; print(\'cannot open the widget database\', '
                        'file=sys.stderr); sys.exit(3)"]')
    put_env(session.store, "broken", image=ref)
    with pytest.raises(DeployError) as info:
        deploy(session, "broken")
    message = info.value.message
    assert "cannot open the widget database" in message, message
    assert "exited at start" in message or "stopped before its server was ready" in message, message
    assert session.hub.envs.instances("running") == []
    leftover = podman("ps", "-a", "--filter", f"ancestor={ref}", "--format", "{{.Names}}").stdout.split()
    assert leftover == []


def test_a_container_that_never_serves_fails_after_the_timeout_with_its_logs(session, podman_base_image):
    from agentenv_local.hosting.envs.manager import DeployError

    ref = _build_broken(podman_base_image, "test-env-silent",
                        '["bash", "-c", "echo listening nowhere; exec sleep 600"]')
    put_env(session.store, "silent", image=ref)
    session.hub.envs.ready_timeout = 3
    with pytest.raises(DeployError) as info:
        deploy(session, "silent")
    message = info.value.message
    assert "did not answer" in message and "listening nowhere" in message, message
    assert "0.0.0.0:$MCP_PORT" in (info.value.hint or "")
    leftover = podman("ps", "-a", "--filter", f"ancestor={ref}", "--format", "{{.Names}}").stdout.split()
    assert leftover == []


def test_an_image_not_in_local_storage_is_a_clear_error(session):
    from agentenv_local.hosting.envs.manager import DeployError

    put_env(session.store, "nowhere", image="localhost/agentenv/no-such-env:1")
    with pytest.raises(DeployError) as info:
        deploy(session, "nowhere")
    assert "is not in Podman's local storage" in info.value.message
    assert "agentenv image build" in (info.value.hint or "")


def test_without_a_working_podman_the_error_says_how_to_install_it(session, tmp_path):
    from agentenv_local.hosting.envs.manager import DeployError
    from sandboxes.podman import PodmanSandboxProvider

    class Services:  # a run's services whose podman is missing
        def sandbox_provider(self, name):
            assert name == "podman"
            return PodmanSandboxProvider(tmp_path / "state", {"podman": "no-such-podman-here"})

    put_env(session.store, "boxed", image="localhost/agentenv/echo:1")
    with pytest.raises(DeployError) as info:
        deploy(session, "boxed", services=Services())
    assert "container images come with the Podman sandboxes, which cannot run here" in info.value.message
    assert "Podman is not installed" in info.value.message
    assert "apt-get install -y podman" in (info.value.hint or "")
