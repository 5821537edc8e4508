"""Authoring an env: decorators checked at class creation, schemas from type hints, the card's exact shape."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import textwrap
from typing import Annotated, Literal

import pytest
from kits.env_sdk import ECHO, ECHO_CARD, ROOT
from pydantic import Field

from agentenv_local.env import (
    EMPTY,
    Env,
    EnvError,
    ToolContext,
    add_data,
    bound,
    environment_card,
    extension,
    extension_slug,
    get_data,
    load_env,
    normalize_role,
    parse_virtual_time,
    reset_data,
    tool,
)


def test_bare_tool_decorator_is_refused_with_the_fix():
    with pytest.raises(TypeError, match=r"@tool must be called: write @tool\(\) above echo"):
        class Bad(Env):
            @tool
            def echo(self, text: str) -> str:
                return text


def test_duplicate_tool_names_fail_at_class_creation():
    with pytest.raises(ValueError, match=r"two tools are named 'echo' \(methods 'echo' and 'echo2'\)"):
        class Bad(Env):
            @tool()
            def echo(self, text: str) -> str:
                return text

            @tool(name="echo")
            def echo2(self, text: str) -> str:
                return text


def test_unknown_placeholder_in_a_tool_name_is_refused():
    with pytest.raises(ValueError, match="unknown placeholder"):
        class Bad(Env):
            @tool(name="{env}_search")
            def search(self) -> str:
                return ""


def test_environment_name_placeholder_resolves_to_the_card_name(monkeypatch):
    @environment_card(name="crm")
    class Crm(Env):
        @tool(name="{environment_name}_search")
        def search(self, q: str) -> list:
            return []

    assert [t["name"] for t in Crm().list_tools()] == ["crm_search"]
    monkeypatch.setenv("ENVIRONMENT_NAME", "crm2")
    env = Crm()
    assert env.card().name == "crm2"
    assert [t["name"] for t in env.list_tools()] == ["crm2_search"]


def test_a_clash_that_only_appears_once_the_name_resolves_fails_at_mount():
    @environment_card(name="a")
    class Clash(Env):
        @tool(name="{environment_name}_x")
        def one(self) -> str:
            return ""

        @tool(name="a_x")
        def two(self) -> str:
            return ""

    with pytest.raises(ValueError, match="two tools are named 'a_x' once"):
        Clash().card()


def test_card_name_falls_back_to_class_attribute_then_class_name():
    class Named(Env):
        environment_name = "named"
        environment_description = "From class attributes."

    class Plain(Env):
        pass

    assert Named().card().to_wire()["description"] == "From class attributes."
    assert Named().card().name == "named"
    assert Plain().card().name == "Plain"
    assert "description" not in Plain().card().to_wire()


def test_input_schema_from_type_hints_with_field_descriptions_and_no_context_param():
    class Shop(Env):
        @tool()
        def order(self, ctx: ToolContext,
                  item: Annotated[str, Field(description="What to buy")],
                  quantity: Annotated[int, Field(description="How many", ge=1)] = 1,
                  mode: Literal["fast", "cheap"] = "cheap",
                  note: str | None = None,
                  when: dt.date | None = None) -> dict:
            """Place an order."""
            return {}

    (entry,) = Shop().list_tools()
    assert entry["name"] == "order"
    assert entry["description"] == "Place an order."
    schema = entry["inputSchema"]
    assert schema["type"] == "object"
    assert schema["required"] == ["item"]
    props = schema["properties"]
    assert list(props) == ["item", "quantity", "mode", "note", "when"]   # ctx is injected, never advertised
    assert props["item"] == {"description": "What to buy", "title": "Item", "type": "string"}
    assert props["quantity"]["description"] == "How many" and props["quantity"]["minimum"] == 1
    assert props["quantity"]["default"] == 1
    assert props["mode"]["enum"] == ["fast", "cheap"]
    assert "_meta" not in entry and "annotations" not in entry


def test_description_argument_wins_over_the_docstring_and_names_default_to_the_method():
    class E(Env):
        @tool(description="Explicit.")
        def a(self) -> str:
            """Docstring."""
            return ""

        @tool()
        def b(self) -> str:
            return ""

    a, b = E().list_tools()
    assert a["description"] == "Explicit."
    assert b["name"] == "b" and "description" not in b


def test_hidden_by_default_annotations_and_meta_are_listed():
    class E(Env):
        @tool(hidden_by_default=True, annotations={"readOnlyHint": True}, meta={"x": 1})
        def plumbing(self) -> int:
            return 1

    (entry,) = E().list_tools()
    assert entry["_meta"] == {"x": 1, "agentenv.io/hiddenByDefault": True}
    assert entry["annotations"] == {"readOnlyHint": True}


def test_parameters_that_cannot_be_bound_by_name_are_refused():
    with pytest.raises(TypeError, match=r"\*rest cannot be filled"):
        class A(Env):
            @tool()
            def f(self, *rest: str) -> str:
                return ""

    with pytest.raises(TypeError, match="more than one ToolContext"):
        class B(Env):
            @tool()
            def f(self, a: ToolContext, b: ToolContext) -> str:
                return ""


def test_parameter_names_that_clash_with_pydantic_keep_their_wire_name():
    class E(Env):
        @tool()
        def f(self, json: str, schema: int = 0) -> dict:
            return {"json": json, "schema": schema}

    props = E().list_tools()[0]["inputSchema"]["properties"]
    assert set(props) == {"json", "schema"}


def test_data_plane_and_extension_declarations_are_checked():
    with pytest.raises(ValueError, match=r"two methods handle data/reset \('a' and 'b'\)"):
        class A(Env):
            @reset_data
            def a(self):
                pass

            @reset_data()
            def b(self):
                pass

    with pytest.raises(TypeError, match=r"handles data/add and must take \(self, parts\)"):
        class B(Env):
            @add_data
            def load(self):
                pass

    with pytest.raises(TypeError, match="more than one of"):
        class C(Env):
            @tool()
            @get_data
            def both(self):
                return []

    with pytest.raises(ValueError, match="several handlers for extension"):
        class D(Env):
            @extension("urn:x:y/v1")
            def one(self):
                return {}

            @extension("urn:x:y/v1")
            def two(self):
                return {}

    with pytest.raises(TypeError, match="extension_params"):
        extension("urn:x:y/v1", op="a", params={"k": 1})


def test_on_tool_call_must_take_the_context():
    with pytest.raises(TypeError, match=r"on_tool_call must take \(self, ctx\)"):
        class A(Env):
            def on_tool_call(self):
                return None


def test_environment_card_decorator_is_checked():
    with pytest.raises(TypeError, match="unknown Environment Card field"):
        environment_card(nmae="x")
    with pytest.raises(TypeError, match="must be called"):
        @environment_card
        class A(Env):
            pass


def test_extension_slugs_follow_the_reference():
    assert extension_slug("urn:agentenv:computer-display/v1") == "computer-display"
    assert extension_slug("urn:agentenv:clock/v1") == "clock"
    assert extension_slug("urn:acme:faults/v2") == "acme/faults"
    assert extension_slug("urn:agentenv:thing") == "thing"


def test_extension_advertisement_single_and_op_forms():
    class E(Env):
        @extension("urn:agentenv:config/v1", description="Configure.")
        def configure(self, level: int, name: str = "x") -> dict:
            return {}

        @extension("urn:agentenv:stats/v1", op="count", method="GET")
        def count(self, tag: str | None = None) -> dict:
            return {}

        @extension("urn:agentenv:stats/v1", op="reset", description="Stats.", required=True)
        def reset_stats(self) -> dict:
            return {}

        def extension_params(self, uri):
            return {"features": ["a"]}

        def declared_extensions(self):
            return [{"uri": "urn:agentenv:intake/v1", "params": {"add": []}}]

    exts = E().card().to_wire()["capabilities"]["extensions"]
    config, stats, intake = exts
    assert config["uri"] == "urn:agentenv:config/v1" and config["description"] == "Configure."
    assert config["required"] is False
    assert config["params"]["endpoint"] == "/agentenv/ext/configure"
    method = config["params"]["methods"]["configure"]
    assert method["method"] == "POST" and method["request"]["required"] == ["level"]
    assert stats["params"]["features"] == ["a"] and "endpoint" not in stats["params"]
    assert stats["params"]["methods"]["count"]["endpoint"] == "/agentenv/ext/stats/count"
    assert stats["params"]["methods"]["count"]["method"] == "GET"
    assert stats["params"]["methods"]["reset"]["endpoint"] == "/agentenv/ext/stats/reset"
    assert stats["description"] == "Stats." and stats["required"] is True
    assert intake == {"uri": "urn:agentenv:intake/v1", "description": None, "params": {"add": []}, "required": None}


def test_echo_card_has_the_reference_shape(echo_env):
    card = echo_env.card().to_wire()
    assert card == ECHO_CARD
    assert list(card) == ["name", "description", "protocolVersion", "url", "preferredTransport",
                          "additionalInterfaces", "capabilities", "children_environments"]
    assert list(card["capabilities"]) == ["extensions", "tools", "operations"]


def test_a_bare_env_card_matches_the_reference_observation():
    @environment_card(name="echo")
    class Bare(Env):
        @tool()
        def echo(self, text: str) -> str:
            """Return the text it's sent."""
            return text

    card = Bare().card().to_wire()
    assert {k: v for k, v in card.items() if k != "capabilities"} == {
        "name": "echo", "protocolVersion": "1.0", "url": "/agentenv", "preferredTransport": "JSONRPC",
        "additionalInterfaces": [{"url": "/mcp", "transport": "mcp"}], "children_environments": None}
    caps = card["capabilities"]
    assert caps["extensions"] is None and caps["operations"] == []
    assert caps["tools"][0]["name"] == "echo" and caps["tools"][0]["inputSchema"]["required"] == ["text"]


