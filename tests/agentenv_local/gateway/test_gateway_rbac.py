"""Per-role tool access (agentenv_local.gateway.rbac): the reference gateway's lookup and mutation
semantics, verbatim replays of its observed sessions (reference inventory, Appendix A items 4-6 and
10), bad bodies, hidden-by-default tools, roles bound to bearer tokens, and persistence."""

from __future__ import annotations

import hashlib
import json
import threading
from types import SimpleNamespace

import pytest

from agentenv_local.gateway.rbac import (
    DEFAULT_ROLE,
    HIDDEN_BY_DEFAULT_META_KEY,
    RbacError,
    ToolAccess,
    ToolDisabled,
    bearer_from,
    is_hidden_by_default,
    role_from,
)

TOOLS = ["echo", "search_emails"]
BAD_ROLE = "Missing or invalid 'role' field"
BAD_TOOLS = "'tools' must be a list of strings or the string '*'"


def visible(access: ToolAccess, role: str, tools=TOOLS) -> list[str]:
    return access.filter_tools(role, tools)


def rbac_error(fn, *args, **kwargs) -> RbacError:
    with pytest.raises(RbacError) as info:
        fn(*args, **kwargs)
    return info.value


# -- defaults and lookups ---------------------------------------------------------------------------


def test_everything_is_allowed_by_default_and_no_role_has_rules():
    access = ToolAccess()
    assert access.is_allowed("alice", "echo") and access.is_allowed(DEFAULT_ROLE, "anything")
    assert access.roles_state() == {}
    assert access.role_rules("alice") == {"disabled": [], "allowed": []}


@pytest.mark.parametrize("rules, role, tool, disabled", [
    # 1. the role's rule naming the tool beats the role's "*"
    ({"alice": {"*": True, "echo": False}}, "alice", "echo", False),
    ({"alice": {"*": True, "echo": False}}, "alice", "search_emails", True),
    # 2. the role's "*" beats the "*" role's rule naming the tool
    ({"alice": {"*": False}, "*": {"echo": True}}, "alice", "echo", False),
    ({"alice": {"*": False}, "*": {"echo": True}}, "bob", "echo", True),
    # the role's named rule beats the "*" role's named rule
    ({"alice": {"echo": False}, "*": {"echo": True}}, "alice", "echo", False),
    ({"alice": {"echo": True}, "*": {"echo": False}}, "alice", "echo", True),
    # 3. the "*" role's rule naming the tool beats the "*" role's "*"
    ({"*": {"*": True, "echo": False}}, "bob", "echo", False),
    ({"*": {"*": True, "echo": False}}, "bob", "search_emails", True),
    # 4. the "*" role's "*" applies last
    ({"*": {"*": True}}, "anyone", "echo", True),
    ({"alice": {"search_emails": True}, "*": {"*": True}}, "alice", "echo", True),
    # a role's rules for other tools fall through to "*"
    ({"alice": {"search_emails": True}, "*": {"echo": True}}, "alice", "echo", True),
    # nothing applies: allowed
    ({"alice": {"echo": True}}, "bob", "echo", False),
    ({"alice": {}}, "alice", "echo", False),
])
def test_lookup_order(rules, role, tool, disabled):
    access = ToolAccess(rules)
    assert access.is_disabled(role, tool) is disabled
    assert access.is_allowed(role, tool) is not disabled


def test_hidden_by_default_tools_skip_star_tool_rules():
    access = ToolAccess(hidden_by_default=["admin_reset"])
    tools = ["echo", "admin_reset"]
    assert visible(access, "alice", tools) == ["echo"]
    assert visible(access, DEFAULT_ROLE, tools) == ["echo"]
    access.apply("enable", "*", "*")  # a "*" rule does not reveal it
    assert visible(access, "alice", tools) == ["echo"]
    access.apply("enable", "alice", "*")
    assert visible(access, "alice", tools) == ["echo"]
    access.apply("enable", "alice", ["admin_reset"])  # a rule naming it does
    assert visible(access, "alice", tools) == tools
    assert visible(access, "bob", tools) == ["echo"]
    access.apply("enable", "*", ["admin_reset"])  # ... for every role when it is the "*" role's
    assert visible(access, "bob", tools) == tools
    access.apply("disable", "carol", ["admin_reset"])  # a role's named rule still wins
    assert visible(access, "carol", tools) == ["echo"]


