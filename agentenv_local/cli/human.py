"""`agentenv human`: answer, from a terminal, the questions human agents of live runs wait on.

A human agent is one a run deployed with `deploy_agent` `"a2a_agent_id": "human"` (or registered with
`deploy_human_agent`, or any agent whose card advertises `urn:agentenv-local:human/v1`). Each message it gets
waits as an open question until someone answers it here (or over its `/ext/human/reply` route).
"""

from __future__ import annotations

import json
from typing import Any

import click

from agentenv_local.errors import AgentenvError, ConflictError, NotFoundError

from ._common import echo_json, session

LIVE = ("running", "queued")
HTTP_TIMEOUT_S = 10.0


@click.group()
def human():
    """Answer the questions human agents of live runs are waiting on."""


@human.command("pending")
@click.argument("run_id", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def pending(run_id, as_json):
    """The open questions of the human agents of live runs (of RUN only, when given; a unique prefix works)."""
    with session() as s:
        runs = [_live_run(s, run_id)] if run_id else _running_runs(s)
        found = []
        for run in runs:
            for agent in _human_agents(s, run, required=bool(run_id)):
                questions = _pending_of(agent, strict=bool(run_id))
                found += [{"run_id": run["run_id"], "agent_name": agent["agent_name"], **q} for q in questions]
    found.sort(key=lambda q: q.get("asked_at") or "")
    if as_json:
        echo_json(found)
        return
    if not found:
        click.echo(f"No question is waiting in run {runs[0]['run_id']}." if run_id else
                   "No question is waiting (no running run has a human agent with an open question).")
        return
    for q in found:
        click.echo(f"run {q['run_id']}  agent {q['agent_name']}  task {q['task_id']}  asked {q.get('asked_at', '?')}")
        for entry in q.get("conversation", [])[:-1]:
            click.echo(f"    {_who(entry)}: {_one_line(entry)}")
        click.echo(f"  > {_one_line(q)}")
        click.echo(f"  answer with: agentenv human reply {q['run_id']} --agent {q['agent_name']} --message '...'"
                   " [--end]\n")


@human.command("reply")
@click.argument("run_id")
@click.option("--agent", "agent_name", help="The human agent to answer as (needed when the run has several).")
@click.option("--message", "-m", help="The answer (without it, read from stdin).")
@click.option("--data", "data_json", help="A JSON object sent along as a data part.")
@click.option("--end", "end", is_flag=True, help="End the conversation with this answer.")
def reply(run_id, agent_name, message, data_json, end):
    """Answer the oldest open question of RUN's human agent (a unique run id prefix works)."""
    data = None
    if data_json is not None:
        try:
            data = json.loads(data_json)
        except ValueError as exc:
            raise click.BadParameter(f"not JSON: {exc}", param_hint="--data") from None
        if not isinstance(data, dict):
            raise click.BadParameter("must be a JSON object", param_hint="--data")
    with session() as s:
        run = _live_run(s, run_id)
        agents = _human_agents(s, run)
        if agent_name:
            chosen = [a for a in agents if a["agent_name"] == agent_name]
            if not chosen:
                raise NotFoundError(f"run {run['run_id']} has no human agent named {agent_name!r}",
                                    hint="its human agents: " + ", ".join(a["agent_name"] for a in agents))
            agents = chosen
        waiting = [(a, q) for a in agents for q in _pending_of(a, strict=True)]
    if not waiting:
        names = ", ".join(a["agent_name"] for a in agents)
        raise NotFoundError(f"nothing is pending: no question of {names} in run {run['run_id']} waits for an answer",
                            hint="the question may not have been asked yet; wait a moment and check with "
                                 f"`agentenv human pending {run['run_id']}`")
    if len({a["agent_name"] for a, _ in waiting}) > 1:
        names = ", ".join(sorted({a["agent_name"] for a, _ in waiting}))
        raise AgentenvError(f"several human agents of run {run['run_id']} have open questions ({names})",
                            hint="pick one with --agent NAME")
    agent, question = min(waiting, key=lambda aq: aq[1].get("asked_at") or "")
    if message is None:
        # "-": the same text stdin click.get_text_stream gave (deprecated in click 8.5), left open on exit
        with click.open_file("-") as stdin:
            if stdin.isatty():
                click.echo(f"{agent['agent_name']} was asked: {question.get('text', '')}", err=True)
                click.echo("Type the answer; end it with Ctrl-D on an empty line.", err=True)
            message = stdin.read()
        message = message.removesuffix("\n")
    if not message and not data and not end:
        raise AgentenvError("the answer is empty", hint="give --message TEXT (or pipe it on stdin), or --end")
    body: dict[str, Any] = {"task_id": question["task_id"], "text": message}
    if data is not None:
        body["data"] = data
    if end:
        body["end_conversation"] = True
    _call(agent, "reply", body)
    click.echo(f"answered {agent['agent_name']}'s question (task {question['task_id']}) in run {run['run_id']}"
               + (" and ended the conversation" if end else ""))


@human.command("show")
@click.argument("run_id")
@click.option("--agent", "agent_name", help="Only this human agent.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def show(run_id, agent_name, as_json):
    """The conversations of RUN's human agents (for a finished run: the recorded prompt turns)."""
    with session() as s:
        run = s.store.runs.get(s.store.runs.resolve(run_id))
        agents = _human_agents(s, run)
    if agent_name:
        agents = [a for a in agents if a["agent_name"] == agent_name]
        if not agents:
            raise NotFoundError(f"run {run['run_id']} has no human agent named {agent_name!r}")
    if not agents:
        raise NotFoundError(f"run {run['run_id']} has no human agent",
                            hint='deploy one with {"type": "deploy_agent", "a2a_agent_id": "human", ...}')
    live = run["status"] in LIVE and any(not a.get("torn_down") for a in agents)
    if live:
        shown = {a["agent_name"]: _call(a, "conversation").get("conversations", {})
                 for a in agents if not a.get("torn_down")}
        if as_json:
            echo_json(shown)
            return
        for name, conversations in shown.items():
            if not conversations:
                click.echo(f"{name}: no message yet")
            for context_id, entries in conversations.items():
                click.echo(f"{name} (context {context_id}):")
                for entry in entries:
                    status = entry.get("status")
                    click.echo(f"  {_who(entry)}: {_one_line(entry)}"
                               + (f"   [{status}]" if status and status != "answered" else ""))
        return
    context = _context(s=None, run=run)
    names = {a["agent_name"] for a in agents}
    responses = [r for r in context.get("prompt_responses") or []
                 if r.get("agent_name") in names or any("user_reply" in t for t in r.get("turns") or [])]
    if as_json:
        echo_json(responses)
        return
    click.echo(f"run {run['run_id']} is {run['status']}; its human agents are gone. The recorded turns:")
    if not responses:
        click.echo("  (none)")
    for r in responses:
        click.echo(f"prompt {r.get('prompt_id')} (agent {r.get('agent_name')}):")
        for t in r.get("turns") or []:
            click.echo(f"  [{t.get('turn')}] prompt:   {_indented(t.get('prompt'))}")
            click.echo(f"      response: {_indented(t.get('response'))}")
            if "user_reply" in t:
                click.echo(f"      reply:    {_indented(t['user_reply'])}"
                           + ("   [ended]" if t.get("ended_by_user") else ""))


# --- helpers ------------------------------------------------------------------------------------------------

def _running_runs(s) -> list[dict]:
    from agentenv_local.query import Query

    rows = s.store.runs.list(Query("runs").where("status", "eq", "running").limit(1000))
    return [s.store.runs.get(r["run_id"]) for r in rows]


def _live_run(s, run_id: str) -> dict:
    run = s.store.runs.get(s.store.runs.resolve(run_id))
    if run["status"] not in LIVE:
        raise ConflictError(f"run {run['run_id']} is {run['status']}, not running: nobody waits for an answer",
                            hint=f"see what was said with `agentenv human show {run['run_id']}`")
    return run


def _context(s, run: dict) -> dict:
    """The run's state: the final context once it ended, else what its journal last recorded."""
    context = run.get("context") or {}
    if run["status"] in LIVE and s is not None:
        journal = s.store.runs.journal(run["run_id"])
        if journal:
            from agentenv_local.tasks.journal import journal_state

            context = journal_state(journal) or context
    return context


def _is_human(record: dict) -> bool:
    if record.get("human") or record.get("a2a_agent_id") == "human":
        return True
    from agentenv_local.agents.human import HUMAN_V1

    card = record.get("a2a_card") or {}
    return any(isinstance(e, dict) and e.get("uri") == HUMAN_V1
               for e in (card.get("capabilities") or {}).get("extensions") or [])


def _human_agents(s, run: dict, *, required: bool = True) -> list[dict]:
    records = _context(s, run).get("deployed_agents") or []
    agents = [r for r in records if _is_human(r)]
    if run["status"] in LIVE:
        agents = [a for a in agents if not a.get("torn_down")]
        if not agents and required:
            raise NotFoundError(f"run {run['run_id']} has no human agent (yet)",
                                hint='a task deploys one with {"type": "deploy_agent", "a2a_agent_id": "human", '
                                     '"agent_name": "person"}; if it does, its deploy step may not have finished')
    return agents


def _endpoint(agent: dict, op: str) -> str:
    from agentenv_local.agents.human import (
        CONVERSATION_PATH,
        HUMAN_V1,
        PENDING_PATH,
        REPLY_PATH,
    )

    default = {"pending": PENDING_PATH, "reply": REPLY_PATH, "conversation": CONVERSATION_PATH}[op]
    for ext in ((agent.get("a2a_card") or {}).get("capabilities") or {}).get("extensions") or []:
        if isinstance(ext, dict) and ext.get("uri") == HUMAN_V1:
            method = ((ext.get("params") or {}).get("methods") or {}).get(op) or {}
            return method.get("endpoint") or default
    return default


def _call(agent: dict, op: str, body: dict | None = None) -> dict:
    import httpx2

    url = agent["a2a_url"].rstrip("/") + _endpoint(agent, op)
    try:
        with httpx2.Client(timeout=HTTP_TIMEOUT_S) as http:
            answer = http.post(url, json=body) if op == "reply" else http.get(url)
    except httpx2.HTTPError as exc:
        raise AgentenvError(f"human agent {agent['agent_name']!r} at {agent['a2a_url']} did not answer: {exc}",
                            hint="its run may have just ended; see `agentenv runs list`") from None
    try:
        payload = answer.json()
    except ValueError:
        payload = None
    if answer.status_code >= 400:
        detail = payload.get("detail") if isinstance(payload, dict) else answer.text[:300]
        if answer.status_code == 404 and op != "reply" and not isinstance(payload, dict):
            detail = f"{url} is not served: the agent does not speak urn:agentenv-local:human/v1"
        error = ConflictError if answer.status_code == 409 else AgentenvError
        raise error(f"human agent {agent['agent_name']!r}: {detail}")
    if not isinstance(payload, dict):
        raise AgentenvError(f"human agent {agent['agent_name']!r}: {url} did not answer a JSON object")
    return payload


def _pending_of(agent: dict, *, strict: bool) -> list[dict]:
    """The agent's open questions; an agent that cannot be asked is an error when `strict`, else skipped."""
    try:
        return list(_call(agent, "pending").get("pending") or [])
    except AgentenvError as exc:
        if strict:
            raise
        click.echo(f"warning: {exc.message}", err=True)
        return []


def _indented(text: str | None) -> str:
    return (text or "").replace("\n", "\n" + " " * 16)


def _who(entry: dict) -> str:
    return "human" if entry.get("role") == "human" else "asked"


def _one_line(entry: dict) -> str:
    text = (entry.get("text") or "").replace("\n", " / ")
    data = entry.get("data") or {}
    if data:
        text += ("  " if text else "") + json.dumps(data, ensure_ascii=False)
    return text if len(text) <= 500 else text[:497] + "..."
