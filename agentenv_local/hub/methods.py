"""The hub's own wire methods (`runner.*`, `envs.*`, `agents.*`) as one typed client surface.

    from agentenv_local.hub import HubMethods, connect

    with connect() as session:
        hub = HubMethods(session)
        run = hub.submit_run("t", options=RunOptions(sandbox="process"))
        hub.cancel_run(run["run_id"])

Each method sends exactly the request its wire name always took (the same positional/keyword split,
the same keys), through `Session.call`, so it works on the hub process itself and over the socket.
The names are listed in wire.HUB_METHODS; the hub refuses any other. `hub.*` (hello, status,
shutdown) is what a connection says before it is a session: hub/session.py and `agentenv down` send it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentenv_local.tasks.options import RunOptions

    from .session import Session

Record = dict[str, Any]  # a run, instance or decision record as the hub returns it


class HubMethods:
    """The typed calls of the hub's runner, env instances and agent instances, over one session."""

    def __init__(self, session: Session):
        self.session = session

    # -- runner.* -----------------------------------------------------------------------
    def submit_run(self, task_id: str, version: int | None = None, seed: dict | None = None,
                   group_id: str | None = None, options: RunOptions | None = None,
                   attach: bool = False, labels: dict | None = None) -> Record:
        """`runner.submit`: the queued run record. `attach`: the hub keeps the run going only while
        this connection is open (a closed one interrupts it). `labels` stay on the run (e.g. its eval)."""
        extra = {"labels": labels} if labels else {}  # only when given: a hub of an earlier version takes the rest
        return self.session.call("runner.submit", task_id=task_id, version=version, seed=seed,
                                 group_id=group_id, options=options, attach=attach, **extra)

    def resume_run(self, run_id: str, attach: bool = False) -> Record:
        """`runner.resume`: the run record, going again from its journal."""
        if attach:
            return self.session.call("runner.resume", run_id=run_id, attach=True)
        return self.session.call("runner.resume", run_id=run_id)  # the hub's default: not attached

    def cancel_run(self, run_id: str) -> Record:
        """`runner.cancel`: {"run_id", "status": "cancelling"}."""
        return self.session.call("runner.cancel", run_id=run_id)

    def review(self, review_id: str, decision: str) -> Record:
        """`runner.review`: decide a pending review ("continue" or "abort")."""
        return self.session.call("runner.review", review_id=review_id, decision=decision)

    def attach(self, run_ids: list[str]) -> bool:
        """`runner.attach`: tie these runs to this connection (closing it interrupts them)."""
        return bool(self.session.call("runner.attach", run_ids=run_ids))

    # -- envs.* -------------------------------------------------------------------------
    def deploy_env(self, env_id: str | None = None, version: int | None = None, gateway_mode: str | None = None,
                   resume: str | None = None, control_plane_auth: bool | None = None,
                   ttl_seconds: int | None = None) -> Record:
        """`envs.deploy`: the new (or resumed) instance record with its endpoints (`expires_at_utc` with a TTL)."""
        return self.session.call("envs.deploy", env_id=env_id, version=version, gateway_mode=gateway_mode,
                                 resume=resume, control_plane_auth=control_plane_auth, **_ttl(ttl_seconds))

    def env_instances(self, status: str | None = None) -> list[Record]:
        """`envs.instances`: instance records (only those in `status` when given)."""
        return list(self.session.call("envs.instances", status=status))

    def teardown_env(self, instance_id: str) -> Record:
        """`envs.teardown`: the instance record, stopped."""
        return self.session.call("envs.teardown", instance_id)

    def env_admin_token(self, instance_id: str) -> str | None:
        """`envs.admin_token`: the instance's control-plane credential (None when it has none)."""
        return self.session.call("envs.admin_token", instance_id)

    def bind_env_role(self, instance_id: str, role: str) -> str:
        """`envs.bind_role`: a token that binds a caller to `role` on the instance's gateway."""
        return self.session.call("envs.bind_role", instance_id, role)

    def advance_env_clock(self, instance_id: str, seconds: float | str) -> Record:
        """`envs.advance_clock`: move a stepped or frozen clock forward; the clock's state after."""
        return self.session.call("envs.advance_clock", instance_id=instance_id, seconds=seconds)

    # -- agents.* -----------------------------------------------------------------------
    def deploy_agent(self, agent_id: str, version: int | None = None, runtime: str = "in_hub",
                     config: dict | None = None, ttl_seconds: int | None = None) -> Record:
        """`agents.deploy`: the instance record with its A2A URL (`expires_at_utc` with a TTL)."""
        return self.session.call("agents.deploy", agent_id=agent_id, version=version, runtime=runtime,
                                 config=config, **_ttl(ttl_seconds))

    def agent_instances(self, status: str | None = None) -> list[Record]:
        """`agents.instances`: agent instance records (only those in `status` when given)."""
        return list(self.session.call("agents.instances", status=status))

    def teardown_agent(self, instance_id: str) -> Record:
        """`agents.teardown`: the instance record, stopped."""
        return self.session.call("agents.teardown", instance_id)


def _ttl(ttl_seconds: int | None) -> dict[str, int]:
    """`ttl_seconds` on the wire only when given: a deploy without one sends the request it always sent."""
    return {} if ttl_seconds is None else {"ttl_seconds": ttl_seconds}
