"""The env runtime image's tag follows agentenv-local's runtime dependencies as installed here, and nothing else
beside the process: a second venv or a plugin on sys.path that sees this checkout must find the same image (CI run
of stop 32: a process with one more distribution built its own runtime and pruned the one the CLI-agent images
were being built FROM)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from agentenv_local.entry_points import normalized_name
from sandboxes.podman import runtime_image


def _fake_distribution(site: Path, name: str, version: str, requires: tuple[str, ...] = ()) -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}",
             *(f"Requires-Dist: {r}" for r in requires)]
    (info / "METADATA").write_text("\n".join(lines) + "\n")


@pytest.fixture
def extra_site(tmp_path, monkeypatch) -> Path:
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    return site


def _pinned() -> dict[str, str]:
    return dict(line.split("==") for line in runtime_image.pins().split())


def test_pins_are_the_closure_of_the_project_dependencies():
    pinned = {normalized_name(name) for name in _pinned()}
    assert {"click", "pydantic", "pydantic-core", "duckdb", "mcp", "uvicorn", "textual", "orjson"} <= pinned
    # test tools and extras are beside this process but never in the image
    assert not pinned & {"pytest", "ruff", "mypy", "hatchling", "a2a-sdk", "ray", "agentenv-local", "pip"}


def test_a_distribution_outside_the_closure_changes_neither_the_pins_nor_the_tag(extra_site):
    before = runtime_image.runtime_digest({})
    _fake_distribution(extra_site, "agentenv-some-plugin", "1.0", requires=("click>=8",))
    assert "agentenv-some-plugin" in {d.metadata["Name"] for d in importlib.metadata.distributions()}
    assert runtime_image.runtime_digest({}) == before


def test_another_version_of_a_dependency_first_on_the_path_makes_another_tag(extra_site):
    before = runtime_image.runtime_digest({})
    _fake_distribution(extra_site, "orjson", "0.0.1")  # what this process would import now
    assert _pinned()["orjson"] == "0.0.1"
    assert runtime_image.runtime_digest({}) != before


def test_an_extra_only_requirement_is_left_out():
    assert runtime_image._requirement_names(
        ['anyio>=4', 'rich; extra == "cli"', 'uvloop>=0.19; sys_platform != "win32"', "Pydantic_Core==2"]
    ) == ["anyio", "uvloop", "pydantic-core"]