def test_tool_context_helpers():
    assert ToolContext.current() is EMPTY
    ctx = ToolContext.as_caller("alice", "s1", virtual_time="2025-03-10T09:00:00Z")
    with bound(ctx):
        assert ToolContext.current() is ctx
        assert ToolContext.current().caller.role == "alice"
        assert ctx.now() == dt.datetime(2025, 3, 10, 9, tzinfo=dt.UTC)
    assert ToolContext.current() is EMPTY
    assert ToolContext.as_caller("default").caller.role is None
    assert normalize_role("  ") is None and normalize_role(" bob ") == "bob"
    assert parse_virtual_time("2025-03-10T09:00:00.5+02:00").utcoffset() == dt.timedelta(hours=2)
    assert parse_virtual_time("yesterday") is None and parse_virtual_time(None) is None
    assert abs(EMPTY.now() - dt.datetime.now(dt.UTC)) < dt.timedelta(seconds=5)


def test_caller_rules_follow_the_reference():
    meta_ctx = ToolContext.from_request("t", {}, meta={"agentenv.io/role": "default"},
                                        headers={"AgentEnv-Role": "alice", "mcp-session-id": "h"}, transport="mcp")
    assert meta_ctx.caller.role is None and meta_ctx.caller.session is None   # proxied: headers not consulted
    header_ctx = ToolContext.from_request("t", {}, meta={}, headers={"agentenv-role": "alice",
                                                                      "mcp-session-id": "h"}, transport="mcp")
    assert header_ctx.caller.role == "alice" and header_ctx.caller.session == "h"


