"""load_config: discovery, the four layers, schema errors, free-form tables."""

from __future__ import annotations

import pytest
from kits.config import write_config

from agentenv_local.config import Config, ConfigError, load_config

# --- discovery -------------------------------------------------------------------------------


def test_no_file_gives_every_default(tmp_path):
    cfg = load_config(tmp_path)
    assert isinstance(cfg, Config)
    assert cfg.file_path is None
    assert cfg.state_dir == tmp_path.resolve() / ".agentenv"
    assert cfg.get("runner.concurrency") == 4
    assert cfg.get("runner.step_concurrency") == 8
    assert cfg.get("store.flush_interval_ms") == 200
    assert cfg.get("hub.start_timeout_s") == 5.0
    assert cfg.get("hub.linger_s") == 0.0
    assert cfg.get("sandbox.default") == "auto"
    assert cfg.get("secrets.file") == "secrets.toml"
    assert cfg.get("secrets.use_env") is True
    assert cfg.get("model.base_url") is None
    assert cfg.get("model.roles.judge") is None
    assert cfg.get("model.headers") == {}
    assert cfg.get("task_steps.impls") == []
    assert cfg.get("plugins") == {}
    assert cfg.get("sandbox.providers.process") == {}
    assert cfg.section("runner") == {"concurrency": 4, "step_concurrency": 8}
    shown = cfg.show()
    assert shown["file"] is None
    assert {row["source"] for row in shown["keys"].values()} == {"default"}
    assert cfg.explain("runner.concurrency")["source"] == "default"


def test_file_found_walking_up_from_a_subdirectory(tmp_path):
    path = write_config(tmp_path, "[runner]\nconcurrency = 3\n")
    deep = tmp_path / "a" / "b" / "c"
    deep.mkdir(parents=True)
    cfg = load_config(deep)
    assert cfg.file_path == path
    assert cfg.state_dir == path.parent
    assert cfg.get("runner.concurrency") == 3
    assert cfg.explain("runner.concurrency")["source"] == f"file:{path}"


def test_file_found_from_cwd_when_no_start(tmp_path, monkeypatch):
    write_config(tmp_path, "[hub]\nlinger_s = 2.5\n")
    sub = tmp_path / "sub"
    sub.mkdir()
    monkeypatch.chdir(sub)
    assert load_config().get("hub.linger_s") == 2.5


def test_agentenv_config_names_the_file(tmp_path, monkeypatch):
    write_config(tmp_path, "[runner]\nconcurrency = 3\n")
    other = tmp_path / "prod.toml"
    other.write_text("[runner]\nconcurrency = 11\n")
    monkeypatch.setenv("AGENTENV_CONFIG", str(other))
    cfg = load_config(tmp_path)
    assert cfg.file_path == other.resolve()
    assert cfg.get("runner.concurrency") == 11  # the other file is not read at all
    assert "AGENTENV_CONFIG" not in " ".join(cfg.show()["warnings"])


def test_agentenv_config_missing_file_is_an_error(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTENV_CONFIG", str(tmp_path / "nope.toml"))
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path)
    text = info.value.render()
    assert "AGENTENV_CONFIG points to a missing file" in text
    assert "nope.toml" in text
    assert "unset" in text


def test_agentenv_home_sets_the_state_dir(tmp_path, monkeypatch):
    write_config(tmp_path / "project", "[runner]\nconcurrency = 3\n")
    home = tmp_path / "home"
    write_config(home, "")
    (home / ".agentenv" / "config.toml").rename(home / "config.toml")
    (home / "config.toml").write_text("[runner]\nconcurrency = 9\n")
    monkeypatch.setenv("AGENTENV_HOME", str(home))
    cfg = load_config(tmp_path / "project")
    assert cfg.state_dir == home.resolve()
    assert cfg.file_path == home.resolve() / "config.toml"
    assert cfg.get("runner.concurrency") == 9


