"""A bundle's aliases.toml, as the reference writes it: a task names the bundle's env by an alias; a folder's own
name wins over an alias; what the file holds that is not used is listed as ignored, one line each; a bad alias is
a problem that names it (and nothing is written)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from kits.hub import cli
from kits.reference_bundles import copy_reference_bundle

from agentenv_local.bundles.loader import load_bundle
from agentenv_local.errors import ValidationError

ECHO = Path(__file__).resolve().parents[3] / "examples" / "envs" / "echo"


def _bundle(root: Path, aliases: str, env_id: str = "talker") -> Path:
    """A bundle with envs/echo/ (our example echo env) and a task deploying `env_id`."""
    bundle = root / "b"
    shutil.copytree(ECHO, bundle / "envs" / "echo")
    (bundle / "envs" / "echo" / "env.toml").write_text('module = "server.py:Echo"\nenvironment_name = "echo"\n')
    (bundle / "tasks").mkdir()
    (bundle / "tasks" / "t.json").write_text(json.dumps([{"id": "env", "type": "deploy_env", "env_id": env_id}]))
    (bundle / "aliases.toml").write_text(aliases)
    return bundle


def _env_id_of_task(bundle) -> str:
    return bundle.tasks["t"].steps[0]["env_id"]


def test_a_task_names_the_env_by_its_alias(tmp_path):
    bundle = load_bundle(_bundle(tmp_path, '[envs]\necho = ["talker", "echo"]\n'))
    assert bundle.env_aliases == {"talker": "echo", "echo": "echo"}
    assert _env_id_of_task(bundle) == bundle.envs["echo"].id
    assert "aliases.toml" not in bundle.ignored


def test_an_unknown_table_or_key_is_listed_as_ignored(tmp_path):
    text = '[envs]\necho = ["talker"]\n[artifacts]\nx = ["y"]\n'
    bundle = load_bundle(_bundle(tmp_path, 'version = 2\n' + text))
    assert [line for line in bundle.ignored if "aliases" in line] == [
        "aliases.toml 'version': ignored (an aliases.toml takes [envs] and [agents])",
        "aliases.toml [artifacts]: ignored (an aliases.toml takes [envs] and [agents])"]
    assert _env_id_of_task(bundle) == bundle.envs["echo"].id


def test_a_folder_name_is_never_another_folders_alias(tmp_path):
    root = _bundle(tmp_path, '[envs]\necho = ["other"]\n', env_id="other")
    shutil.copytree(root / "envs" / "echo", root / "envs" / "other")
    with pytest.raises(ValidationError) as caught:
        load_bundle(root)
    assert "aliases.toml: envs.echo: 'other' is the env 'other''s name" in caught.value.problems


@pytest.mark.parametrize(("text", "problem"), [
    ('[envs]\nnope = ["x"]\n', "aliases.toml: envs.nope: this bundle has no env 'nope' (envs/nope/)"),
    ('[envs]\necho = "talker"\n', "aliases.toml: envs.echo must be a list of aliases, not 'talker'"),
    ('[envs]\necho = ["Not An Id"]\n', "aliases.toml: envs.echo: 'Not An Id' is not an alias: lowercase letters"),
    ('envs = 3\n', "aliases.toml: envs must be a table ([envs]) of folder names to lists of aliases"),
    ('[envs\n', "aliases.toml"),
])
def test_a_bad_aliases_file_is_a_problem_naming_it(tmp_path, text, problem):
    with pytest.raises(ValidationError) as caught:
        load_bundle(_bundle(tmp_path, text))
    assert any(p.startswith(problem) for p in caught.value.problems), caught.value.problems


def test_a_bad_alias_writes_nothing(tmp_path):
    _bundle(tmp_path, '[envs]\nnope = ["x"]\n')
    done = cli(tmp_path, "run", "./b")
    assert done.returncode == 1
    assert "aliases.toml: envs.nope: this bundle has no env 'nope'" in done.stdout + done.stderr
    assert "v1 (new)" not in done.stdout + done.stderr


def test_the_reference_mail_bundle_reads_its_aliases(tmp_path):
    bundle = load_bundle(copy_reference_bundle("mail-mcp", tmp_path))
    assert bundle.env_aliases == {"mail": "mail"}
    assert not [line for line in bundle.ignored if "aliases" in line]
    assert bundle.tasks["smoke"].steps[0]["env_id"] == bundle.envs["mail"].id


def test_a_store_env_of_the_aliass_id_wins_over_the_alias(tmp_path):
    from kits.env_deploy import EXAMPLES

    root = _bundle(tmp_path, '[envs]\necho = ["talker"]\n')
    (root / "tasks" / "t.json").write_text(json.dumps([{"id": "env", "type": "deploy_env", "env_id": "talker"}]))
    (tmp_path / "mail" / "env.toml").parent.mkdir()
    shutil.copytree(EXAMPLES / "mail", tmp_path / "mail", dirs_exist_ok=True)
    (tmp_path / "mail" / "env.toml").write_text('module = "server.py:Mail"\nenvironment_name = "mail"\n')
    assert cli(tmp_path, "env", "put", "./mail", "--id", "talker").returncode == 0
    done = cli(tmp_path, "run", "./b", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    [run] = json.loads(done.stdout)
    assert run["context"]["deployed_envs"][0]["env_id"] == "talker"  # the store's, not envs/echo/


def test_what_aliases_toml_holds_that_is_not_used_is_printed_one_line_each(tmp_path):
    _bundle(tmp_path, '[envs]\necho = ["talker"]\n[artifacts]\nx = ["y"]\n')
    done = cli(tmp_path, "run", "./b", "--dry-run")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [line for line in done.stderr.splitlines() if "aliases.toml" in line]
    assert len(lines) == 1 and "aliases.toml [artifacts]: ignored" in lines[0]
