"""Finding bundles: the built-in examples (through the `bundles` entry-point group) and folders."""

from __future__ import annotations

import pytest

from agentenv_local.bundles import find_bundle, known_bundles
from agentenv_local.bundles.discovery import describe, is_bundle
from agentenv_local.errors import NotFoundError


def test_hello_is_known():
    hello = next(b for b in known_bundles() if b.name == "hello")
    assert hello.tasks == 1 and hello.package.startswith("agentenv-local ")
    assert hello.description.startswith("The smallest bundle")
    assert hello.to_dict()["path"] == str(hello.path)


def test_find_by_name_and_by_path(tmp_path, monkeypatch):
    folder, package = find_bundle("hello")
    assert folder.name == "hello" and is_bundle(folder) and package == "agentenv-local"

    (tmp_path / "b" / "tasks").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert find_bundle("./b") == ((tmp_path / "b").resolve(), None)
    assert find_bundle(str(tmp_path / "b")) == ((tmp_path / "b").resolve(), None)
    assert find_bundle("b") == ((tmp_path / "b").resolve(), None)  # a folder here wins over a name


def test_unknown_names_and_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(NotFoundError) as info:
        find_bundle("nosuch")
    assert "no bundle or folder named 'nosuch'" in info.value.message and "hello" in info.value.hint
    with pytest.raises(NotFoundError) as info:
        find_bundle("./nosuch")
    assert "no such folder" in info.value.message and "agentenv run" in info.value.hint


def test_describe_and_is_bundle(tmp_path):
    assert not is_bundle(tmp_path)
    (tmp_path / "evals").mkdir()
    assert is_bundle(tmp_path)
    assert describe(tmp_path) == ""
    (tmp_path / "README.md").write_bytes(b"\n\n## Title \xff here\nmore\n")
    assert describe(tmp_path) == "Title \ufffd here"