def test_explicit_environ_mapping_is_used_instead_of_os_environ(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("[runner]\nconcurrency = 5\n")
    cfg = load_config(tmp_path, environ={"AGENTENV_HOME": str(home), "AGENTENV_RUNNER_STEP_CONCURRENCY": "2"})
    assert cfg.state_dir == home.resolve()
    assert cfg.get("runner.concurrency") == 5
    assert cfg.get("runner.step_concurrency") == 2


def test_utf8_bom_is_tolerated(tmp_path):
    state = tmp_path / ".agentenv"
    state.mkdir()
    (state / "config.toml").write_bytes("\ufeff[runner]\nconcurrency = 2\n".encode("utf-8"))
    assert load_config(tmp_path).get("runner.concurrency") == 2


def test_malformed_toml_names_file_line_and_column(tmp_path):
    path = write_config(tmp_path, "[runner]\nconcurrency = 4\nstep_concurrency = = 2\n")
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path)
    msg = info.value.message
    assert str(path) in msg
    assert "line 3" in msg
    assert "column" in msg


def test_non_utf8_file_is_an_error(tmp_path):
    state = tmp_path / ".agentenv"
    state.mkdir()
    (state / "config.toml").write_bytes(b"[runner]\nconcurrency = 4 # \xff\xfe\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(tmp_path)


# --- precedence ------------------------------------------------------------------------------


def test_precedence_of_all_four_layers(tmp_path, monkeypatch):
    path = write_config(tmp_path, "[runner]\nconcurrency = 5\nstep_concurrency = 3\n[hub]\nlinger_s = 1.5\n")
    monkeypatch.setenv("AGENTENV_RUNNER_CONCURRENCY", "6")
    monkeypatch.setenv("AGENTENV_RUNNER_STEP_CONCURRENCY", "7")
    cfg = load_config(tmp_path, overrides={"runner.concurrency": 8})

    assert cfg.get("runner.concurrency") == 8  # code
    assert cfg.get("runner.step_concurrency") == 7  # env
    assert cfg.get("hub.linger_s") == 1.5  # file
    assert cfg.get("hub.start_timeout_s") == 5.0  # default

    info = cfg.explain("runner.concurrency")
    assert info["path"] == "runner.concurrency"
    assert info["value"] == 8
    assert info["source"] == "code"
    assert info["ref"] is None
    assert info["shadowed"] == [
        {"source": "env:AGENTENV_RUNNER_CONCURRENCY", "value": 6},
        {"source": f"file:{path}", "value": 5},
        {"source": "default", "value": 4},
    ]
    step = cfg.explain("runner.step_concurrency")
    assert step["source"] == "env:AGENTENV_RUNNER_STEP_CONCURRENCY"
    assert [s["source"] for s in step["shadowed"]] == [f"file:{path}", "default"]
    assert cfg.explain("hub.linger_s")["source"] == f"file:{path}"

    rows = cfg.show()["keys"]
    assert rows["runner.concurrency"] == {"value": 8, "source": "code"}
    assert rows["runner.step_concurrency"]["source"] == "env:AGENTENV_RUNNER_STEP_CONCURRENCY"
    assert cfg.show()["file"] == str(path)


def test_env_values_are_parsed_to_the_key_type(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTENV_HUB_LINGER_S", "2.5")
    monkeypatch.setenv("AGENTENV_SECRETS_USE_ENV", "no")
    monkeypatch.setenv("AGENTENV_TASK_STEPS_IMPLS", "pkg.steps:One, pkg.steps:Two,")
    monkeypatch.setenv("AGENTENV_MODEL_BASE_URL", "http://127.0.0.1:11434/v1")
    monkeypatch.setenv("AGENTENV_SANDBOX_DEFAULT", "podman,process")
    monkeypatch.setenv("AGENTENV_STORE_FLUSH_INTERVAL_MS", "50")
    cfg = load_config(tmp_path)
    assert cfg.get("hub.linger_s") == 2.5
    assert cfg.get("secrets.use_env") is False
    assert cfg.get("task_steps.impls") == ["pkg.steps:One", "pkg.steps:Two"]
    assert cfg.get("model.base_url") == "http://127.0.0.1:11434/v1"
    assert cfg.get("sandbox.default") == "podman,process"
    assert cfg.get("store.flush_interval_ms") == 50


def test_env_value_of_wrong_type_is_an_error(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTENV_RUNNER_CONCURRENCY", "lots")
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path)
    text = info.value.render()
    assert "AGENTENV_RUNNER_CONCURRENCY" in text
    assert "runner.concurrency" in text
    assert "an integer from 1 to 1000" in text
    assert "lots" in text


def test_unknown_agentenv_vars_are_ignored_but_warned(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTENV_SOMETHING_ELSE", "x")
    monkeypatch.setenv("AGENTENV_RUNNER_CONCURENCY", "2")
    monkeypatch.setenv("AGENTENV_HOME", str(tmp_path / ".agentenv"))
    cfg = load_config(tmp_path)
    warnings = cfg.show()["warnings"]
    assert any("AGENTENV_SOMETHING_ELSE" in w for w in warnings)
    assert any("AGENTENV_RUNNER_CONCURENCY" in w and "AGENTENV_RUNNER_CONCURRENCY" in w for w in warnings)
    assert not any("AGENTENV_HOME" in w for w in warnings)
    assert cfg.get("runner.concurrency") == 4


def test_empty_env_var_means_not_set(tmp_path, monkeypatch):
    write_config(tmp_path, "[runner]\nconcurrency = 3\n")
    monkeypatch.setenv("AGENTENV_RUNNER_CONCURRENCY", "")
    assert load_config(tmp_path).get("runner.concurrency") == 3


def test_overrides_accept_nested_dicts_and_skip_none(tmp_path):
    cfg = load_config(tmp_path, overrides={"model": {"roles": {"judge": "qwen3"}}, "runner.concurrency": None,
                                           "hub.linger_s": 3})
    assert cfg.get("model.roles.judge") == "qwen3"
    assert cfg.get("runner.concurrency") == 4
    assert cfg.get("hub.linger_s") == 3.0  # an int is fine for a float key
    assert cfg.explain("model.roles.judge")["source"] == "code"


def test_unknown_override_key_is_an_error(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path, overrides={"runner.workers": 2})
    text = info.value.render()
    assert "runner.workers" in text and "overrides passed in code" in text
    assert "concurrency, step_concurrency" in text


# --- schema errors ---------------------------------------------------------------------------


def test_unknown_key_names_file_path_valid_keys_and_suggestion(tmp_path):
    path = write_config(tmp_path, "[runner]\nconcurency = 3\n")
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path)
    err = info.value
    assert "runner.concurency" in err.message
    assert str(path) in err.message
    assert any("concurrency, step_concurrency" in p for p in err.problems)
    assert "did you mean 'runner.concurrency'" in err.hint


def test_unknown_section_suggests_the_closest(tmp_path):
    write_config(tmp_path, "[plugin.foo]\nx = 1\n")
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path)
    text = info.value.render()
    assert "unknown section 'plugin'" in text
    sections = ("store, runner, executor, scripts, hub, sandbox, envs, agents, secrets, model, task_steps, security, "
                "plugins")
    assert sections in text
    assert "did you mean 'plugins'" in text


def test_key_in_the_wrong_section_points_to_the_right_one(tmp_path):
    write_config(tmp_path, "[hub]\nconcurrency = 3\n")
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path)
    assert "runner.concurrency" in info.value.hint


