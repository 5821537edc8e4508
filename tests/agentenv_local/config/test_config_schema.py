"""The schema catalogue: env var names, type descriptions, strict checking, and that the docs cover every key."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

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


def test_values_are_checked_strictly():
    by = {n.dotted: n for n in schema.leaves()}
    assert by["runner.concurrency"].check(8) == 8
    for wrong in (True, 8.0, "8", 0, 1001, None):
        with pytest.raises(ValueError):
            by["runner.concurrency"].check(wrong)
    timeout = by["hub.start_timeout_s"]
    assert timeout.check(5) == 5.0 and isinstance(timeout.check(5), float)
    for wrong in (0, False, float("nan"), float("inf"), "5"):
        with pytest.raises(ValueError):
            timeout.check(wrong)
    assert by["model.api"].check("anthropic") == "anthropic"
    with pytest.raises(ValueError):
        by["model.api"].check("openai2")  # the pattern matches the whole value
    assert by["executor.kind"].check("ray") == "ray"
    with pytest.raises(ValueError, match='"auto" or "local" or "workers" or "ray"'):
        by["executor.kind"].check("k8s")
    assert by["model.base_url"].check(None) is None
    assert by["security.allowed_hosts"].check(["a.test"]) == ["a.test"]
    for wrong in ([""], "a.test", [1]):
        with pytest.raises(ValueError):
            by["security.allowed_hosts"].check(wrong)
    with pytest.raises(ValueError):
        by["sandbox.default"].check("")


def test_settings_from_values_checks_and_fills_defaults():
    settings = schema.Settings.from_values({"runner": {"concurrency": 9}, "model": {"roles": {"judge": "j"}}})
    assert settings.runner.concurrency == 9 and settings.runner.step_concurrency == 8
    assert settings.model.roles.judge == "j" and settings.envs.pool.size == 4
    with pytest.raises(ValueError, match="runner.nope"):
        schema.Settings.from_values({"runner": {"nope": 1}})
    with pytest.raises(ValueError, match="runner.concurrency"):
        schema.Settings.from_values({"runner": {"concurrency": "9"}})


def test_loading_the_configuration_imports_no_pydantic(tmp_path):
    # Every command loads it; pydantic's import alone was a fifth of a short command's CPU.
    code = ("import sys; from agentenv_local.config import load_config; load_config(sys.argv[1]).get('runner'); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pydantic', 'annotated_types')))")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
