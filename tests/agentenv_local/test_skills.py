"""Agent Skills folders: SKILL.md frontmatter parsing, name rules, storing and delivering skills, and a
bundle's skills/ folder (refused when bad, materialized as versioned skill artifacts, bare names resolved)."""

from __future__ import annotations

import json

import pytest

from agentenv_local.bundles.loader import load_bundle
from agentenv_local.bundles.materialize import materialize
from agentenv_local.errors import ValidationError
from agentenv_local.skills import (
    NAME_RE,
    SkillError,
    load_skill_folder,
    parse_frontmatter,
    put_skill,
    skill_from_text,
    skill_payload,
)
from stores.database import DuckDBStore

FULL = """---
# a comment
name: pdf-tools
description: >-
  Extract text and tables from PDF files.
  Use when the user mentions PDFs.
license: 'Apache-2.0'
compatibility: "needs python3 and \\"pdftotext\\""
metadata:
  author: example-org
  version: "1.0"
allowed-tools: Bash(pdftotext:*) Read
---
# PDF tools

Run `scripts/extract.sh FILE`.
"""


def skill_md(name: str = "greet", description: str = "Greets people politely.", extra: str = "",
             body: str = "# Greet\nSay hello.\n") -> str:
    return f"---\nname: {name}\ndescription: {description}\n{extra}---\n{body}"


@pytest.fixture
def store(tmp_path):
    (tmp_path / "state").mkdir()
    s = DuckDBStore(tmp_path / "state" / "store.duckdb", tmp_path / "state" / "objects")
    yield s
    s.close()


# --- parsing ----------------------------------------------------------------------------------------------


def test_full_frontmatter_is_parsed():
    skill = skill_from_text(FULL)
    assert skill.name == "pdf-tools"
    assert skill.description == "Extract text and tables from PDF files. Use when the user mentions PDFs."
    assert skill.license == "Apache-2.0"
    assert skill.compatibility == 'needs python3 and "pdftotext"'
    assert skill.metadata == {"author": "example-org", "version": "1.0"}
    assert skill.allowed_tools == ["Bash(pdftotext:*)", "Read"]
    assert skill.body == "# PDF tools\n\nRun `scripts/extract.sh FILE`.\n"
    assert skill.skill_md == FULL


def test_lists_literal_blocks_and_quotes():
    data, body = parse_frontmatter(
        "---\nname: x\nallowed-tools:\n  - Read\n  - 'Bash(ls)'\ndescription: |\n  line one\n\n  line two\n"
        "license: [MIT, 'Apache-2.0']\nempty:\nquoted: 'it''s # not a comment'\nplain: value # a comment\n---\nB")
    assert data == {"name": "x", "allowed-tools": ["Read", "Bash(ls)"], "description": "line one\n\nline two\n",
                    "license": ["MIT", "Apache-2.0"], "empty": None, "quoted": "it's # not a comment",
                    "plain": "value"}
    assert body == "B"


@pytest.mark.parametrize(("text", "message"), [
    ("name: x\n---\n", "SKILL.md: line 1: must start with a '---' line"),
    ("---\nname: x\ndescription: d\n", "is never closed by a '---' line"),
    ("---\nname: x\n  more: y\n---\n", "SKILL.md: line 3: a continuation line is not supported"),
    ("---\nname x\n---\n", "SKILL.md: line 2: expected 'key: value'"),
    ("---\n  name: x\n---\n", "SKILL.md: line 2: unexpected indentation"),
    ("---\nname: x\nname: y\n---\n", "SKILL.md: line 3: 'name' is given twice"),
    ("---\nname: 'x\n---\n", "SKILL.md: line 2: unterminated single-quoted string"),
    ("---\nname: \"a\\q\"\n---\n", "SKILL.md: line 2: bad escape"),
    ("---\nname: {a: 1}\n---\n", "SKILL.md: line 2: '{' at the start of a value is not supported"),
    ("---\ntools: [a, [b]]\n---\n", "SKILL.md: line 2: nested lists or maps are not supported"),
    ("---\nmetadata:\n  a: 1\n    b: 2\n---\n", "SKILL.md: line 4: inconsistent indentation under 'metadata'"),
    ("---\nmetadata:\n  a:\n---\n", "SKILL.md: line 3: metadata.a must be a one-line string value"),
    ("---\ndescription: |x\n---\n", "SKILL.md: line 2: block scalar indicator '|x' is not supported"),
])
def test_malformed_frontmatter_names_the_file_and_line(text, message):
    with pytest.raises(SkillError) as err:
        parse_frontmatter(text)
    assert message in err.value.message