def test_several_problems_are_reported_together(tmp_path):
    write_config(tmp_path, "[runner]\nconcurency = 3\nstep_concurrency = 'x'\n[hub]\nlinger = 1\n")
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path)
    assert "3 problems" in info.value.message
    assert len(info.value.problems) == 3


@pytest.mark.parametrize(
    "toml, path, expects, shown",
    [
        ('[runner]\nconcurrency = "8"\n', "runner.concurrency", "an integer from 1 to 1000", '"8"'),
        ("[runner]\nconcurrency = 0\n", "runner.concurrency", "an integer from 1 to 1000", "0"),
        ("[store]\nflush_interval_ms = 1\n", "store.flush_interval_ms", "an integer from 10 to 5000", "1"),
        ("[secrets]\nuse_env = 1\n", "secrets.use_env", "true or false", "1"),
        ('[task_steps]\nimpls = "a:B"\n', "task_steps.impls", "a list of", '"a:B"'),
        ("[model]\nbase_url = 5\n", "model.base_url", "a string", "5"),
        ("[sandbox]\nproviders = 3\n", "sandbox.providers", "a table", "3"),
        ("[sandbox.providers]\npodman = 3\n", "sandbox.providers.podman", "a table", "3"),
        ("[model.headers]\nX-A = 1\n", "model.headers.X-A", "a string", None),
        ("runner = 3\n", "runner", "a table", "3"),
    ],
)
def test_wrong_type_names_path_expected_type_and_value(tmp_path, toml, path, expects, shown):
    file = write_config(tmp_path, toml)
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path)
    msg = info.value.message
    assert f"'{path}'" in msg
    assert expects in msg
    assert str(file) in msg
    if shown is not None:
        assert f"got {shown}" in msg


