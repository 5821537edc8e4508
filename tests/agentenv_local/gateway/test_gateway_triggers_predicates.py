"""Predicates, paths (``[n]``, ``[*]``), extract, and templating."""

from __future__ import annotations

import pytest

from agentenv_local.gateway.triggers.predicates import (
    Many,
    PathError,
    extract,
    holds,
    predicate_error,
    resolve,
    where_holds,
)
from agentenv_local.gateway.triggers.templating import TemplateError, render

DATA = {"items": [{"id": 1, "status": "open", "tags": ["a"]}, {"id": 2, "status": "done", "tags": []}],
        "owner": {"name": "Ana"}, "empty": "", "none": None}


def test_paths():
    assert resolve(DATA, "owner.name") == "Ana"
    assert resolve(DATA, "items[1].id") == 2
    assert resolve(DATA, "items[5].id") is None
    assert resolve(DATA, "owner.missing") is None
    assert resolve(DATA, "items.id") is None  # a list has no keys
    assert resolve(DATA, "items[*].status") == ["open", "done"]
    assert isinstance(resolve(DATA, "items[*].status"), Many)
    assert resolve(DATA, "items[*].tags[0]") == ["a"]
    assert resolve(DATA, "items[*]") == DATA["items"]
    with pytest.raises(PathError):
        resolve(DATA, "items[-1]")
    with pytest.raises(PathError):
        resolve(DATA, "a..b")


def test_predicates():
    assert holds({"regex": "^An"}, "Ana")
    assert holds({"regex": '"id": 1'}, {"id": 1})  # a non-string is matched as JSON
    assert holds({"equals": {"id": 1}}, {"id": 1})
    assert not holds({"equals": "1"}, 1)
    assert holds({"exists": True}, 0)
    assert holds({"exists": True}, {})
    for empty in (None, "", []):
        assert holds({"exists": False}, empty)
    assert predicate_error({"regex": "a", "exists": True}) == \
        "predicate must have exactly one of ('regex', 'equals', 'exists')"
    assert predicate_error({"equals": None}) is None


def test_star_means_any_element():
    statuses = resolve(DATA, "items[*].status")
    assert holds({"equals": "done"}, statuses)
    assert not holds({"equals": "blocked"}, statuses)
    assert holds({"regex": "^op"}, statuses)
    assert holds({"exists": True}, resolve(DATA, "items[*].id"))
    assert holds({"exists": False}, resolve(DATA, "items[*].missing"))
    assert not holds({"exists": True}, resolve({"items": []}, "items[*].id"))
    assert holds({"exists": False}, resolve({"items": []}, "items[*].id"))


def test_where_reads_args_result_and_bare_keys():
    ctx = {"args": {"q": "invoice 42", "n": 3}, "result": DATA}
    assert where_holds({"args.q": {"regex": "invoice"}, "n": {"equals": 3}}, ctx)
    assert where_holds({"result.items[*].status": {"equals": "done"}}, ctx)
    assert where_holds({"result.owner.name": {"equals": "Ana"}}, ctx)
    assert not where_holds({"result.owner.name": {"equals": "Bo"}}, ctx)
    assert where_holds({"result": {"regex": "Ana"}}, ctx)  # the whole result
    assert where_holds({}, ctx)


def test_extract():
    assert extract(None, DATA, "raw text") == "raw text"
    assert extract("owner.name", DATA, "") == "Ana"
    assert extract({"path": "items", "match": {"status": {"equals": "done"}}, "take": "id"}, DATA, "") == 2
    assert extract({"path": "items", "match": {"status": {"equals": "open"}}}, DATA, "") == DATA["items"][0]
    assert extract({"path": "items", "match": {"status": {"equals": "gone"}}, "take": "id"}, DATA, "") is None
    assert extract({"path": "owner", "take": "name"}, DATA, "") is None  # not a list
    assert extract({"path": "items", "match": {"tags[0]": {"equals": "a"}}, "take": "id"}, DATA, "") == 1


def test_templating():
    ctx = {"args": {"query": "hi", "n": 3, "to": ["a@x"]}, "result": {"id": 7, "items": [{"id": 1}, {"id": 2}]}}
    assert render({"text": "${args.query}", "n": "${args.n}", "list": ["${args.to}"]}, {}, ctx) == \
        {"text": "hi", "n": 3, "list": [["a@x"]]}
    assert render({"msg": "got ${result.id} for ${args.query}"}, {}, ctx) == {"msg": "got 7 for hi"}
    assert render({"msg": "${result.items}"}, {}, ctx) == {"msg": [{"id": 1}, {"id": 2}]}
    assert render({"ids": "${result.items[*].id}"}, {}, ctx) == {"ids": [1, 2]}
    assert render({"all": "${args}"}, {}, ctx)["all"] == ctx["args"]
    assert render({"text": "x ${result.items}"}, {}, ctx) == {"text": 'x [{"id": 1}, {"id": 2}]'}


def test_templating_optional_drop_and_required_failure():
    ctx = {"args": {"query": "hi"}, "result": {}}
    assert render({"cc": "${args.cc?}", "q": "${args.query?}", "tags": ["${args.tag?}", "x"]}, {}, ctx) == \
        {"q": "hi", "tags": ["x"]}
    assert render({"text": "cc:${args.cc?}."}, {}, ctx) == {"text": "cc:."}
    with pytest.raises(TemplateError, match=r"unresolved placeholder \$\{args.cc\}"):
        render({"cc": "${args.cc}"}, {}, ctx)
    assert render({"text": "${HOME}"}, {}, ctx) == {"text": "${HOME}"}  # a bare unbound name stays


def test_templating_bindings():
    assert render({"id": "${msg_id}", "q": "n=${count}"}, {"msg_id": 5, "count": 2}) == {"id": "5", "q": "n=2"}
    assert render({"id": "${msg_id}"}, {"msg_id": "m-1"}) == {"id": "m-1"}