@pytest.mark.parametrize("name", ["a", "pdf-tools", "x1-2-3", "a" * 64, "0day"])
def test_valid_names(name):
    assert NAME_RE.match(name)
    assert skill_from_text(skill_md(name)).name == name


@pytest.mark.parametrize("name", ["-a", "a-", "a--b", "Abc", "a_b", "a.b", "a b", "a" * 65, "ünï"])
def test_invalid_names(name):
    with pytest.raises(SkillError, match="is not a valid skill name"):
        skill_from_text(skill_md(json.dumps(name)))


def test_every_frontmatter_problem_at_once():
    with pytest.raises(SkillError) as err:
        skill_from_text("---\nname: Bad--Name\nlicence: MIT\nmetadata: flat\nallowed-tools:\n  k: v\n---\n",
                        "skills/x/SKILL.md")
    problems = err.value.problems
    assert err.value.message == "skills/x/SKILL.md: 5 problem(s)"
    assert any("unknown frontmatter key(s) licence" in p for p in problems)
    assert any("name 'Bad--Name' is not a valid skill name" in p for p in problems)
    assert any("'description' is required" in p for p in problems)
    assert any("'metadata' must be a map" in p for p in problems)
    assert any("'allowed-tools' must be a space-separated string or a list" in p for p in problems)


def test_description_limits_and_expected_name():
    with pytest.raises(SkillError, match="'description' is 1025 characters; at most 1024"):
        skill_from_text(skill_md(description="x" * 1025))
    with pytest.raises(SkillError, match="frontmatter 'name' 'greet' must be 'hello'"):
        skill_from_text(skill_md(), expected_name="hello")


def test_load_skill_folder(tmp_path):
    folder = tmp_path / "greet"
    (folder / "scripts").mkdir(parents=True)
    (folder / "SKILL.md").write_text(skill_md())
    (folder / "scripts" / "hi.sh").write_text("echo hi\n")
    (folder / ".hidden").write_text("skipped")
    skill = load_skill_folder(folder, expected_name="greet")
    assert skill.name == "greet" and set(skill.files) == {"SKILL.md", "scripts/hi.sh"}
    (folder / "SKILL.md").rename(folder / "scripts" / "SKILL.md")
    with pytest.raises(SkillError, match="no SKILL.md at the skill folder's root .*found scripts/SKILL.md"):
        load_skill_folder(folder)
    with pytest.raises(SkillError, match="not a folder"):
        load_skill_folder(tmp_path / "nope")


# --- storing and delivering ------------------------------------------------------------------------------


def test_put_skill_and_payload(store):
    files = {"SKILL.md": FULL.encode(), "scripts/extract.sh": b"pdftotext $1 -\n"}
    doc = put_skill(store, "@local/demo/pdf-tools", files)
    body = doc["body"]
    assert doc["version"] == 1 and body["type"] == "skill" and body["skill_name"] == "pdf-tools"
    assert body["skill_metadata"] == {"author": "example-org", "version": "1.0"}
    assert body["allowed_tools"] == ["Bash(pdftotext:*)", "Read"] and body["agent_skills_spec_version"] == "0.1"
    assert body["skill_files_id"] == "@local/demo/pdf-tools__files" and set(body["files"]) == set(files)
    universe = store.documents.get("artifacts", "@local/demo/pdf-tools__files")
    assert universe["body"]["type"] == "file_artifact_universe"
    assert skill_payload(store, doc) == {"name": "pdf-tools", "description": body["description"], "skill_md": FULL}
    assert put_skill(store, "@local/demo/pdf-tools", files, if_changed=True).get("unchanged") is True
    with pytest.raises(SkillError, match="frontmatter 'name' 'pdf-tools' must be 'other'"):
        put_skill(store, "@local/demo/other", files)
    with pytest.raises(ValidationError, match="is a 'file_artifact_universe' artifact, not a skill"):
        skill_payload(store, universe)


# --- bundles ---------------------------------------------------------------------------------------------


def write(root, rel, text):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def skills_bundle(tmp_path):
    root = tmp_path / "sb"
    write(root, "skills/greet/SKILL.md", skill_md())
    write(root, "skills/greet/templates/hello.txt", "Hello, {name}!\n")
    write(root, "skills/pdf-tools/SKILL.md", FULL)
    write(root, "tasks/t.json", json.dumps([
        {"id": "agent", "type": "deploy_agent", "agent_name": "solver", "skills": ["greet"]},
        {"id": "more", "type": "add_skills", "agent_name": "solver",
         "skills": [{"id": "pdf-tools"}, {"name": "inline-one", "description": "d", "skill_md": "x"}]},
    ]))
    return root


