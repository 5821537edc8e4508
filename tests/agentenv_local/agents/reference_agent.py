"""A tiny agent written with the REFERENCE SDK (agentenv_protocol[agent]); run from .venv-ref by the compat test.

    .venv-ref/bin/python reference_agent.py PORT
"""

import sys

import uvicorn
from agentenv_protocol.a2a_agent import (
    MCP_CONFIG_V1,
    TRAJECTORY_V1,
    AgentEnvAgent,
    AgentIdentity,
    TaskRequest,
    TaskResult,
    a2a_agent,
    enable,
)


@a2a_agent(identity=AgentIdentity(name="ref-echo", description="Reference SDK echo", version="1.0.0"),
           extensions=(MCP_CONFIG_V1, enable(TRAJECTORY_V1, live=True)))
class RefEcho(AgentEnvAgent):
    async def run(self, request: TaskRequest) -> TaskResult:
        text = " ".join(p.text for p in request.parts if getattr(p, "kind", "") == "text")
        request.trajectory.set_format("ref-echo/1")
        request.trajectory.append({"saw": text})
        if text == "fail":
            return TaskResult.failure("ref.nope", "refused on purpose")
        return TaskResult.builder().succeeded().add_text(f"ref says {text}").add_structured_output({"n": 1}).build()


if __name__ == "__main__":
    port = int(sys.argv[1])
    print(f"ref agent serving on http://127.0.0.1:{port}", file=sys.stderr, flush=True)
    uvicorn.run(RefEcho().create_app(), host="127.0.0.1", port=port, log_level="warning")