def test_hidden_tool_named_by_the_star_role_and_disabled_by_role_star():
    access = ToolAccess({"*": {"admin_reset": False}, "alice": {"*": True}}, hidden_by_default={"admin_reset"})
    # alice's "*" is skipped for a hidden tool, so the "*" role's named rule reveals it
    assert access.is_allowed("alice", "admin_reset")
    assert access.is_disabled("alice", "echo")


def test_set_hidden_by_default_replaces_the_set():
    access = ToolAccess(hidden_by_default=["a"])
    access.set_hidden_by_default(["b"])
    assert access.hidden_by_default == frozenset({"b"})
    assert access.is_allowed("x", "a") and access.is_disabled("x", "b")
    assert is_hidden_by_default({HIDDEN_BY_DEFAULT_META_KEY: True})
    assert not is_hidden_by_default({HIDDEN_BY_DEFAULT_META_KEY: "true"})
    assert not is_hidden_by_default(None) and not is_hidden_by_default({})


def test_filter_tools_keeps_order_and_accepts_names_dicts_and_objects():
    access = ToolAccess({"alice": {"b": True}})
    assert access.filter_tools("alice", ["c", "b", "a"]) == ["c", "a"]
    dicts = [{"name": "a", "description": ""}, {"name": "b"}]
    assert access.filter_tools("alice", dicts) == [dicts[0]]
    objects = [SimpleNamespace(name="b"), SimpleNamespace(name="z")]
    assert access.filter_tools("alice", objects) == [objects[1]]


def test_check_call_refuses_with_the_reference_message():
    access = ToolAccess({"alice": {"echo": True}})
    access.check_call("bob", "echo")
    with pytest.raises(ToolDisabled) as info:
        access.check_call("alice", "echo")
    err = info.value
    assert str(err) == err.message == "Tool 'echo' is disabled for role 'alice'"
    assert err.status == 403 and (err.role, err.tool) == ("alice", "echo")
    assert err.to_wire() == {"error": "Tool 'echo' is disabled for role 'alice'"}
    assert isinstance(err, RbacError)


# -- the reference's observed sessions, verbatim -----------------------------------------------------


def test_appendix_a_item_4_disable_echo_for_alice():
    access = ToolAccess()
    assert access.change("disable", {"role": "alice", "tools": ["echo"]}) == {
        "role": "alice", "disabled": ["echo"], "allowed": []}
    assert visible(access, "alice") == ["search_emails"]
    with pytest.raises(ToolDisabled) as info:
        access.check_call("alice", "echo")
    assert (info.value.status, info.value.to_wire()) == (403, {"error": "Tool 'echo' is disabled for role 'alice'"})
    assert visible(access, "bob") == TOOLS and visible(access, DEFAULT_ROLE) == TOOLS


def test_appendix_a_items_5_and_6_global_disable_then_enable_one_for_bob_then_reset():
    access = ToolAccess()
    access.change("disable", {"role": "alice", "tools": ["echo"]})
    assert access.change("disable", {"role": "*", "tools": "*"}) == {"role": "*", "disabled": ["*"], "allowed": []}
    assert access.roles_state() == {"*": {"disabled": ["*"], "allowed": []}}  # alice's rule is gone
    assert access.change("enable", {"role": "bob", "tools": ["search_emails"]}) == {
        "role": "bob", "disabled": [], "allowed": ["search_emails"]}
    assert visible(access, "bob") == ["search_emails"]
    assert visible(access, DEFAULT_ROLE) == []
    assert visible(access, "alice") == []
    assert access.change("enable", {"role": "*", "tools": "*"}) == {"role": "*", "disabled": [], "allowed": ["*"]}
    # item 6: what /state shows after that reset
    assert access.roles_state() == {"*": {"disabled": [], "allowed": ["*"]}}
    for role in ("alice", "bob", DEFAULT_ROLE):
        assert visible(access, role) == TOOLS


