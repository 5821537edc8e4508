"""Registration: the canonical form, idempotency, config rules, and every 400 the engine gives."""

from __future__ import annotations

import pytest
from test_gateway_triggers_fakes import make_engine, mirror

from agentenv_local.gateway.triggers import TriggerError

EXECUTOR = {"a2a_url": "http://127.0.0.1:9/agent/", "role": "helper"}


def refused(body, **engine_options) -> str:
    engine, _, _ = make_engine(**engine_options)
    with pytest.raises(TriggerError) as info:
        engine.register(body)
    assert info.value.status == 400
    return info.value.message


def one(spec: dict, **body) -> str:
    return refused({"triggers": [spec], **body})


def test_register_answers_added_and_all_and_is_idempotent():
    engine, _, _ = make_engine()
    assert engine.register({"triggers": [mirror("a")]}) == {"ok": True, "added": ["a"], "all": ["a"]}
    assert engine.register({"triggers": [mirror("a"), mirror("b")]}) == {"ok": True, "added": ["a", "b"],
                                                                          "all": ["a", "b"]}
    assert [e["kind"] for e in engine.state()["events"]] == ["added", "added"]  # the re-add was a no-op


def test_same_id_with_a_different_spec_is_refused():
    engine, _, _ = make_engine()
    engine.register({"triggers": [mirror("a")]})
    with pytest.raises(TriggerError) as info:
        engine.register({"triggers": [mirror("a", repeat=True)]})
    assert info.value.message == ("trigger 'a': already registered with a different spec — remove it first or use "
                                  "a new id")


def test_a_single_step_check_is_the_same_spec_as_its_steps_form():
    engine, _, _ = make_engine()
    single = {"id": "s", "when": {"type": "state", "check": {"tool": "count", "args": {},
                                                              "predicate": {"equals": 3}}},
              "actions": [{"type": "permission", "action": "disable", "role": "agent", "tools": "*"}]}
    steps = {**single, "when": {"type": "state", "check": {"steps": [{"tool": "count", "args": {},
                                                                      "predicate": {"equals": 3}}]}}}
    engine.register({"triggers": [single]})
    assert engine.register({"triggers": [steps]})["all"] == ["s"]


def test_missing_id_gets_a_generated_one_deterministic_per_seed():
    spec = {k: v for k, v in mirror().items() if k != "id"}
    first, _, _ = make_engine(seed=7)
    second, _, _ = make_engine(seed=7)
    ids = first.register({"triggers": [spec, spec]})["added"]
    assert ids == second.register({"triggers": [spec, spec]})["added"]
    assert len(set(ids)) == 2
    assert all(i.startswith("trg_") and len(i) == 16 and int(i[4:], 16) >= 0 for i in ids)


def test_a_refused_batch_adds_nothing():
    engine, _, _ = make_engine()
    with pytest.raises(TriggerError):
        engine.register({"watch_roles": ["agent"], "triggers": [mirror("good"), {"id": "bad", "when": {}}]})
    state = engine.state()
    assert state["triggers"] == []
    assert state["config"]["watch_roles"] == []  # the config did not land either


def test_watch_roles_are_fixed_once_set_until_clear():
    engine, _, _ = make_engine()
    engine.register({"watch_roles": ["agent"], "triggers": []})
    engine.register({"triggers": []})  # omitted: keeps them
    engine.register({"watch_roles": ["agent"], "triggers": []})  # same: fine
    with pytest.raises(TriggerError) as info:
        engine.register({"watch_roles": ["bob"], "triggers": []})
    assert info.value.message == ("watch_roles ['bob'] conflicts with the already-registered ['agent'] — clear to "
                                  "change it")
    engine.clear()
    engine.register({"watch_roles": ["bob"], "triggers": []})
    assert engine.state()["config"]["watch_roles"] == ["bob"]


def test_default_watch_roles_and_config_shape():
    engine, _, _ = make_engine()
    engine.register({"executor": EXECUTOR, "executors": {"ops": {**EXECUTOR, "role": "ops"}}, "triggers": []})
    assert engine.state()["config"] == {"watch_roles": ["default"], "executor_configured": True,
                                        "executors": ["ops"]}


