"""The fake model server's Gemini API: generateContent, streamGenerateContent (alt=sse and the JSON array),
countTokens, its checks (function responses answer the calls right before, one each) and auth."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest

from agentenv_local.testing.fake_models import FakeModelServer, Reply
from agentenv_local.testing.wire_gemini import validate_gemini

KEY = "fake-gemini-key"
HEADERS = {"x-goog-api-key": KEY, "content-type": "application/json"}
SHELL = {"functionDeclarations": [{"name": "run_shell_command", "parametersJsonSchema": {
    "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}]}


def post(srv: FakeModelServer, method: str, body: dict, *, query: str = "", headers: dict | None = None):
    url = f"{srv.root_url}/v1beta/models/gemini-2.5-flash:{method}{'?' + query if query else ''}"
    return httpx2.post(url, content=json.dumps(body), headers=HEADERS if headers is None else headers, timeout=10)


@pytest.fixture
def srv():
    with FakeModelServer(api_key=KEY) as s:
        yield s


def test_generate_content_then_a_function_response(srv: FakeModelServer) -> None:
    srv.push(Reply.tool_call("run_shell_command", {"command": "ls"}))
    body: dict[str, Any] = {"contents": [{"role": "user", "parts": [{"text": "go"}]}], "tools": [SHELL],
                            "systemInstruction": {"parts": [{"text": "be terse"}]}}
    answer = post(srv, "generateContent", body).json()
    call = answer["candidates"][0]["content"]["parts"][0]["functionCall"]
    assert call == {"name": "run_shell_command", "args": {"command": "ls"}}
    assert answer["candidates"][0]["finishReason"] == "STOP" and answer["usageMetadata"]["totalTokenCount"]
    rec = srv.requests[-1]
    assert (rec.api, rec.model, rec.tool_names, rec.system) == ("gemini", "gemini-2.5-flash", ["run_shell_command"],
                                                                "be terse")
    body["contents"] += [{"role": "model", "parts": [{"functionCall": call}]},
                         {"role": "user", "parts": [{"functionResponse": {"name": "run_shell_command",
                                                                          "response": {"output": "a.txt"}}}]}]
    assert post(srv, "generateContent", body).status_code == 200
    assert srv.requests[-1].answered_tools and srv.requests[-1].tool_results[0]["content"] == "a.txt"


def test_stream_generate_content_sse_and_array(srv: FakeModelServer) -> None:
    body = {"contents": [{"role": "user", "parts": [{"text": "go"}]}]}
    srv.push(Reply(text="The answer is forty-two."))
    r = post(srv, "streamGenerateContent", body, query="alt=sse")
    assert r.headers["content-type"].startswith("text/event-stream")
    chunks = [json.loads(line.removeprefix("data: ")) for line in r.text.split("\n\n") if line.strip()]
    assert "".join(p["text"] for c in chunks for p in c["candidates"][0]["content"]["parts"]) == \
        "The answer is forty-two."
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP" and "usageMetadata" in chunks[-1]
    assert all("finishReason" not in c["candidates"][0] for c in chunks[:-1])
    srv.push(Reply(text="again"))
    array = post(srv, "streamGenerateContent", body).json()
    assert isinstance(array, list) and array[-1]["candidates"][0]["finishReason"] == "STOP"


def test_count_tokens_and_auth(srv: FakeModelServer) -> None:
    body = {"contents": [{"role": "user", "parts": [{"text": "count these words"}]}]}
    assert post(srv, "countTokens", body).json()["totalTokens"] > 0
    assert post(srv, "countTokens", body, headers={}, query=f"key={KEY}").status_code == 200
    denied = post(srv, "generateContent", body, headers={"x-goog-api-key": "wrong"})
    assert denied.status_code == 401 and denied.json()["error"]["status"] == "UNAUTHENTICATED"
    assert srv.remaining == 0


@pytest.mark.parametrize(("body", "problem"), [
    ({"contents": []}, "contents: must not be empty"),
    ({"contents": [{"role": "user", "parts": [{"text": "x"}]}], "generation_config": {}},
     'Unknown name "generation_config"'),
    ({"contents": [{"role": "user", "parts": [{"text": "x"}]}], "generationConfig": {"temprature": 1}},
     'Unknown name "temprature"'),
    ({"contents": [{"role": "system", "parts": [{"text": "x"}]}]}, "contents[0].role: must be user or model"),
    ({"contents": [{"role": "user", "parts": []}]}, "contents[0].parts: must contain at least one part"),
    ({"contents": [{"role": "user", "parts": [{"text": "x", "functionCall": {"name": "f"}}]}]}, "exactly one of"),
    ({"contents": [  # the same response twice for one call (Gemini CLI 0.61.0 does this on --resume)
        {"role": "user", "parts": [{"text": "x"}]},
        {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {}}},
                                   {"functionResponse": {"name": "f", "response": {}}}]}]},
     "number of function response parts is equal to the number of function call parts"),
    ({"contents": [{"role": "user", "parts": [{"text": "x"}]},
                   {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}}}]},
                   {"role": "user", "parts": [{"text": "no answer"}]}]}, "function call turn"),
    ({"contents": [{"role": "user", "parts": [{"text": "x"}]}],
      "tools": [{"functionDeclarations": [{"name": "9bad"}]}]}, "must start with a letter or underscore"),
])
def test_gemini_checks(body: dict, problem: str) -> None:
    problems = validate_gemini(body)
    assert any(problem in p for p in problems), problems
