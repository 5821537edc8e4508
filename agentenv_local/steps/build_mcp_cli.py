"""`build_mcp_cli`: a command-line tool for a deployed env's tools, stored as an artifact.

The artifact holds one executable, `bin/<command_name>`: a Python script (standard library only, so it runs
in any sandbox with a Python 3) that calls the env's tools through the gateway's `/step` route:

    <command> list                        the tools the caller's role sees (live, from the gateway)
    <command> TOOL key=value ...          call TOOL; a value is parsed as JSON when it can be ("3", "true")
    <command> TOOL --json '{"k": "v"}'    call TOOL with these arguments

The gateway is `$AGENT_ENV_GATEWAY_URL` (the reference's variable), else the URL the env had when the CLI was
built; the role is `$AGENTENV_ROLE` (sent as `AgentEnv-Role`). The tools known at build time are in `--help`.

Artifact type `cli` does not exist here yet: the CLI is a `file_artifact_universe` whose document says it is
one (`cli: {command_name, entrypoint, env_id, env_version, tools}`). `load_artifact` puts it in a sandbox
(`add_skills` does not take `cli_artifact_ids` yet).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, ClassVar

from pydantic import Field

from agentenv_local import artifacts as artifact_types
from agentenv_local.errors import AgentenvError, StepError

from .env_control import EnvStep
from .env_gates import list_all_tools

if TYPE_CHECKING:
    from agentenv_local.tasks.context import StepContext

COMMAND_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
GATEWAY_URL_ENV = "AGENT_ENV_GATEWAY_URL"
ROLE_ENV = "AGENTENV_ROLE"

SCRIPT = '''#!/usr/bin/env python3
"""{command}: call the tools of env {env_id} through its gateway (built by agentenv's build_mcp_cli)."""
import json
import os
import sys
import urllib.error
import urllib.request

GATEWAY = os.environ.get("{gateway_env}") or {gateway!r}
ROLE = os.environ.get("{role_env}")
TOOLS = {tools!r}
USAGE = """usage: {command} list | {command} TOOL [key=value ...] | {command} TOOL --json '{{...}}'

tools (at build time; `{command} list` asks the gateway):
""" + "\\n".join(f"  {{name}}: {{desc}}" for name, desc in TOOLS)


def step(body):
    headers = {{"Content-Type": "application/json"}}
    if ROLE:
        headers["AgentEnv-Role"] = ROLE
    request = urllib.request.Request(GATEWAY.rstrip("/") + "/step", data=json.dumps(body).encode(),
                                     headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=120) as answer:
            return json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        sys.exit(f"error: the gateway answered {{exc.code}}: {{exc.read().decode(errors='replace')[:500]}}")
    except urllib.error.URLError as exc:
        sys.exit(f"error: cannot reach the gateway at {{GATEWAY}} ({{exc.reason}}); set {gateway_env}")


def value(text):
    try:
        return json.loads(text)
    except ValueError:
        return text


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0
    if argv[0] == "list":
        tools = step({{"action": "list_tools"}})
        for tool in tools.get("tools", tools) if isinstance(tools, dict) else tools:
            print(tool.get("name"), "-", (tool.get("description") or "").split("\\n")[0])
        return 0
    name, rest = argv[0], argv[1:]
    if rest[:1] == ["--json"]:
        if len(rest) != 2:
            sys.exit("error: --json takes one JSON object")
        args = json.loads(rest[1])
    else:
        bad = [a for a in rest if "=" not in a]
        if bad:
            sys.exit(f"error: arguments are key=value, not {{bad[0]!r}}")
        args = {{k: value(v) for k, v in (a.split("=", 1) for a in rest)}}
    result = step({{"action": "call_tool", "tool_name": name, "arguments": args}})
    if result.get("structuredContent") is not None:
        print(json.dumps(result["structuredContent"], indent=1, ensure_ascii=False))
    else:
        for part in result.get("content") or []:
            print(part.get("text", json.dumps(part)))
    return 1 if result.get("isError") else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
'''


class BuildMcpCliStep(EnvStep):
    type: ClassVar[str] = "build_mcp_cli"
    output_artifact_ref_fields: ClassVar[tuple[str, ...]] = ("cli_artifact_id",)

    command_name: str = Field(min_length=1)
    cli_artifact_id: str | None = None  # None: "<env_id>-cli"

    def config_problems(self) -> list[str]:
        if not COMMAND_NAME.match(self.command_name):
            return [f"command_name: {self.command_name!r} must be a file name (letters, digits, . _ -; "
                    "starting with a letter or digit)"]
        return []

    def artifact_id(self) -> str:
        return self.cli_artifact_id or f"{self.env_id}-cli"

    async def execute(self, ctx: StepContext) -> None:
        record = ctx.deployed_env(self.env_id)
        if not record.get("gateway_url"):
            raise StepError(f"step {self.id!r}: env {self.env_id!r} has no gateway, which the CLI calls",
                            hint="deploy the env with a gateway (the default topology)")
        try:
            tools, _pages = await list_all_tools(record["mcp_url"])
        except Exception as exc:
            raise StepError(f"step {self.id!r}: tools/list of env {self.env_id!r} failed: "
                            f"{type(exc).__name__}: {exc}") from exc
        listed = [(str(t.get("name")), (str(t.get("description") or "").splitlines() or [""])[0]) for t in tools]
        script = SCRIPT.format(command=self.command_name, env_id=self.env_id, gateway=record["gateway_url"],
                               gateway_env=GATEWAY_URL_ENV, role_env=ROLE_ENV, tools=listed)
        entrypoint = f"bin/{self.command_name}"
        cli = {"command_name": self.command_name, "entrypoint": entrypoint, "env_id": self.env_id,
               "env_version": record.get("env_version"), "tools": [n for n, _ in listed],
               "gateway_url_env": GATEWAY_URL_ENV, "role_env": ROLE_ENV}
        try:
            doc = artifact_types.put_artifact(
                ctx.store, self.artifact_id(), {entrypoint: script.encode()}, artifact_type=artifact_types.BUNDLE,
                description=f"CLI {self.command_name} for the tools of env {self.env_id}", extra={"cli": cli})
        except AgentenvError as exc:
            raise StepError(f"step {self.id!r}: cannot store the CLI {self.artifact_id()!r}: {exc.message}") from exc
        ctx.metadata["cli_artifact"] = {"id": doc["id"], "version": doc["version"], "type": "cli",
                                        "command_name": self.command_name}
        ctx.log(f"CLI {self.command_name} ({len(listed)} tools of env {self.env_id}) stored as "
                f"{doc['id']} v{doc['version']}")