def test_appendix_a_item_10_agent_role_over_mcp():
    access = ToolAccess()
    access.change("disable", {"role": "agent", "tools": ["echo"]})
    listed = ["echo", "search_emails", "get_time"]
    assert visible(access, "agent", listed) == ["search_emails", "get_time"]
    with pytest.raises(ToolDisabled, match=r"^Tool 'echo' is disabled for role 'agent'$"):
        access.check_call("agent", "echo")
    assert visible(access, DEFAULT_ROLE, listed) == listed
    access.check_call(DEFAULT_ROLE, "echo")


# -- mutation rules --------------------------------------------------------------------------------


def test_star_role_star_tools_resets_every_rule_to_one_global_rule():
    access = ToolAccess({"alice": {"echo": True}, "bob": {"*": False}, "*": {"search_emails": True}})
    access.apply("disable", "*", "*")
    assert access.rules == {"*": {"*": True}}
    access.apply("enable", "*", "*")
    assert access.rules == {"*": {"*": False}}


def test_star_role_named_tool_is_set_on_every_existing_role_and_on_star():
    access = ToolAccess({"alice": {"*": True}, "bob": {"echo": True, "search_emails": True}})
    assert access.apply("enable", "*", ["echo"]) == {"role": "*", "disabled": [], "allowed": ["echo"]}
    assert access.rules == {"alice": {"*": True, "echo": False}, "bob": {"echo": False, "search_emails": True},
                            "*": {"echo": False}}
    assert access.is_allowed("alice", "echo")  # alice's "*" no longer hides it
    assert access.is_disabled("alice", "search_emails")
    # a role that gets rules later is not touched retroactively: the "*" role's rule serves it
    access.apply("disable", "carol", ["search_emails"])
    assert access.rules["carol"] == {"search_emails": True}
    assert access.is_allowed("carol", "echo")


def test_role_star_tools_replaces_the_roles_rules():
    access = ToolAccess({"alice": {"echo": True, "search_emails": False}, "bob": {"echo": True}})
    assert access.apply("disable", "alice", "*") == {"role": "alice", "disabled": ["*"], "allowed": []}
    assert access.rules == {"alice": {"*": True}, "bob": {"echo": True}}
    assert access.apply("enable", "alice", "*") == {"role": "alice", "disabled": [], "allowed": ["*"]}


def test_named_tools_set_one_rule_each_and_the_answer_is_sorted():
    access = ToolAccess()
    assert access.apply("disable", "alice", ["zeta", "alpha", "mid"]) == {
        "role": "alice", "disabled": ["alpha", "mid", "zeta"], "allowed": []}
    assert access.apply("enable", "alice", ["mid"]) == {
        "role": "alice", "disabled": ["alpha", "zeta"], "allowed": ["mid"]}
    assert access.roles_state() == {"alice": {"disabled": ["alpha", "zeta"], "allowed": ["mid"]}}


def test_star_inside_a_list_is_the_wildcard_too():
    access = ToolAccess({"alice": {"echo": False}})
    access.apply("disable", "alice", ["*"])
    assert access.rules == {"alice": {"*": True}}


def test_an_empty_tool_list_changes_nothing_and_answers_the_roles_rules():
    access = ToolAccess({"alice": {"echo": True}})
    assert access.apply("enable", "alice", []) == {"role": "alice", "disabled": ["echo"], "allowed": []}
    assert access.apply("enable", "bob", []) == {"role": "bob", "disabled": [], "allowed": []}
    assert access.rules == {"alice": {"echo": True}}