def test_executors_are_set_once():
    engine, _, _ = make_engine()
    engine.register({"executor": EXECUTOR, "executors": {"ops": {**EXECUTOR, "role": "ops"}}, "triggers": []})
    engine.register({"executor": dict(EXECUTOR), "triggers": []})  # the same one again: fine
    with pytest.raises(TriggerError) as info:
        engine.register({"executor": {**EXECUTOR, "role": "other"}, "triggers": []})
    assert info.value.message == "executor conflicts with the already-registered executor — clear to change it"
    with pytest.raises(TriggerError) as info:
        engine.register({"executors": {"ops": {**EXECUTOR, "role": "ops2"}}, "triggers": []})
    assert info.value.message == ("executor 'ops' conflicts with the already-registered executor of that name — "
                                  "clear to change it")


def test_unknown_tools_are_refused_once_known():
    message = refused({"triggers": [mirror()]}, known_tools=lambda: {"search_emails"})
    assert message == "trigger 'mirror': actions[0].tool names unknown tool 'echo'"
    engine, _, _ = make_engine(known_tools=lambda: None)  # before discovery: not checked
    engine.register({"triggers": [mirror()]})


def test_website_triggers_are_validated_then_refused_as_unsupported():
    spec = {"id": "w", "when": {"type": "website", "app": "shop", "method": "post"},
            "actions": [{"type": "permission", "action": "disable", "role": "agent", "tools": "*"}]}
    assert one(spec) == ("trigger 'w': website triggers need website envs, which this version does not deploy")
    bad = {**spec, "when": {"type": "website", "app": ""}}
    assert one(bad) == "trigger 'w': when.app must be a non-empty string naming one of the env's websites"
    bad = {**spec, "when": {"type": "website", "app": "shop", "where": {"result.x": {"exists": True}}}}
    assert one(bad) == "trigger 'w': where.result.x reads a result; a website request carries args, not a result"


TOOL = {"type": "tool", "tool": "echo", "args": {}}
PERM = {"type": "permission", "action": "disable", "role": "agent", "tools": ["echo"]}
ACTION_WHEN = {"type": "action", "tool": "search_emails"}


def spec(when=None, actions=None, **extra):
    return {"id": "t", "when": when or ACTION_WHEN, "actions": actions if actions is not None else [TOOL], **extra}


