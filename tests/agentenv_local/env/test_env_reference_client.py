"""The reference's own clients (agentenv-framework-protocol: `ToolSession`, `get_card`, `reset_data/add_data/get_data`,
`invoke_extension`) against an env served by this SDK.

They need mcp<2 beside them, so they live in a side venv, never in this project's:
`scripts/setup.sh --test` makes it as .venv-ref/ (or point AGENTENV_REF_VENV at another venv,
e.g. /tmp/agentenv-ref-venv). Without one these tests are skipped.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from kits.env_sdk import ECHO, env_subprocess
from kits.servers import REF_PYTHON, REF_VENV, reference_imports

HERE = Path(__file__).resolve().parent

pytestmark = pytest.mark.skipif(not reference_imports("agentenv_protocol"),
                                reason=f"no reference venv at {REF_VENV} (see this module's docstring)")


@pytest.mark.parametrize("transport", ["json", "sse"])
def test_reference_clients_drive_our_echo_env(transport):
    extra = ("--sse",) if transport == "sse" else ()
    with env_subprocess(ECHO, *extra) as (base, _proc):
        out = subprocess.run([str(REF_PYTHON), str(HERE / "reference_client_check.py"), base],
                             check=False, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout)
    assert seen["card_name"] == "echo" and seen["mcp_path"] == "/mcp" and seen["supports_v1"] is True
    assert seen["echo_tool"] is True
    assert seen["get_data"] == [{"kind": "data", "data": {"loaded": [{"text": "hello"}, {"k": 1}], "calls": 0}},
                                {"kind": "text", "text": "0 calls"}]
    assert seen["ext_ok"] == {"ok": True, "calls": 2}
    assert seen["ext_error"] == {"status": 400, "code": "invalid_calls", "detail": "calls must be >= 0, got -1",
                                 "retryable": False, "applied": "no", "hint": "pass 0 to reset the counter"}
    assert seen["protocol_version"] == "2025-11-25"
    assert seen["tools"] == ["echo", "whoami", "fail", "call_count"]
    assert seen["echo"] == {"content": [{"text": "hi", "type": "text"}], "isError": False}
    assert seen["whoami"]["role"] == "alice" and seen["whoami"]["session"]
    assert seen["fail"] == {"isError": True, "text": "refused: this tool always fails"}
    assert seen["whoami_default"]["role"] is None