def test_the_default_role_is_an_ordinary_rule_key():
    access = ToolAccess()
    access.apply("disable", DEFAULT_ROLE, ["echo"])
    assert visible(access, DEFAULT_ROLE) == ["search_emails"]
    assert visible(access, "alice") == TOOLS


def test_reset_drops_every_rule():
    access = ToolAccess({"alice": {"echo": True}}, hidden_by_default=["h"])
    access.reset()
    assert access.rules == {} and access.hidden_by_default == frozenset({"h"})


def test_rules_property_is_a_copy():
    access = ToolAccess({"alice": {"echo": True}})
    access.rules["alice"]["echo"] = False
    assert access.is_disabled("alice", "echo")


# -- bad bodies ------------------------------------------------------------------------------------


@pytest.mark.parametrize("body, message", [
    ({"tools": ["echo"]}, BAD_ROLE),
    ({"role": "", "tools": ["echo"]}, BAD_ROLE),
    ({"role": None, "tools": ["echo"]}, BAD_ROLE),
    ({"role": 7, "tools": ["echo"]}, BAD_ROLE),
    ({"role": ["alice"], "tools": ["echo"]}, BAD_ROLE),
    (["alice", "echo"], BAD_ROLE),
    ("alice", BAD_ROLE),
    (None, BAD_ROLE),
    ({"role": "alice"}, BAD_TOOLS),
    ({"role": "alice", "tools": None}, BAD_TOOLS),
    ({"role": "alice", "tools": "echo"}, BAD_TOOLS),
    ({"role": "alice", "tools": ["echo", 3]}, BAD_TOOLS),
    ({"role": "alice", "tools": [["echo"]]}, BAD_TOOLS),
    ({"role": "alice", "tools": {"echo": True}}, BAD_TOOLS),
    ({"role": "alice", "tools": 5}, BAD_TOOLS),
])
def test_bad_bodies_get_400_with_the_reference_messages(body, message):
    access = ToolAccess({"alice": {"echo": False}})
    err = rbac_error(access.change, "disable", body)
    assert (err.status, err.message) == (400, message)
    assert err.to_wire() == {"error": message}
    assert access.rules == {"alice": {"echo": False}}  # nothing applied


@pytest.mark.parametrize("action", ["toggle", "Disable", "", None])
def test_unknown_action_is_refused(action):
    err = rbac_error(ToolAccess().apply, action, "alice", ["echo"])
    assert (err.status, err.message) == (400, f"action must be 'disable' or 'enable', got {action!r}")


# -- role resolution -------------------------------------------------------------------------------


@pytest.mark.parametrize("headers, meta, role", [
    ({"AgentEnv-Role": "alice"}, None, "alice"),
    ({"agentenv-role": "alice"}, None, "alice"),
    ({"AGENTENV-ROLE": "alice"}, None, "alice"),
    ({"AgentEnv-Role": "  alice "}, None, "alice"),
    ({"AgentEnv-Role": b"alice"}, None, "alice"),
    ({"AgentEnv-Role": "alice"}, {"agentenv.io/role": "bob"}, "alice"),
    ({}, {"agentenv.io/role": "bob"}, "bob"),
    ({"AgentEnv-Role": "   "}, {"agentenv.io/role": "bob"}, "bob"),
    (None, {"agentenv.io/role": " bob "}, "bob"),
    ({}, {"agentenv.io/role": 5}, DEFAULT_ROLE),
    ({}, {"agentenv.io/role": ""}, DEFAULT_ROLE),
    ({}, None, DEFAULT_ROLE),
    (None, None, DEFAULT_ROLE),
    ({"Other": "x"}, {"other": "y"}, DEFAULT_ROLE),
    ({"AgentEnv-Role": "default"}, None, DEFAULT_ROLE),
])
def test_role_from(headers, meta, role):
    assert role_from(headers, meta) == role