BAD_SPECS = [
    # body and ids
    ("not a dict", None, "body must be a JSON object"),
    ({"triggers": {}}, None, "triggers must be a list"),
    ({"triggers": ["x"]}, None, "every trigger needs a non-empty string id"),
    ({"triggers": [{"id": "", "when": ACTION_WHEN, "actions": []}]}, None, "every trigger needs a non-empty string id"),
    ({"triggers": [spec(), spec()]}, None, "trigger 't': duplicate id"),
    ({"watch_roles": "agent", "triggers": []}, None, "watch_roles must be a list of non-empty strings"),
    ({"executors": [], "triggers": []}, None, "executors must be an object keyed by non-empty executor names"),
    ({"executor": {"role": "x"}, "triggers": []}, None, "executor.a2a_url must be a non-empty string"),
    ({"executors": {"ops": {"a2a_url": "http://x"}}, "triggers": []}, None,
     ("executors['ops'].role must be a non-empty string (the deployed executor's AgentEnv-Role, kept out of "
     "watch_roles so its own tool calls never fire triggers)")),
    ({"executor": {"a2a_url": "http://x", "role": "default"}, "triggers": []}, None,
     ("executor.role 'default' must not be in watch_roles ['default'] — the executor's own tool calls would fire "
     "triggers (cascade)")),
    ({"executor": {**EXECUTOR, "hours": {"start": "9:00", "end": "17:00"}}, "triggers": []}, None,
     "executor.hours.start must be a 24-hour 'HH:MM'"),
    ({"executor": {**EXECUTOR, "hours": {"start": "09:00", "end": "09:00"}}, "triggers": []}, None,
     "executor.hours: start equals end, so the executor would never be available"),
    ({"executor": {**EXECUTOR, "hours": {"start": "09:00", "end": "17:00", "time_zone": "Mars/Base"}},
      "triggers": []}, None,
     "executor.hours.time_zone must be an IANA time zone name such as 'America/New_York', got 'Mars/Base'"),
    ({"executor": {**EXECUTOR, "hours": {"start": "09:00", "end": "17:00", "time_zone": "UTC",
                                         "utc_offset": "+01:00"}}, "triggers": []}, None,
     "executor.hours take utc_offset or time_zone, not both"),
    ({"executor": {**EXECUTOR, "hours": {"start": "09:00", "end": "17:00", "utc_offset": "7"}}, "triggers": []},
     None, "executor.hours.utc_offset must look like '-07:00' or '+05:30'"),
    ({"executor": {**EXECUTOR, "hours": {"start": "09:00", "end": "17:00", "days": ["monday"]}}, "triggers": []},
     None, "executor.hours.days must be a non-empty list of ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun']"),
    # when
    (None, spec(when={"type": "cron"}), "trigger 't': when.type must be 'action', 'state', 'time', or 'website'"),
    (None, spec(when={"type": "action", "tool": ""}), "trigger 't': when.tool must be a non-empty string"),
    (None, spec(when={**ACTION_WHEN, "roles": []}),
     "trigger 't': when.roles must be a non-empty list of non-empty AgentEnv-Roles"),
    (None, spec(when={"type": "time", "at": "PT1H", "roles": ["a"]}),
     "trigger 't': when.roles is only valid on action and state triggers, and website triggers"),
    (None, spec(when={**ACTION_WHEN, "unless": {"tool": "x"}}),
     "trigger 't': when.unless is only valid on time triggers"),
    (None, spec(when={**ACTION_WHEN, "repeat": "yes"}), "trigger 't': when.repeat must be a boolean"),
    (None, spec(when={**ACTION_WHEN, "where": []}), "trigger 't': when.where must be an object"),
    (None, spec(when={**ACTION_WHEN, "where": {"args.q": {"regex": "a", "equals": "b"}}}),
     "trigger 't': where.args.q: predicate must have exactly one of ('regex', 'equals', 'exists')"),
    (None, spec(when={**ACTION_WHEN, "where": {"args.q": {}}}),
     "trigger 't': where.args.q: predicate must have exactly one of ('regex', 'equals', 'exists')"),
    (None, spec(when={**ACTION_WHEN, "where": {"args.q": {"regex": "("}}}),
     "trigger 't': where.args.q: invalid regex: missing ), unterminated subpattern at position 0"),
    (None, spec(when={**ACTION_WHEN, "where": {"args.q": {"exists": "yes"}}}),
     "trigger 't': where.args.q: exists must be a boolean"),
    (None, spec(when={**ACTION_WHEN, "where": {"result.items[x].id": {"exists": True}}}),
     "trigger 't': where.result.items[x].id: invalid path segment 'items[x]' in 'items[x].id'"),
    (None, spec(when={"type": "state", "check": {"tool": "count"}, "repeat": True}),
     "trigger 't': when.repeat is only valid on action triggers and website triggers"),
    (None, spec(when={"type": "state", "check": "count"}), "trigger 't': when.check: check must be an object"),
    (None, spec(when={"type": "state", "check": {"steps": []}}),
     "trigger 't': when.check: check needs 'steps' or a single-step tool/predicate form"),
    (None, spec(when={"type": "state", "check": {"steps": [{"tool": ""}]}}),
     "trigger 't': when.check.steps[0]: tool must be a non-empty string"),
    (None, spec(when={"type": "state", "check": {"steps": [{"tool": "c", "args": []}]}}),
     "trigger 't': when.check.steps[0]: args must be an object"),
    (None, spec(when={"type": "state", "check": {"tool": "c",
                                                  "extract": {"take": "x"}, "predicate": {"exists": True}}}),
     "trigger 't': when.check.steps[0]: extract must be a dot-path string or {path, match, take}"),
    (None, spec(when={"type": "state", "check": {"tool": "c", "extract": {"path": "items", "match": {"s": {}}},
                                                  "predicate": {"exists": True}}}),
     ("trigger 't': when.check.steps[0].extract.match.s: predicate must have exactly one of "
     "('regex', 'equals', 'exists')")),
    (None, spec(when={"type": "state", "check": {"tool": "c"}}),
     "trigger 't': when.check: the last check step must carry a predicate"),
    (None, spec(when={"type": "state", "check": {"tool": "c",
                                                  "args": {"q": "${args.q}"}, "predicate": {"exists": True}}}),
     ("trigger 't': when.check.steps[0].args: ${args.q} needs a provoking tool call; only action triggers carry "
     "args/result (website triggers carry args)")),
    # time
    (None, spec(when={"type": "time"}),
     "trigger 't': when.type=='time' needs at least one of 'at', 'after', or 'every'"),
    (None, spec(when={"type": "time", "at": "PT1H", "after": "x", "offset": "PT1H"}),
     "trigger 't': when may have at most one of 'at' / 'after'"),
    (None, spec(when={"type": "time", "every": "PT1H", "unless": {"tool": "x"}}),
     "trigger 't': when.unless is only valid on a one-shot time trigger ('at' or 'after')"),
    (None, spec(when={"type": "time", "at": "PT1H", "unless": {"tool": ""}}),
     "trigger 't': when.unless must be an object with a non-empty 'tool'"),
    (None, spec(when={"type": "time", "at": "PT1H", "unless": {"tool": "x", "roles": []}}),
     "trigger 't': when.unless.roles must be a non-empty list of non-empty AgentEnv-Roles"),
    (None, spec(when={"type": "time", "at": "PT1H",
                      "unless": {"tool": "x", "where": {"q": {"equals": 1, "exists": True}}}}),
     "trigger 't': unless.where.q: predicate must have exactly one of ('regex', 'equals', 'exists')"),
    (None, spec(when={"type": "time", "after": "x"}), "trigger 't': when.after requires a non-empty 'offset' duration"),
    (None, spec(when={"type": "time", "after": "", "offset": "PT1H"}),
     "trigger 't': when.after must be a non-empty trigger id"),
    (None, spec(when={"type": "time", "after": "x", "offset": "1h"}),
     "trigger 't': offset: invalid ISO-8601 duration '1h': unit letters must be upper case (P, W, D, T, H, M, S)"),
    (None, spec(when={"type": "time", "at": "PT1H", "offset": "PT1H"}),
     "trigger 't': 'offset' is only valid with 'after'"),
    (None, spec(when={"type": "time", "at": "2025-03-10"}),
     "trigger 't': at: invalid RFC3339 virtual_time '2025-03-10': expected YYYY-MM-DDThh:mm:ss[.fff](Z|+hh:mm)"),
    (None, spec(when={"type": "time", "at": "P1M"}),
     ("trigger 't': at: invalid ISO-8601 duration 'P1M': years and months are not supported (they are not a fixed "
     "span); use weeks or days")),
    (None, spec(when={"type": "time", "every": "PT0S"}), "trigger 't': every must be a positive duration"),
    (None, spec(when={"type": "time", "every": 60}), "trigger 't': every must be a duration string or {dist, mean}"),
    (None, spec(when={"type": "time", "every": {"dist": "normal", "mean": "PT1H"}, "seed": 1}),
     "trigger 't': every.dist must be 'exp'"),
    (None, spec(when={"type": "time", "every": {"dist": "exp", "mean": 5}, "seed": 1}),
     "trigger 't': every.mean must be a positive ISO-8601 duration"),
    (None, spec(when={"type": "time", "every": {"dist": "exp", "mean": "PT1H"}}),
     "trigger 't': a stochastic 'every' requires an integer 'seed'"),
    (None, spec(when={"type": "time", "every": "PT1H", "seed": 3}),
     "trigger 't': 'seed' is only valid with a stochastic 'every'"),
    (None, spec(when={"type": "time", "at": "PT1H", "count": 3}), "trigger 't': 'count' requires a recurring 'every'"),
    (None, spec(when={"type": "time", "at": "PT1H", "until": "PT3H"}),
     "trigger 't': 'until' requires a recurring 'every'"),
    (None, spec(when={"type": "time", "every": "PT1H", "count": 0}), "trigger 't': count must be a positive integer"),
    (None, spec(when={"type": "time", "every": "PT1H", "until": "tomorrow"}),
     "trigger 't': until: invalid RFC3339 virtual_time 'tomorrow': expected YYYY-MM-DDThh:mm:ss[.fff](Z|+hh:mm)"),
    (None, spec(when={"type": "time", "at": "PT1H", "repeat": True}),
     ("trigger 't': when.repeat is only valid on action triggers and website triggers "
      "(time triggers recur via 'every')")),
    # barrier
    (None, spec(barrier="yes"), "trigger 't': barrier must be an object, e.g. {\"at\": \"provoking_call\"}"),
    (None, spec(barrier={"at": "provoking_call", "wait": 1}),
     "trigger 't': barrier has unknown key(s) ['wait']; expected ['at', 'timeout_seconds']"),
    (None, spec(barrier={"at": "end"}), "trigger 't': barrier.at must be one of ['provoking_call'] (got 'end')"),
    (None, spec(when={"type": "time", "at": "PT1H"}, barrier={"at": "provoking_call"}),
     ("trigger 't': barrier.at 'provoking_call' is only valid on action triggers and website triggers — they alone "
     "have a provoking call to hold")),
    (None, spec(barrier={"at": "provoking_call", "timeout_seconds": 0}),
     "trigger 't': barrier.timeout_seconds must be a positive, finite number (got 0)"),
    (None, spec(barrier={"at": "provoking_call"}, actions=[{**TOOL, "delay": "PT1M"}]),
     ("trigger 't': a delayed action, or an nl action whose executor keeps working hours, can't run under a "
     "barrier, which holds the provoking call until the actions finish")),
    # actions
    (None, spec(actions={}), "trigger 't': actions must be a list"),
    (None, spec(actions=[{"type": "email"}]),
     "trigger 't': actions[0]: type must be one of ('nl', 'tool', 'permission')"),
    (None, spec(actions=[{**PERM, "as": "bob"}]), "trigger 't': actions[0]: 'as' is only valid on tool actions"),
    (None, spec(actions=[{**TOOL, "executor": "ops"}]),
     "trigger 't': actions[0]: 'executor' is only valid on nl actions"),
    (None, spec(actions=[{**TOOL, "delay": "2H"}]),
     ("trigger 't': actions[0]: delay: invalid ISO-8601 duration '2H': a duration starts with 'P'; expected e.g. "
     "'PT24H', 'P1DT6H', 'PT30M'")),
    (None, spec(actions=[{**TOOL, "delay": {"dist": "exp", "mean": "PT1H"}}]),
     "trigger 't': actions[0]: a stochastic delay requires an integer 'seed'"),
    (None, spec(actions=[{**TOOL, "delay": {"dist": "uniform"}}]),
     "trigger 't': actions[0]: delay must be an ISO-8601 duration or {dist: 'exp', mean, seed}"),
    (None, spec(actions=[{"type": "nl", "instruction": "file the report"}]),
     "trigger 't': actions[0]: nl actions require an executor"),
    (None, spec(actions=[{"type": "nl", "instruction": ""}]),
     "trigger 't': actions[0]: instruction must be a non-empty string"),
    (None, spec(actions=[{"type": "nl", "instruction": "reply to ${args.sender}"}]),
     ("trigger 't': actions[0]: instruction contains '${args.sender}', but nl instructions are not templated; read the "
     "provoking call from a tool action's args")),
    (None, spec(actions=[{"type": "tool", "tool": ""}]), "trigger 't': actions[0]: tool must be a non-empty string"),
    (None, spec(actions=[{"type": "tool", "tool": "echo", "args": "hi"}]),
     "trigger 't': actions[0]: args must be an object"),
    (None, spec(actions=[{**TOOL, "args": {"text": "${args.q"}}]),
     ("trigger 't': actions[0].args: '${args.q' is not a placeholder the engine can resolve; expected ${args.<path>}, "
     "${result.<path>} or ${<check binding>}")),
    (None, spec(actions=[{**TOOL, "args": {"text": "${result.}"}}]),
     "trigger 't': actions[0].args: placeholder ${result.} has an empty path"),
    (None, spec(actions=[{**TOOL, "args": {"text": "${a.b}"}}]),
     "trigger 't': actions[0].args: placeholder ${a.b} must be a check binding name or an args./result. path"),
    (None, spec(actions=[{**TOOL, "as": "default"}]),
     "trigger 't': actions[0]: 'as' must be a non-empty AgentEnv-Role other than 'default'"),
    (None, spec(actions=[{**TOOL, "as": "${args.role}"}]),
     "trigger 't': actions[0]: 'as' is not templated; name the role literally"),
    (None, spec(actions=[{**PERM, "action": "toggle"}]),
     "trigger 't': actions[0]: action must be 'enable' or 'disable'"),
    (None, spec(actions=[{**PERM, "role": ""}]), "trigger 't': actions[0]: role must be a non-empty string"),
    (None, spec(actions=[{**PERM, "tools": "echo"}]),
     "trigger 't': actions[0]: tools must be a list of strings or '*'"),
    (None, spec(actions=[{**TOOL, "verify": {"tool": "c"}}]),
     "trigger 't': actions[0].verify: the last check step must carry a predicate"),
]


