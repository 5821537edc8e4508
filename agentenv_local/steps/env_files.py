"""The files of a computer-use env, read through its tools, for `collect_artifacts` with `env_id`.

As the reference's controller path: the env's gateway runs the env's own `cua_bash` (`{"script"}`, answering
`{"output", "error", "returncode"}` or plain stdout) and `cua_get_file` (`{"path"}`, answering the file's bytes in
base64) through `POST /step` (`call_tool`). `EnvFiles` offers the part of the sandbox interface collect_artifacts
reads with (`exists`, `list_files`, `read_file`; `exec` is refused, so sizes are checked after reading). An env
without those tools is refused naming them.
"""

from __future__ import annotations

import base64
import binascii
import json
import shlex
from typing import Any

from agentenv_local.errors import AgentenvError, NotFoundError, StepError

from .env_gateway import EnvGateway, message_of

CUA_TOOLS = ("cua_bash", "cua_get_file")


class EnvFiles:
    def __init__(self, gateway: EnvGateway, step_id: str) -> None:
        self.gw = gateway
        self.step_id = step_id

    async def _tool(self, name: str, args: dict[str, Any]) -> tuple[str, bool]:
        """(the tool's text, is_error)."""
        status, answer = await self.gw.request("POST", "/step", body={"action": "call_tool", "tool_name": name,
                                                                      "arguments": args})
        if status >= 300 or not isinstance(answer, dict) or "content" not in answer:
            why = message_of(answer)
            if "unknown tool" in why.lower() or "not found" in why.lower() or "no tool" in why.lower():
                raise StepError(f"step {self.step_id!r}: {self.gw.where()} has no {name} tool: collecting from an "
                                f"env needs a computer-use env (tools {', '.join(CUA_TOOLS)})",
                                hint="collect from a sandbox (sandbox_name, agent_name) instead")
            raise StepError(f"step {self.step_id!r}: {name} on {self.gw.where()} failed ({status}): {why}")
        text = "".join(c.get("text", "") for c in answer.get("content") or [] if isinstance(c, dict))
        return text, bool(answer.get("isError"))

    async def _bash(self, script: str) -> tuple[str, int]:
        """(stdout, return code) of `cua_bash`; a plain-text answer counts as stdout with code 0."""
        text, is_error = await self._tool("cua_bash", {"script": script})
        try:
            envelope = json.loads(text)
        except ValueError:
            envelope = None
        if isinstance(envelope, dict) and "output" in envelope:
            code = envelope.get("returncode")
            return str(envelope.get("output") or ""), int(code) if isinstance(code, int) else (1 if is_error else 0)
        return text, 1 if is_error else 0

    async def exists(self, path: str, kind: str = "any") -> bool:
        flag = {"file": "-f", "dir": "-d"}.get(kind, "-e")
        _out, code = await self._bash(f"test {flag} {shlex.quote(path)}")
        return code == 0

    async def list_files(self, path: str) -> list[str]:
        out, code = await self._bash(f"find {shlex.quote(path)} -type f -printf '%P\\n'")
        if code != 0:
            raise StepError(f"step {self.step_id!r}: listing {path} on {self.gw.where()} failed (cua_bash exit "
                            f"{code})")
        return sorted(line for line in out.splitlines() if line.strip())

    async def read_file(self, path: str) -> bytes:
        text, is_error = await self._tool("cua_get_file", {"path": path})
        if is_error:
            raise NotFoundError(f"{path} on {self.gw.where()}: {text[:200]}")
        try:
            return base64.b64decode(text.strip(), validate=True)
        except (binascii.Error, ValueError) as exc:
            raise StepError(f"step {self.step_id!r}: cua_get_file on {self.gw.where()} did not answer base64 "
                            f"for {path}: {exc}") from None

    async def exec(self, *args: Any, **kwargs: Any) -> Any:
        raise AgentenvError("an env's files are read through its tools, not a shell")  # sizes: checked after reading