def test_env_error_fields_and_checks():
    e = EnvError("not_found", "no such note", retryable=True, applied="unknown", hint="list first", status=404)
    assert e.fields() == {"code": "not_found", "message": "no such note", "retryable": True, "applied": "unknown",
                          "hint": "list first"}
    assert e.body() == {"ok": False, "error": e.fields()}
    assert "hint" not in EnvError("x", "y").fields()
    with pytest.raises(ValueError):
        EnvError("x", "y", applied="maybe")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        EnvError("x", "y", status=200)


def test_importing_the_sdk_does_not_import_mcp_starlette_or_uvicorn():
    code = ("import sys, agentenv_local.env; "
            "print(sorted(m for m in ('mcp', 'starlette', 'uvicorn', 'httpx2') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_load_env_targets(tmp_path):
    assert type(load_env(ECHO)).__name__ == "Echo"
    assert type(load_env(f"{ECHO}:Echo")).__name__ == "Echo"
    two = tmp_path / "two.py"
    two.write_text(textwrap.dedent("""
        from agentenv_local.env import Env
        class A(Env): pass
        class B(Env): pass
    """))
    from agentenv_local.env.serve import EnvLoadError

    with pytest.raises(EnvLoadError, match=r"several envs \(A, B\); pick one with .*:NAME"):
        load_env(two)
    assert type(load_env(f"{two}:B")).__name__ == "B"
    with pytest.raises(EnvLoadError, match="has no 'C'"):
        load_env(f"{two}:C")
    with pytest.raises(EnvLoadError, match="no such file"):
        load_env(tmp_path / "missing.py")


def test_cli_prints_the_card(tmp_path):
    out = subprocess.run([sys.executable, "-m", "agentenv_local.env", str(ECHO), "--card", "--name", "echo2"],
                         capture_output=True, text=True, check=True, cwd=ROOT)
    card = json.loads(out.stdout)
    assert card["name"] == "echo2" and card["capabilities"]["operations"] == ["data/reset", "data/add", "data/get"]
    bad = subprocess.run([sys.executable, "-m", "agentenv_local.env", str(tmp_path / "nope.py")],
                         capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 2 and "no such file" in bad.stderr
