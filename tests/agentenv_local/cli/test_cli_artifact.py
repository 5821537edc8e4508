"""`agentenv artifact put|get|list` end to end: files and folders go in and come back byte for byte."""

from __future__ import annotations

import json
import os


def test_put_file_and_folder_get_them_back(project):
    blob = bytes(range(256)) * 40 + b"\r\n\x00end"
    (project.root / "data.bin").write_bytes(blob)
    out = project.cli("artifact", "put", "data.bin", "--id", "A").stdout
    assert f"Created file A v1 (1 file, {len(blob)} bytes)." in out

    tree = {"top.txt": b"top\n", "sub/deep/x.json": b'{"x": 1}', "sub/empty.txt": b""}
    for rel, data in tree.items():
        path = project.root / "folder" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    out = project.cli("artifact", "put", "folder", "--id", "B", "--description", "a folder").stdout
    assert "Created file_artifact_universe B v1 (3 files" in out

    project.cli("artifact", "get", "--id", "A", "--output-dir", "outA")
    assert (project.root / "outA" / "data.bin").read_bytes() == blob
    project.cli("artifact", "get", "--id", "B", "--output-dir", "outB")
    got = {str(p.relative_to(project.root / "outB")).replace(os.sep, "/"): p.read_bytes()
           for p in (project.root / "outB").rglob("*") if p.is_file()}
    assert got == tree

    record = json.loads(project.cli("artifact", "get", "--id", "B").stdout)
    assert record["id"] == "B" and record["version"] == 1
    assert record["body"]["type"] == "file_artifact_universe" and record["body"]["description"] == "a folder"

    listed = project.json("artifact", "list")
    assert sorted((a["id"], a["version"], a["type"], a["files"]) for a in listed) == [
        ("A", 1, "file", 1), ("B", 1, "file_artifact_universe", 3)]
    assert [a["id"] for a in project.json("artifact", "list", "--type", "file")] == ["A"]
    assert "ARTIFACT" in project.cli("artifact", "list").stdout


def test_versions_and_old_versions_stay_readable(project):
    project.write("f.txt", "one")
    project.cli("artifact", "put", "f.txt", "--id", "A")
    project.write("f.txt", "two")
    assert "A v2" in project.cli("artifact", "put", "f.txt", "--id", "A").stdout
    project.cli("artifact", "get", "--id", "A", "--version", "1", "--output-dir", "v1")
    project.cli("artifact", "get", "--id", "A", "--output-dir", "latest")
    assert (project.root / "v1" / "f.txt").read_text() == "one"
    assert (project.root / "latest" / "f.txt").read_text() == "two"


def test_missing_and_bad_input(project):
    proc = project.cli("artifact", "get", "--id", "nope", code=1)
    assert "nope not found" in proc.stderr and "artifact list" in proc.stderr
    proc = project.cli("artifact", "get", "--id", "nope", "--output-dir", "out", code=1)
    assert not (project.root / "out").exists()

    (project.root / "emptydir").mkdir()
    proc = project.cli("artifact", "put", "emptydir", "--id", "E", code=1)
    assert "no files" in proc.stderr
    project.cli("artifact", "put", "nothere.txt", "--id", "X", code=2)  # click: path does not exist
    assert project.stored()["documents"] == set()
