"""`agentenv gateway stdio INSTANCE`: an mcp 2.x stdio client (as an editor starts it) lists and
calls a deployed env's tools through the hub's gateway, with the role it was given."""

from __future__ import annotations

import asyncio
import json
import shutil

import httpx2
from kits.env_deploy import EXAMPLES
from kits.hub import agentenv_exe, clean_env, cli
from kits.servers import piped_mcp


def _stdio_session(project, instance_id: str, *args: str):
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    async def go():
        params = StdioServerParameters(command=agentenv_exe(), args=["gateway", "stdio", instance_id, *args],
                                       cwd=str(project), env=clean_env())
        async with Client(params) as client:
            tools = await client.list_tools()
            result = await client.call_tool("echo", {"text": "over stdio"})
            return [t.name for t in tools.tools], result

    return asyncio.run(go())


def test_an_editor_reaches_a_deployed_env_over_stdio_with_its_role(tmp_path):
    project = tmp_path / "proj"
    (project / "echo-env").mkdir(parents=True)
    shutil.copy(EXAMPLES / "echo" / "server.py", project / "echo-env" / "server.py")
    (project / "echo-env" / "env.toml").write_text('module = "server.py:Echo"\n')
    cli(project, "up", "--detach", check=True)
    try:
        cli(project, "env", "put", "echo-env", "--id", "echo", check=True)
        out = cli(project, "env", "deploy", "--id", "echo", "--json", check=True, timeout=120).stdout
        record = json.loads(out[: out.rindex("}") + 1])
        names, result = _stdio_session(project, record["instance_id"][:10])  # a unique prefix will do
        assert "echo" in names and result.content[0].text == "over stdio" and not result.is_error

        token = cli(project, "env", "instances", record["instance_id"], "--admin-token", check=True).stdout.strip()
        with httpx2.Client(timeout=30, headers={"Authorization": f"Bearer {token}"}) as http:
            # RBAC applies to the role the bridge was started with
            http.post(record["gateway_url"] + "/tools/disable", json={"role": "alice", "tools": ["echo"]})
        names, result = _stdio_session(project, record["instance_id"], "--role", "alice")
        assert "echo" not in names
        assert result.is_error and "Tool 'echo' is disabled for role 'alice'" in result.content[0].text

        # from a shell: requests piped in, stdin closed at once; those already read are still answered
        answers = piped_mcp([agentenv_exe(), "gateway", "stdio", record["instance_id"]],
                            [("tools/call", {"name": "echo", "arguments": {"text": "piped"}}), ("tools/list", {})],
                            cwd=project, env=clean_env())
        assert answers[2]["result"]["content"][0]["text"] == "piped" and not answers[2]["result"]["isError"]
        assert "echo" in [t["name"] for t in answers[3]["result"]["tools"]]

        missing = cli(project, "gateway", "stdio", "envi-000000000000")
        assert missing.returncode == 1 and "no running env instance" in missing.stderr
    finally:
        cli(project, "down")
