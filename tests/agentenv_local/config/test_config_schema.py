"""The schema catalogue: env var names, type descriptions, and that the docs cover every key."""

from __future__ import annotations

from pathlib import Path

from agentenv_local.config import schema

DOCS = Path(__file__).resolve().parents[3] / "docs" / "configuration.md"


def test_every_key_and_env_var_is_documented():
    text = DOCS.read_text(encoding="utf-8")
    missing = [n.dotted for n in schema.all_nodes() if n.kind != "section" and f"`{n.dotted}`" not in text]
    missing += [n.env_var for n in schema.leaves() if f"`{n.env_var}`" not in text]
    assert not missing, f"document these in docs/configuration.md: {missing}"


def test_env_var_names_are_unique_and_exclude_reserved():
    names = [n.env_var for n in schema.leaves()]
    assert len(names) == len(set(names))
    assert not set(names) & schema.RESERVED_ENV
    assert schema.env_vars()["AGENTENV_MODEL_BASE_URL"].dotted == "model.base_url"
    assert schema.env_vars()["AGENTENV_RUNNER_STEP_CONCURRENCY"].dotted == "runner.step_concurrency"


def test_every_key_has_a_description():
    assert not [n.dotted for n in schema.all_nodes() if n.kind != "section" and not n.description]


def test_type_descriptions():
    by = {n.dotted: n for n in schema.leaves()}
    assert by["store.flush_interval_ms"].expects == "an integer from 10 to 5000"
    assert by["runner.concurrency"].expects == "an integer from 1 to 1000"
    assert by["hub.start_timeout_s"].expects == "a number > 0 and <= 600"
    assert by["secrets.use_env"].expects == "true or false"
    assert by["model.base_url"].expects == "a string"


def test_defaults_match_the_settings_model():
    settings = schema.Settings()
    for node in schema.leaves():
        value = settings
        for part in node.path:
            value = getattr(value, part)
        assert value == node.default, node.dotted