@pytest.mark.parametrize("headers, token", [
    ({"Authorization": "Bearer abc123"}, "abc123"),
    ({"authorization": "bearer abc123"}, "abc123"),
    ({"Authorization": "  Bearer   abc123  "}, "abc123"),
    ({"Authorization": "Basic dXNlcjpwYXNz"}, None),
    ({"Authorization": "Bearer "}, None),
    ({"Authorization": ""}, None),
    ({}, None),
    (None, None),
])
def test_bearer_from(headers, token):
    assert bearer_from(headers) == token


# -- roles bound to bearer tokens ------------------------------------------------------------------


def test_a_bound_role_needs_its_token_and_the_token_alone_selects_it():
    access = ToolAccess()
    token = access.bind_token("alice")
    assert isinstance(token, str) and len(token) == 32  # token_urlsafe(24)
    assert access.bound_roles == ["alice"]
    assert access.role_for(None, token) == "alice"
    assert access.role_for("alice", token) == "alice"
    assert access.role_for(DEFAULT_ROLE, token) == "alice"
    err = rbac_error(access.role_for, "alice", None)
    assert (err.status, err.message) == (401, "role 'alice' requires its bearer token")
    assert err.to_wire() == {"error": "role 'alice' requires its bearer token"}
    assert rbac_error(access.role_for, " alice ", None).status == 401
    err = rbac_error(access.role_for, None, "not-a-token")
    assert (err.status, err.message) == (401, "unknown bearer token")
    err = rbac_error(access.role_for, "bob", token)
    assert (err.status, err.message) == (401, "the bearer token is bound to role 'alice', not 'bob'")
    # unbound roles still work by header, and no claim at all is the default role
    assert access.role_for("bob", None) == "bob"
    assert access.role_for(None, None) == DEFAULT_ROLE
    assert access.role_for("", None) == DEFAULT_ROLE


def test_resolve_reads_the_header_meta_and_authorization():
    access = ToolAccess()
    token = access.bind_token("alice")
    assert access.resolve({"Authorization": f"Bearer {token}"}) == "alice"
    assert access.resolve({"AgentEnv-Role": "alice", "authorization": f"Bearer {token}"}) == "alice"
    assert access.resolve({"AgentEnv-Role": "bob"}) == "bob"
    assert access.resolve({}) == DEFAULT_ROLE
    assert rbac_error(access.resolve, {"AgentEnv-Role": "alice"}).status == 401
    assert rbac_error(access.resolve, {}, {"agentenv.io/role": "alice"}).status == 401  # _meta claims count too
    assert access.resolve({"Authorization": f"Bearer {token}"}, {"agentenv.io/role": "alice"}) == "alice"


def test_rebinding_replaces_the_token_and_unbinding_frees_the_role():
    access = ToolAccess()
    old = access.bind_token("alice")
    new = access.bind_token("alice")
    assert old != new
    assert access.role_for(None, new) == "alice"
    assert rbac_error(access.role_for, None, old).message == "unknown bearer token"
    assert access.unbind_token("alice") is True
    assert access.unbind_token("alice") is False
    assert access.role_for("alice", None) == "alice"


def test_a_given_token_can_be_bound_but_not_to_two_roles():
    access = ToolAccess()
    assert access.bind_token("alice", "run-1-secret-token") == "run-1-secret-token"
    err = rbac_error(access.bind_token, "bob", "run-1-secret-token")
    assert (err.status, err.message) == (409, "that token is already bound to role 'alice'")
    assert access.bind_token("alice", "run-1-secret-token") == "run-1-secret-token"  # same role: fine


