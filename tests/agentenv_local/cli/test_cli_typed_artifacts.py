"""`agentenv artifact cli|environment|environment-universe put|get` through the console script and a real store:
typed artifacts pin their child artifacts, come back byte for byte, and bad input writes nothing."""

from __future__ import annotations

import json
import subprocess


def _tree(root, files):
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def test_cli_put_get_roundtrip_and_the_entrypoint_runs(project):
    _tree(project.root / "tool", {"bin/greet": b"#!/bin/sh\necho \"hello from $(basename $0)\"\n",
                                  "share/readme.txt": b"extra file\n"})
    out = project.cli("artifact", "cli", "put", "--id", "greet-cli", "--cli-dir", "tool", "--entrypoint", "bin/greet",
                      "--command-name", "greet").stdout
    assert "Created cli greet-cli v1: command_name=greet entrypoint=bin/greet (2 files in greet-cli__files v1)" in out
    out = project.cli("artifact", "cli", "get", "--id", "greet-cli", "--output-dir", "out").stdout
    entry = project.root / "out" / "bin" / "greet"
    assert f"Entrypoint: {entry} (command greet)" in out
    assert (project.root / "out" / "share" / "readme.txt").read_bytes() == b"extra file\n"
    assert subprocess.run([str(entry)], capture_output=True, text=True, check=True).stdout == "hello from greet\n"
    record = json.loads(project.cli("artifact", "get", "--id", "greet-cli").stdout)
    assert record["body"]["type"] == "cli" and record["body"]["cli_files_id"] == "greet-cli__files"
    assert sorted(record["body"]["files"]) == ["bin/greet", "share/readme.txt"]


def test_cli_put_refuses_a_missing_entrypoint_and_a_bad_command_name_writing_nothing(project):
    _tree(project.root / "tool", {"bin/greet": b"#!/bin/sh\n"})
    before = project.stored()
    err = project.cli("artifact", "cli", "put", "--id", "x", "--cli-dir", "tool", "--entrypoint", "bin/nope",
                      "--command-name", "../evil", code=1).stderr
    assert "command_name '../evil' must be a plain name" in err
    assert "entrypoint 'bin/nope' is not one of its files (bin/greet)" in err
    assert project.stored()["documents"] == before["documents"]
    err = project.cli("artifact", "cli", "get", "--id", "nothing", "--output-dir", "o", code=1).stderr
    assert "nothing" in err


def test_environment_and_universe_put_get_pin_versions(project):
    (project.root / "crm.json").write_text('{"accounts": [1]}')
    (project.root / "mail.json").write_text('{"emails": []}')
    (project.root / "notes.md").write_text("about this universe")
    out = project.cli("artifact", "environment", "put", "crm.json", "--id", "crm-data", "--description", "crm",
                      "--environment-name", "crm").stdout
    assert "Created environment crm-data v1: environment_name=crm" in out and "pinned file: crm-data__file:1" in out
    project.cli("artifact", "environment", "put", "mail.json", "--id", "mail-data", "--description", "mail",
                "--environment-name", "mail")
    (project.root / "crm.json").write_text('{"accounts": [1, 2]}')
    project.cli("artifact", "environment", "put", "crm.json", "--id", "crm-data", "--description", "crm v2",
                "--environment-name", "crm")
    out = project.cli("artifact", "environment-universe", "put", "--id", "world", "--environment-artifact",
                      "crm-data:1", "--environment-artifact", "mail-data", "--metadata", "notes=notes.md").stdout
    assert "environment_artifacts=['crm-data:1', 'mail-data:1'] metadata=['notes']" in out
    project.cli("artifact", "environment-universe", "get", "--id", "world", "--output-dir", "w")
    got = {p.relative_to(project.root / "w").as_posix(): p.read_text() for p in (project.root / "w").rglob("*")
           if p.is_file()}
    assert got == {"crm/crm.json": '{"accounts": [1]}', "mail/mail.json": '{"emails": []}',
                   "metadata/notes/notes.md": "about this universe"}  # crm pinned at v1, not the newer v2
    project.cli("artifact", "environment", "get", "--id", "crm-data", "--output-dir", "e")
    assert (project.root / "e" / "crm.json").read_text() == '{"accounts": [1, 2]}'
    listed = {a["id"]: a["type"] for a in project.json("artifact", "list")}
    assert listed["world"] == "environment_universe" and listed["crm-data"] == "environment"
    assert listed["world__metadata__notes"] == "file"


def test_universe_put_refuses_bad_members_writing_nothing(project):
    (project.root / "crm.json").write_text("{}")
    project.cli("artifact", "put", "crm.json", "--id", "plain-file")
    project.cli("artifact", "environment", "put", "crm.json", "--id", "a", "--description", "d",
                "--environment-name", "crm")
    project.cli("artifact", "environment", "put", "crm.json", "--id", "b", "--description", "d",
                "--environment-name", "crm")
    before = project.stored()
    err = project.cli("artifact", "environment-universe", "put", "--id", "u", "--environment-artifact", "plain-file",
                      code=1).stderr
    assert "artifact 'plain-file' v1 is a 'file' artifact, not 'environment'" in err
    err = project.cli("artifact", "environment-universe", "put", "--id", "u", "--environment-artifact", "a",
                      "--environment-artifact", "b", code=1).stderr
    assert "environments 'a' and 'b' both seed 'crm'" in err
    err = project.cli("artifact", "environment-universe", "put", "--id", "u", "--environment-artifact", "a:7",
                      code=1).stderr
    assert "artifact 'a' v7 not found" in err
    err = project.cli("artifact", "environment", "put", "crm.json", "--id", "c", "--description", "d",
                      "--environment-name", "no/slash", code=1).stderr
    assert "environment_name 'no/slash' must name one server of an env" in err
    assert project.stored() == before
    err = project.cli("artifact", "environment-universe", "get", "--id", "a", "--output-dir", "o", code=1).stderr
    assert "'a' v1 is a 'environment' artifact, not 'environment_universe'" in err


SKILL_MD = b"---\nname: pdf-tools\ndescription: Fill and merge PDF forms.\n---\nRun scripts/fill.py.\n"


def test_skill_put_get_keeps_every_file_of_the_folder(project):
    _tree(project.root / "pdf-tools", {"SKILL.md": SKILL_MD, "scripts/fill.py": b"print('filled')\n",
                                       "reference/forms.md": b"# forms\n"})
    out = project.cli("artifact", "skill", "put", "--id", "@local/kit/pdf-tools", "--skill-dir", "pdf-tools").stdout
    assert "Created skill @local/kit/pdf-tools v1: name=pdf-tools (3 files in @local/kit/pdf-tools__files v1)" in out
    project.cli("artifact", "skill", "get", "--id", "@local/kit/pdf-tools", "--output-dir", "back")
    got = {p.relative_to(project.root / "back").as_posix(): p.read_bytes()
           for p in (project.root / "back").rglob("*") if p.is_file()}
    assert got == {"SKILL.md": SKILL_MD, "scripts/fill.py": b"print('filled')\n", "reference/forms.md": b"# forms\n"}
    before = project.stored()
    err = project.cli("artifact", "skill", "put", "--id", "@local/kit/wrong-name", "--skill-dir", "pdf-tools",
                      code=1).stderr
    assert "SKILL.md frontmatter 'name' 'pdf-tools' must be 'wrong-name'" in err
    assert project.stored()["documents"] == before["documents"]
