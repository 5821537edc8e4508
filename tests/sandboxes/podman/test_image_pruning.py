"""Older automatic versions of an image are untagged when a newer one replaces them (a CLI-agent image is about
1 GB, and every source change makes a new one): real Podman builds of a tiny image, the provider's
prune_older_images, and ensure_agent_image's prune after a build."""

from __future__ import annotations

import asyncio
import secrets
from pathlib import Path
from typing import Any

import pytest

from agentenv_local.errors import AgentenvError
from agentenv_local.hosting.agents import cli_image
from agentenv_local.sandbox_api import SandboxSpec
from sandboxes.podman import images
from sandboxes.podman.engine import run_podman


def _version() -> str:
    return secrets.token_hex(8)  # what an automatic (digest) version looks like: 16 hex digits


def _build(name: str, version: str, base: str, context: Path, note: str) -> str:
    context.mkdir(parents=True, exist_ok=True)
    (context / "Containerfile").write_text(f"ARG BASE\nFROM ${{BASE}}\nLABEL probe.note={note}\n")
    return str(images.build(name, version, context, build_args={"BASE": base}, network=False)["ref"])


def _tags(name: str) -> set[str]:
    return {tag for row in images.list_images() if row["name"] == name for tag in row["tags"]}


@pytest.fixture
def probe_name() -> Any:
    """A fresh image name; every image named after it goes at the end (children first)."""
    name = f"prune-probe-{secrets.token_hex(3)}"
    yield name
    rows = [row for row in images.list_images() if (row["name"] or "").startswith(name)]
    for row in sorted(rows, key=lambda row: -len(row["name"])):
        for tag in row["tags"]:
            images.remove_image(tag, force=True)


def test_older_automatic_versions_go_but_not_a_named_one_or_one_a_container_runs(provider_factory, podman_base_image,
                                                                                 probe_name, tmp_path):
    provider = provider_factory()
    old_ref = _build(probe_name, _version(), podman_base_image, tmp_path / "old", "old")
    parent_ref = _build(probe_name, _version(), podman_base_image, tmp_path / "parent", "parent")
    child_ref = _build(f"{probe_name}-child", _version(), parent_ref, tmp_path / "child", "child")
    in_use_ref = _build(probe_name, _version(), podman_base_image, tmp_path / "in-use", "in-use")
    named_ref = _build(probe_name, "v1", podman_base_image, tmp_path / "named", "named")
    new_ref = _build(probe_name, _version(), podman_base_image, tmp_path / "new", "new")

    async def go() -> tuple[set[str], set[str], set[str]]:
        sandbox = await provider.create(SandboxSpec(name="in-use", mode="container", image=in_use_ref,
                                                    command=["sleep", "600"]))
        try:
            gone = set(provider.prune_older_images(new_ref))
            return gone, _tags(probe_name), _tags(f"{probe_name}-child")
        finally:
            await sandbox.terminate()

    gone, left, children = asyncio.run(go())
    # The parent's name goes too; Podman keeps its layers for the image built FROM it, which still runs.
    assert gone == {old_ref, parent_ref}
    assert left == {in_use_ref, named_ref, new_ref} and children == {child_ref}
    assert run_podman(["run", "--rm", child_ref, "true"], {}, timeout=120).returncode == 0
    assert provider.prune_older_images(new_ref) == [in_use_ref]  # no container runs it any more
    with pytest.raises(AgentenvError, match="not an agentenv image ref"):
        provider.prune_older_images("docker.io/library/debian:12")


def test_a_version_built_after_the_one_kept_stays(podman_base_image, probe_name, tmp_path):
    """Two checkouts (or venvs) of different sources on one machine each keep their own runtime: the older one's
    prune must not untag the newer one's image, or each would untag the other's in turn while it is built FROM."""
    import time

    from sandboxes.podman.runtime_image import prune_older

    older = _build(probe_name, _version(), podman_base_image, tmp_path / "older", "older")
    kept = _build(probe_name, _version(), podman_base_image, tmp_path / "kept", "kept")
    time.sleep(1.1)  # Podman's creation times are whole seconds
    newer = _build(probe_name, _version(), podman_base_image, tmp_path / "newer", "newer")
    assert prune_older(probe_name, kept) == [older]
    assert _tags(probe_name) == {kept, newer}
    assert prune_older(probe_name, newer) == [kept]


