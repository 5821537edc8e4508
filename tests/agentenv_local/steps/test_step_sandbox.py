"""deploy_sandbox and teardown_sandboxes with the real process provider and store."""

from __future__ import annotations

import asyncio

import pytest

from agentenv_local.errors import NotFoundError, StepError


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_deploy_records_in_state_and_store_and_teardown_terminates(run):
    step = run.step({"id": "sb", "type": "deploy_sandbox", "sandbox_name": "work", "ttl_seconds": 600,
                     "env_vars": {"X": "1"}, "exposed_ports": [8765], "metadata": {"owner": "me"}})
    run.execute(step)
    [record] = run.state["deployed_sandboxes"]
    assert record["sandbox_name"] == "work" and record["sandbox_type"] == "process"
    assert record["sandbox_mode"] == "vm" and record["step_id"] == "sb" and record["network_policy"] is None
    assert record["tunnel_urls"] == {"8765": "http://127.0.0.1:8765"}
    assert record["created_at_utc"].endswith("Z") and record["expires_at_utc"] > record["created_at_utc"]
    stored = run.store.records.get("sandboxes", record["sandbox_id"])["body"]
    assert stored["status"] == "running" and stored["run_id"] == run.run_id and stored["metadata"] == {"owner": "me"}

    sandbox = run.sandbox("work")
    assert asyncio.run(sandbox.exec("echo $X")).stdout == "1\n"

    run.teardown(step)
    assert record["sandbox_id"] in run.metadata["torn_down_sandbox_ids"]
    assert run.store.records.get("sandboxes", record["sandbox_id"])["body"]["status"] == "terminated"
    assert not sandbox.root.exists()
    with pytest.raises(NotFoundError):
        asyncio.run(run.services.sandbox_provider("process").get(record["sandbox_id"]))
    run.teardown(step)  # a second teardown is a no-op
    assert run.metadata["torn_down_sandbox_ids"] == [record["sandbox_id"]]


def test_unsupported_mode_names_step_provider_and_alternative(run):
    step = run.step({"id": "box", "type": "deploy_sandbox", "sandbox_mode": "container", "image": "alpine"})
    with pytest.raises(StepError) as info:
        run.execute(step)
    err = info.value
    assert "'box'" in err.message and "'process'" in err.message and "'container'" in err.message
    assert "sandbox_mode 'vm'" in err.hint
    assert run.state["deployed_sandboxes"] == []


def test_network_isolation_is_refused_by_the_process_provider(run):
    step = run.step({"id": "net", "type": "deploy_sandbox", "network_policy": {"mode": "none"}})
    with pytest.raises(StepError, match="cannot enforce network isolation"):
        run.execute(step)
    ok = run.step({"id": "open", "type": "deploy_sandbox", "network_policy": {"mode": "allow_all"}})
    run.execute(ok)
    assert run.state["deployed_sandboxes"][0]["network_policy"]["mode"] == "allow_all"


def test_config_problems_and_field_checks(run):
    assert run.step({"id": "c", "type": "deploy_sandbox", "sandbox_mode": "container"}).config_problems() == [
        "image: a container sandbox needs an image"]
    problems = run.step({"id": "p", "type": "deploy_sandbox", "exposed_ports": [0],
                         "network_policy": {"mode": "allowlist", "allow_hosts": ["*"]}}).config_problems()
    assert any(p.startswith("exposed_ports") for p in problems)
    assert any(p.startswith("network_policy.allow_hosts") for p in problems)
    with pytest.raises(ValueError):
        run.step({"id": "t", "type": "deploy_sandbox", "ttl_seconds": 10})
    with pytest.raises(ValueError):
        run.step({"id": "t", "type": "deploy_sandbox", "no_such_field": 1})


def test_default_sandbox_type_comes_from_config(run, config):
    config.values["sandbox"] = {"default": "no-such-provider"}
    with pytest.raises(Exception, match="no-such-provider"):
        run.execute(run.step({"id": "sb", "type": "deploy_sandbox"}))


def test_two_steps_cannot_deploy_the_same_name(deployed):
    with pytest.raises(StepError, match="already deployed"):
        deployed.execute(deployed.step({"id": "sb2", "type": "deploy_sandbox"}))


def test_teardown_sandboxes_named_and_all(run):
    for name in ("a", "b", "c"):
        run.execute(run.step({"id": f"deploy-{name}", "type": "deploy_sandbox", "sandbox_name": name}))
    roots = {name: run.sandbox(name).root for name in ("a", "b", "c")}
    bg = asyncio.run(run.sandbox("a").exec("nohup sleep 300 >/dev/null 2>&1 & echo $!")).stdout.strip()

    early = run.step({"id": "early", "type": "teardown_sandboxes", "sandbox_names": ["a", "ghost"]})
    assert early.fail_task_on_error is False
    run.execute(early)
    a_id = run.record("a")["sandbox_id"]
    assert run.metadata["torn_down_sandbox_ids"] == [a_id]
    assert not roots["a"].exists() and roots["b"].exists()
    assert run.store.records.get("sandboxes", a_id)["body"]["terminated_by_step_id"] == "early"
    assert not _alive(int(bg))

    with pytest.raises(StepError, match="no sandbox named 'a'"):
        asyncio.run(run.ctx(early).sandbox("a"))

    run.execute(run.step({"id": "rest", "type": "teardown_sandboxes"}))
    assert not roots["b"].exists() and not roots["c"].exists()
    assert len(run.metadata["torn_down_sandbox_ids"]) == 3
    run.teardown()  # the deploy steps' own teardown skips what is gone
    assert len(run.metadata["torn_down_sandbox_ids"]) == 3


def test_teardown_sandboxes_must_not_fail_the_task(run):
    step = run.step({"id": "t", "type": "teardown_sandboxes", "fail_task_on_error": True})
    assert step.config_problems() == [
        "fail_task_on_error: must stay false for teardown_sandboxes (teardown is best effort; "
        "the run's own teardown retries whatever is left)"]