@pytest.mark.parametrize("role, token, message", [
    ("*", None, "role '*' cannot be bound to a token: only a named role can"),
    ("default", None, "role 'default' cannot be bound to a token: only a named role can"),
    ("", None, "a token is bound to a role: pass a non-empty role name without surrounding blanks"),
    (" alice", None, "a token is bound to a role: pass a non-empty role name without surrounding blanks"),
    (None, None, "a token is bound to a role: pass a non-empty role name without surrounding blanks"),
    ("alice", "", "a bearer token must be a non-empty string without surrounding blanks"),
    ("alice", " t ", "a bearer token must be a non-empty string without surrounding blanks"),
    ("alice", 5, "a bearer token must be a non-empty string without surrounding blanks"),
])
def test_bad_bindings_are_refused(role, token, message):
    err = rbac_error(ToolAccess().bind_token, role, token)
    assert (err.status, err.message) == (400, message)


def test_tokens_are_random_each_time():
    access = ToolAccess()
    tokens = {access.bind_token(f"role{i}") for i in range(20)}
    assert len(tokens) == 20


# -- persistence ------------------------------------------------------------------------------------


def test_round_trip_keeps_rules_hidden_tools_and_token_bindings_but_never_a_token():
    access = ToolAccess(hidden_by_default=["admin_reset"])
    access.apply("disable", "*", "*")
    access.apply("enable", "bob", ["search_emails", "admin_reset"])
    token = access.bind_token("bob")
    data = access.to_dict()
    text = json.dumps(data)
    assert token not in text
    assert data["token_digests"] == {"bob": "sha256:" + hashlib.sha256(token.encode()).hexdigest()}
    assert data["hidden_by_default"] == ["admin_reset"]

    restored = ToolAccess.from_dict(json.loads(text))
    assert restored.rules == access.rules
    assert restored.roles_state() == access.roles_state()
    assert restored.hidden_by_default == frozenset({"admin_reset"})
    assert restored.resolve({"Authorization": f"Bearer {token}"}) == "bob"
    assert rbac_error(restored.resolve, {"AgentEnv-Role": "bob"}).status == 401
    assert visible(restored, "bob", ["echo", "search_emails", "admin_reset"]) == ["search_emails", "admin_reset"]
    assert visible(restored, DEFAULT_ROLE) == []
    assert restored.to_dict() == data


def test_a_fresh_instance_round_trips():
    data = ToolAccess().to_dict()
    assert data == {"version": 1, "rules": {}, "hidden_by_default": [], "token_digests": {}}
    assert ToolAccess.from_dict(data).roles_state() == {}


@pytest.mark.parametrize("data", [
    {"version": 2, "rules": {}},
    {"rules": {}},
    {"version": 1, "rules": []},
    {"version": 1, "rules": {"alice": {"echo": "yes"}}},
    {"version": 1, "rules": {"alice": ["echo"]}},
    {"version": 1, "hidden_by_default": "echo"},
    {"version": 1, "token_digests": {"alice": "plaintext-token"}},
    {"version": 1, "token_digests": ["alice"]},
    [],
])
def test_corrupt_stored_state_is_refused(data):
    err = rbac_error(ToolAccess.from_dict, data)
    assert err.status == 500
    assert err.message.startswith("can't restore tool access from its stored state: ")


# -- concurrency -----------------------------------------------------------------------------------


def test_concurrent_mutations_and_reads_do_not_break():
    access = ToolAccess()
    errors: list[Exception] = []

    def mutate(i: int):
        try:
            for j in range(200):
                access.apply("disable" if j % 2 else "enable", f"role{i}", [f"tool{j % 7}"])
                access.apply("enable", "*", [f"tool{j % 5}"])
        except Exception as exc:  # reported below
            errors.append(exc)

    def read():
        try:
            for _ in range(400):
                access.roles_state()
                access.filter_tools("role1", [f"tool{k}" for k in range(7)])
        except Exception as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=mutate, args=(i,)) for i in range(4)] + [
        threading.Thread(target=read) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert set(access.roles_state()) == {"role0", "role1", "role2", "role3", "*"}
