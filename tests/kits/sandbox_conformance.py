"""What every sandbox provider must do, written once (taken from what the process and Podman tests check).

A test module subclasses `SandboxConformance` and gives it a `target` fixture: a `Target` whose `make()` returns a
provider on the test's state dir (called again, a fresh provider object on the same state dir) and whose `spec()`
makes a SandboxSpec with the provider's test defaults. Every sandbox a test makes is terminated by the kit.

    class TestProcess(SandboxConformance):
        @pytest.fixture
        def target(self, tmp_path):
            return Target(lambda: ProcessSandboxProvider(tmp_path / "state"))
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

from agentenv_local.errors import AgentenvError, NotFoundError, StepError
from agentenv_local.sandbox_api import Sandbox, SandboxProvider, SandboxSpec

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


@dataclass
class Target:
    make: Callable[[], SandboxProvider]
    spec_defaults: dict[str, Any] = field(default_factory=dict)
    made: list[Sandbox] = field(default_factory=list)

    def spec(self, **kw: Any) -> SandboxSpec:
        return SandboxSpec(**{"name": "box", **self.spec_defaults, **kw})

    def create(self, provider: SandboxProvider | None = None, **kw: Any) -> Sandbox:
        sandbox = run((provider or self.make()).create(self.spec(**kw)))
        self.made.append(sandbox)
        return sandbox

    def cleanup(self) -> None:
        for sandbox in self.made:
            run(sandbox.terminate())


class SandboxConformance:
    """The provider conformance suite; see the module docstring."""

    @pytest.fixture(autouse=True)
    def _terminate_what_was_made(self, target: Target) -> Iterator[None]:
        yield
        target.cleanup()

    def test_exec_output_exit_code_and_env(self, target: Target, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
        sandbox = target.create(env_vars={"GREETING": "hi"})
        result = run(sandbox.exec("echo $GREETING $EXTRA; echo oops >&2; exit 3", env={"EXTRA": "there"}))
        assert (result.exit_code, result.stdout, result.stderr) == (3, "hi there\n", "oops\n")
        assert not result.ok and not result.timed_out
        argv = run(sandbox.exec(["printf", "%s|", "a b", "$HOME"]))
        assert argv.ok and argv.stdout == "a b|$HOME|"  # a list is argv: no shell
        assert run(sandbox.exec(["no-such-command-xyz"])).exit_code == 127
        env = run(sandbox.exec("env"))
        assert "sk-should-not-leak" not in env.stdout and "PATH=" in env.stdout

    def test_exec_cwd(self, target: Target) -> None:
        sandbox = target.create()
        run(sandbox.write_file("/app/sub/f.txt", b"1"))
        assert run(sandbox.exec("ls", cwd="/app/sub")).stdout == "f.txt\n"
        assert run(sandbox.exec("ls", cwd="sub")).stdout == "f.txt\n"
        assert run(sandbox.exec("cat sub/f.txt")).stdout == "1"  # the default cwd is /app
        # a missing working directory fails: process and bwrap raise NotFoundError, podman's command fails
        try:
            missing = run(sandbox.exec("ls", cwd="/app/nope"))
        except NotFoundError:
            pass
        else:
            assert not missing.ok

    def test_timeout(self, target: Target) -> None:
        sandbox = target.create()
        result = run(sandbox.exec("echo started; sleep 60", timeout=0.5))
        assert result.timed_out and not result.ok
        assert "started" in result.stdout
        assert run(sandbox.exec(["echo", "still here"])).stdout == "still here\n"

    def test_commands_and_files_meet_in_app(self, target: Target) -> None:
        sandbox = target.create()
        run(sandbox.write_file("/app/dir/a.txt", b"alpha"))
        run(sandbox.write_file("rel.bin", bytes(range(256))))
        assert run(sandbox.exec(["cat", "/app/dir/a.txt"])).stdout == "alpha"
        assert run(sandbox.exec("echo made > /app/dir/made.txt")).ok
        assert run(sandbox.read_file("dir/made.txt")) == b"made\n"
        assert run(sandbox.read_file("/app/rel.bin")) == bytes(range(256))
        assert run(sandbox.list_files("/app")) == ["dir/a.txt", "dir/made.txt", "rel.bin"]
        assert run(sandbox.list_files("dir")) == ["a.txt", "made.txt"]
        assert run(sandbox.list_files("/app/missing")) == []
        assert run(sandbox.exists("/app/dir", "dir")) and not run(sandbox.exists("dir", "file"))
        assert run(sandbox.exists("rel.bin", "file")) and run(sandbox.exists("/app/rel.bin"))
        assert not run(sandbox.exists("/app/nope"))
        with pytest.raises(NotFoundError):
            run(sandbox.read_file("/app/nope.txt"))
        run(sandbox.write_file("/app/dir/a.txt", b"replaced"))
        assert run(sandbox.exec(["cat", "/app/dir/a.txt"])).stdout == "replaced"

    def test_host_never_follows_a_link_in_app(self, target: Target, tmp_path: Path) -> None:
        outside = tmp_path / "outside"
        outside.mkdir()
        (outside / "secret.txt").write_text("secret")
        sandbox = target.create()
        assert run(sandbox.exec(f"ln -s {outside} /app/link && ln -s {outside}/secret.txt /app/file-link")).ok
        for path in ("/app/link/secret.txt", "link/new.txt"):
            with pytest.raises(StepError, match="'link' is a symbolic link"):
                run(sandbox.read_file(path))
            with pytest.raises(StepError, match="'link' is a symbolic link"):
                run(sandbox.write_file(path, b"no"))
        with pytest.raises(StepError, match="symbolic link"):
            run(sandbox.write_file("/app/file-link", b"no"))
        with pytest.raises(StepError, match="symbolic link"):
            run(sandbox.read_file("/app/file-link"))
        assert (outside / "secret.txt").read_text() == "secret" and sorted(p.name for p in outside.iterdir()) == [
            "secret.txt"]

    def test_found_again_by_a_fresh_provider_object_and_listed(self, target: Target) -> None:
        sandbox = target.create(env_vars={"WHO": "first"}, run_id="run-conf")
        run(sandbox.write_file("/app/mark", b"from the first object"))
        fresh = target.make()
        again = run(fresh.get(sandbox.sandbox_id))
        assert again.sandbox_id == sandbox.sandbox_id and again.spec.name == "box"
        assert run(again.exec("cat /app/mark; echo; echo $WHO")).stdout == "from the first object\nfirst\n"
        rows = {r["sandbox_id"]: r for r in run(fresh.list())}
        assert rows[sandbox.sandbox_id]["sandbox_type"] == fresh.name
        assert rows[sandbox.sandbox_id]["run_id"] == "run-conf"

    def test_terminate_is_idempotent_and_the_sandbox_is_gone(self, target: Target) -> None:
        provider = target.make()
        sandbox = target.create(provider)
        run(sandbox.terminate())
        run(sandbox.terminate())  # twice is fine
        with pytest.raises(NotFoundError):
            run(provider.get(sandbox.sandbox_id))
        with pytest.raises(NotFoundError):
            run(target.make().get(sandbox.sandbox_id))
        assert run(provider.terminate(sandbox.sandbox_id)) is False
        assert sandbox.sandbox_id not in {r["sandbox_id"] for r in run(provider.list())}
        with pytest.raises(AgentenvError):
            run(sandbox.exec("true"))

    def test_terminate_by_id(self, target: Target) -> None:
        provider = target.make()
        sandbox = target.create(provider)
        assert run(target.make().terminate(sandbox.sandbox_id)) is True
        with pytest.raises(NotFoundError):
            run(provider.get(sandbox.sandbox_id))

    def test_unknown_and_malformed_ids_are_not_found(self, target: Target) -> None:
        provider = target.make()
        for bad in (f"{provider.name}-000000000000", "../etc", f"{provider.name}-../../x", ""):
            with pytest.raises(NotFoundError):
                run(provider.get(bad))
            assert run(provider.terminate(bad)) is False