def test_bundle_skills_load_and_resolve(tmp_path):
    root = skills_bundle(tmp_path)
    bundle = load_bundle(root)
    assert set(bundle.skills) == {"greet", "pdf-tools"} and bundle.deferred == []
    greet = bundle.skills["greet"]
    assert greet.id == f"{bundle.id_root}/greet" and set(greet.files) == {"SKILL.md", "templates/hello.txt"}
    steps = bundle.tasks["t"].steps
    assert steps[0]["skills"] == [greet.id]
    assert steps[1]["skills"][0] == {"id": f"{bundle.id_root}/pdf-tools"}
    assert steps[1]["skills"][1]["name"] == "inline-one"  # inline skills stay as they are


def test_bad_skills_are_refused_with_the_bundle_problems(tmp_path):
    root = tmp_path / "bad"
    write(root, "skills/no-md/readme.txt", "no SKILL.md here")
    write(root, "skills/Bad_Name/SKILL.md", skill_md("Bad_Name"))
    write(root, "skills/other/SKILL.md", skill_md("mismatch"))
    write(root, "skills/nodesc/SKILL.md", "---\nname: nodesc\n---\nbody")
    write(root, "skills/broken/SKILL.md", "---\nname: broken\ndescription d\n---\n")
    write(root, "skills/loose.md", "x")
    (root / "skills" / "empty").mkdir()
    write(root, "artifacts/clash/x.txt", "x")
    write(root, "skills/clash/SKILL.md", skill_md("clash"))
    write(root, "artifacts/helper/SKILL.md", skill_md("helper"))
    with pytest.raises(ValidationError) as err:
        load_bundle(root)
    problems = err.value.problems
    expected = [
        "skills/no-md: no SKILL.md at the skill folder's root",
        "skills/Bad_Name/SKILL.md: name 'Bad_Name' is not a valid skill name",
        "skills/other/SKILL.md: frontmatter 'name' 'mismatch' must be 'other'",
        "skills/nodesc/SKILL.md: 'description' is required",
        "skills/broken/SKILL.md: line 3: expected 'key: value'",
        "skills/loose.md: each skill is a folder",
        "skills/empty: empty skill folder",
        "skills/clash: its id",
        "artifacts/helper: this looks like a skill (it has SKILL.md); put it under skills/helper/",
    ]
    for want in expected:
        assert any(p.startswith(want) for p in problems), f"{want!r} not in {problems}"
    assert len(problems) == len(expected)


def test_bundle_skills_are_versioned_by_content_and_pinned_in_tasks(tmp_path, store):
    root = skills_bundle(tmp_path)
    first = materialize(store, load_bundle(root))
    lines = {(ln.kind, ln.name): (ln.version, ln.status) for ln in first.lines}
    assert lines[("skills", "greet")] == (1, "new") and lines[("skills", "pdf-tools")] == (1, "new")
    task_id, version = first.task_versions["t"]
    steps = store.documents.get("tasks", task_id, version)["body"]["steps"]
    greet_id = load_bundle(root).skills["greet"].id
    assert steps[0]["skills"] == [{"id": greet_id, "version": 1}]
    assert steps[1]["skills"][0]["version"] == 1

    again = materialize(store, load_bundle(root))
    assert {ln.status for ln in again.lines} == {"unchanged"}

    write(root, "skills/greet/templates/hello.txt", "Hi there, {name}!\n")  # a non-SKILL.md file counts too
    third = materialize(store, load_bundle(root))
    lines = {(ln.kind, ln.name): (ln.version, ln.status) for ln in third.lines}
    assert lines[("skills", "greet")] == (2, "changed") and lines[("skills", "pdf-tools")] == (1, "unchanged")
    assert third.task_versions["t"][1] == version + 1
    doc = store.documents.get("artifacts", greet_id)
    assert doc["version"] == 2 and doc["body"]["skill_files_version"] == 2
    assert store.objects.get(doc["body"]["files"]["templates/hello.txt"]["key"]) == b"Hi there, {name}!\n"


def test_dry_run_and_unknown_skill_refs(tmp_path, store):
    root = skills_bundle(tmp_path)
    dry = materialize(store, load_bundle(root), dry_run=True)
    assert {ln.status for ln in dry.lines if ln.kind == "skills"} == {"new"}
    assert store.documents.find("artifacts", load_bundle(root).skills["greet"].id) is None
    write(root, "tasks/t.json", json.dumps([
        {"id": "agent", "type": "deploy_agent", "agent_name": "solver", "skills": ["ghost"]}]))
    with pytest.raises(ValidationError) as err:
        materialize(store, load_bundle(root))
    assert any("field 'skills': skill 'ghost' is not in this bundle (skills/: greet, pdf-tools) nor in the store"
               in p for p in err.value.problems)