def test_a_version_handed_out_for_use_stays_a_while(podman_base_image, probe_name, tmp_path):
    """ensure_runtime_image and ensure_agent_image mark the ref they hand out (images.mark_used) before they look
    for it: until the build FROM it or the container of it has started, another process's prune leaves it."""
    from sandboxes.podman.runtime_image import prune_older

    in_use = _build(probe_name, _version(), podman_base_image, tmp_path / "in-use", "in-use")
    images.mark_used(in_use)
    kept = _build(probe_name, _version(), podman_base_image, tmp_path / "kept", "kept")
    assert prune_older(probe_name, kept) == []
    assert _tags(probe_name) == {in_use, kept}
    images._use_stamp(in_use).unlink()  # as if the grace had passed
    assert prune_older(probe_name, kept) == [in_use]


class _Provider:
    """The Podman provider with a runtime image of the test's own (a probe image), its prunes recorded."""

    def __init__(self, provider: Any, runtime: str) -> None:
        self.provider, self.runtime = provider, runtime
        self.pruned: list[str] = []

    def runtime_image(self, on_line: Any = None) -> str:
        return self.runtime

    def list_images(self) -> list[dict[str, Any]]:
        return list(self.provider.list_images())

    def build_image(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return dict(self.provider.build_image(*args, **kwargs))

    def prune_older_images(self, keep: str) -> list[str]:
        self.pruned.append(keep)
        return list(self.provider.prune_older_images(keep))


def test_a_new_agent_image_untags_the_one_it_replaces(provider_factory, podman_base_image, probe_name,
                                                      tmp_path, monkeypatch):
    """ensure_agent_image, after a build, prunes the agent image's older versions, then the runtime's."""
    runtime_name = f"{probe_name}-runtime"
    older_runtime = _build(runtime_name, _version(), podman_base_image, tmp_path / "rt-old", "rt-old")
    runtime = _build(runtime_name, _version(), podman_base_image, tmp_path / "rt", "rt")
    older = _build(probe_name, _version(), older_runtime, tmp_path / "older", "older")  # built FROM the older one
    provider = _Provider(provider_factory(), runtime)
    monkeypatch.setattr(cli_image, "cli_cache", lambda agent: tmp_path / "cache")
    monkeypatch.setattr(cli_image, "agent_image_name", lambda agent: probe_name)
    monkeypatch.setattr(cli_image, "containerfile", lambda agent: "ARG RUNTIME\nFROM ${RUNTIME}\n")
    monkeypatch.setattr(cli_image, "node_binary", lambda: Path("/bin/true"))
    monkeypatch.setattr(cli_image, "node_libraries", lambda node: [])
    monkeypatch.setattr(cli_image, "_copy_tree", lambda source, into, ignore=(): into.mkdir())
    assert _tags(runtime_name) == {older_runtime, runtime}

    built = cli_image.ensure_agent_image(provider, "codex")

    assert provider.pruned == [built, runtime]
    assert _tags(probe_name) == {built} and older != built
    assert _tags(runtime_name) == {runtime}


def test_two_processes_needing_one_missing_image_build_it_once(podman_base_image, probe_name, tmp_path):
    """Two processes that need the same image that is not there yet (two projects' first runs, the suite's
    parallel workers) build it once: the second waits for the machine-wide build lock, then finds it by its tag."""
    import json
    import subprocess
    import sys

    context = tmp_path / "context"
    context.mkdir()
    # a step that takes a moment, so the two builds would overlap without the lock
    (context / "Containerfile").write_text("ARG BASE\nFROM ${BASE}\nRUN sleep 1 && echo built > /probe\n")
    script = ("import json, sys; from sandboxes.podman import images; from pathlib import Path; "
              "print(json.dumps(images.build(sys.argv[1], sys.argv[2], Path(sys.argv[3]), "
              "build_args={'BASE': sys.argv[4]}, network=False)))")
    argv = [sys.executable, "-c", script, probe_name, _version(), str(context), podman_base_image]
    builders = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = []
    for builder in builders:
        out, err = builder.communicate(timeout=300)
        assert builder.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert sorted(result["built"] for result in results) == [False, True]
    assert results[0]["ref"] == results[1]["ref"] and results[0]["image_id"] == results[1]["image_id"]


def test_a_listing_that_races_a_removal_is_asked_again(tmp_path):
    """`podman images` fails with "image not known" when another process removes an image while it lists them
    (seen when the suite's workers build and prune images side by side): the listing is asked again. A stand-in
    podman fails the first two listings that way, then lists."""
    import json

    count = tmp_path / "count"
    fake = tmp_path / "podman"
    fake.write_text("#!/bin/sh\nn=$(cat " + str(count) + " 2>/dev/null || echo 0); echo $((n + 1)) > " + str(count) +
                    "\nif [ \"$n\" -lt 2 ]; then echo 'Error: reading image \"e50c\": locating image with ID \"e50c\": "
                    "image not known' >&2; exit 125; fi\necho '" +
                    json.dumps([{"Id": "abc", "Names": ["localhost/agentenv/x:1"], "Labels": {"agentenv.image": "x",
                                                                                         "agentenv.version": "1"}}]) +
                    "'\n")
    fake.chmod(0o755)
    rows = images.list_images({"podman": str(fake)})
    assert [(row["name"], row["version"], row["tags"]) for row in rows] == [("x", "1", ["localhost/agentenv/x:1"])]
    assert count.read_text().strip() == "3"
    count.write_text("-9")  # every listing fails from now on: the error is said, not hidden
    fake.write_text("#!/bin/sh\necho 'Error: something else' >&2\nexit 125\n")
    with pytest.raises(AgentenvError, match="something else"):
        images.list_images({"podman": str(fake)})


def test_our_listings_never_cross_our_removals(podman_base_image, probe_name, tmp_path):
    """A listing while another process removes images fails in Podman itself ("image not known"; measured: 7 of
    15 listings without a retry). Ours take turns under one machine-wide lock, so a listing with no second
    attempt succeeds every time while a thread builds and removes images beside it."""
    import threading

    done = threading.Event()
    failures: list[BaseException] = []

    def churn() -> None:
        try:
            for round_ in range(6):
                ref = _build(probe_name, _version(), podman_base_image, tmp_path / f"c{round_}", f"churn{round_}")
                assert images.remove_image(ref)
        except BaseException as exc:  # noqa: BLE001 -- reported by the test below
            failures.append(exc)
        finally:
            done.set()

    churner = threading.Thread(target=churn, name="image-churn")
    churner.start()
    listings = 0
    try:
        while not done.is_set():
            images.list_images(attempts=1)
            listings += 1
    finally:
        churner.join()
    assert not failures, [(repr(exc), getattr(exc, "problems", None)) for exc in failures]
    assert listings >= 2


def test_a_removal_waits_for_the_builds_in_flight(tmp_path):
    """A build's first step after FROM failed in CI while another process removed images (an OpenHands image at
    `COPY python/`, a probe image at `LABEL`): removals wait while any of our builds runs, and builds run side by
    side. A stand-in podman records that the removal ran."""
    import threading

    ran = tmp_path / "ran"
    fake = tmp_path / "podman"
    fake.write_text(f"#!/bin/sh\nif [ \"$1\" = images ]; then echo '[]'; else echo \"$@\" >> {ran}; fi\n")
    fake.chmod(0o755)
    removed, listed = threading.Event(), threading.Event()

    def remove() -> None:
        images.remove_image("localhost/agentenv/x:1", {"podman": str(fake)})
        removed.set()

    def list_them() -> None:
        if images.list_images({"podman": str(fake)}) == []:
            listed.set()

    with images.build_lock(images._REMOVALS_LOCK, shared=True):  # a build in flight ...
        with images.build_lock(images._REMOVALS_LOCK, shared=True):  # ... and another beside it
            remover = threading.Thread(target=remove)
            remover.start()
            assert not removed.wait(1.0) and not ran.exists()  # held back while they run
            # the removal waiting for them holds no listing back
            threading.Thread(target=list_them, daemon=True).start()
            assert listed.wait(30), "a listing waited for a removal that waits for a build"
    remover.join(timeout=30)
    assert removed.is_set() and ran.read_text().split() == ["rmi", "localhost/agentenv/x:1"]