@pytest.mark.parametrize("body, single, message", BAD_SPECS,
                         ids=[f"{i}:{m[:40]}" for i, (_, _, m) in enumerate(BAD_SPECS)])
def test_bad_input_is_a_400_with_the_reference_message(body, single, message):
    assert refused(body if single is None else {"triggers": [single]}) == message


def test_nl_executor_rules():
    nl = {"type": "nl", "instruction": "escalate"}
    assert one(spec(actions=[{**nl, "executor": "ops"}]), executor=EXECUTOR) == (
        "trigger 't': actions[0]: executor 'ops' is not a registered executor name (registered: [])")
    assert one(spec(when={**ACTION_WHEN, "roles": ["helper"]}, actions=[nl]), executor=EXECUTOR) == (
        "trigger 't': when.roles includes 'helper', the role of the executor actions[0] goes to, so each of its "
        "replies would provoke it again")
    hours = {**EXECUTOR, "hours": {"start": "09:00", "end": "17:00"}}
    assert one(spec(actions=[nl], barrier={"at": "provoking_call"}), executor=hours).startswith(
        "trigger 't': a delayed action, or an nl action whose executor keeps working hours")
    engine, _, _ = make_engine()
    engine.register({"executors": {"ops": {**EXECUTOR, "role": "ops"}}, "triggers": [
        spec(actions=[{**nl, "executor": "ops"}])]})


def test_the_error_serializes_like_the_reference():
    try:
        make_engine()[0].register([])
    except TriggerError as exc:
        assert exc.to_wire() == {"ok": False, "error": "body must be a JSON object"}


def test_remove_and_clear():
    engine, _, _ = make_engine()
    engine.register({"watch_roles": ["agent"], "triggers": [mirror("a"), mirror("b")]})
    assert engine.remove({"ids": ["a", "nope"]}) == {"ok": True, "removed": ["a"]}
    assert engine.remove(["b"]) == {"ok": True, "removed": ["b"]}
    with pytest.raises(TriggerError) as info:
        engine.remove({"ids": "a"})
    assert info.value.message == "ids must be a list of non-empty strings"
    engine.register({"triggers": [mirror("a")]})  # a removed id can come back
    assert engine.clear() == {"ok": True}
    state = engine.state()
    assert state["triggers"] == [] and state["events"] == [] and state["config"]["watch_roles"] == []