def test_wrong_type_under_a_secret_key_does_not_print_the_value(tmp_path):
    write_config(tmp_path, "[model]\napi_key = 123456789\n")
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path)
    assert "123456789" not in info.value.render()
    assert "model.api_key" in info.value.message


def test_malformed_reference_is_an_error(tmp_path):
    write_config(tmp_path, '[model]\nbase_url = "env:"\n')
    with pytest.raises(ConfigError, match="malformed reference"):
        load_config(tmp_path)


# --- free-form tables ------------------------------------------------------------------------


def test_free_form_tables_accept_any_keys_and_merge_across_layers(tmp_path, monkeypatch):
    path = write_config(tmp_path, """
[sandbox.providers.podman]
memory = "2g"
limits = { cpus = 2, pids = 100 }

[sandbox.providers.process]

[plugins.my-plugin]
colour = "blue"
nested = { a = [1, 2] }

[model.headers]
X-Team = "research"
""")
    cfg = load_config(tmp_path, overrides={"sandbox.providers.podman.limits.cpus": 4,
                                           "plugins": {"other": {"on": True}}})
    assert cfg.get("sandbox.providers.podman") == {"memory": "2g", "limits": {"cpus": 4, "pids": 100}}
    assert cfg.get("sandbox.providers.process") == {}
    assert cfg.get("sandbox.providers.missing") == {}
    assert cfg.get("sandbox.providers.podman.memory") == "2g"
    assert cfg.get("sandbox.providers.podman.nope", "dflt") == "dflt"
    assert cfg.get("plugins.my-plugin") == {"colour": "blue", "nested": {"a": [1, 2]}}
    assert cfg.get("plugins.other") == {"on": True}
    assert cfg.section("model.headers") == {"X-Team": "research"}
    assert cfg.section("sandbox")["providers"]["podman"]["memory"] == "2g"
    assert cfg.explain("sandbox.providers.podman.limits.cpus")["source"] == "code"
    assert cfg.explain("sandbox.providers.podman.limits.cpus")["shadowed"] == [
        {"source": f"file:{path}", "value": 2}]
    assert cfg.explain("sandbox.providers.podman")["source"] == "mixed"
    keys = cfg.show()["keys"]
    assert keys["sandbox.providers.podman.memory"]["source"] == f"file:{path}"
    assert keys["sandbox.providers.process"] == {"value": {}, "source": f"file:{path}"}


def test_a_higher_layer_single_value_replaces_a_lower_table(tmp_path):
    write_config(tmp_path, "[sandbox.providers.podman]\nlimits = { cpus = 2 }\n")
    cfg = load_config(tmp_path, overrides={"sandbox.providers.podman.limits": "none"})
    assert cfg.get("sandbox.providers.podman") == {"limits": "none"}


# --- the API ---------------------------------------------------------------------------------


def test_unknown_path_in_get_and_explain_lists_valid_keys(tmp_path):
    cfg = load_config(tmp_path)
    for call in (cfg.get, cfg.explain, cfg.raw):
        with pytest.raises(ConfigError) as info:
            call("runner.concurency")
        assert "runner.concurrency, runner.step_concurrency" in info.value.render()
        assert "did you mean 'runner.concurrency'" in info.value.hint
    with pytest.raises(ConfigError):
        cfg.get("runner.concurrency.deeper")


def test_section_of_a_leaf_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="not a section"):
        load_config(tmp_path).section("runner.concurrency")


def test_settings_returns_the_typed_model(tmp_path):
    write_config(tmp_path, '[model]\ndefault = "qwen3"\n[sandbox.providers.podman]\nmemory = "1g"\n')
    settings = load_config(tmp_path).settings()
    assert settings.model.default == "qwen3"
    assert settings.runner.concurrency == 4
    assert settings.sandbox.providers == {"podman": {"memory": "1g"}}


def test_keys_lists_every_schema_path():
    keys = Config.keys()
    assert "runner.concurrency" in keys
    assert "sandbox.providers" in keys
    assert "model.roles.judge" in keys
    assert "runner" not in keys


def test_importing_config_does_not_import_duckdb():
    import subprocess
    import sys

    code = ("import sys, agentenv_local.config as c; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('duckdb', 'stores', 'httpx', 'mcp', 'textual')]; "
            "print(bad); sys.exit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
