"""The replay agents: the built-in scripted agent, its plan made of what the recorded agent did.

A solver's plan makes, turn by turn, the recorded tool calls with the recorded arguments in the recorded order
(on the recorded server; errors allowed, since the env may answer differently now) and replies the recorded
text (and structured output). A user simulator's plan says its recorded replies; a judge's plan answers the
recorded verdict. What cannot be fed back exactly is returned as a note naming the step and why.
"""

from __future__ import annotations

from typing import Any

from agentenv_local.episodes.record import LoadObject

from .record import split_turns


def literal(value: Any) -> Any:
    """`value` with every string's braces escaped, so the scripted agent's templates keep it as it is."""
    if isinstance(value, str):
        return value.replace("{", "{{").replace("}", "}}")
    if isinstance(value, dict):
        return {k: literal(v) for k, v in value.items()}
    if isinstance(value, list):
        return [literal(v) for v in value]
    return value


def solver_plan(response: dict, load_object: LoadObject | None) -> tuple[dict[str, Any], list[str]]:
    """The plan replaying one prompt response, and the notes on what it cannot replay exactly."""
    where = f"step {response.get('step_id')} (agent {response.get('agent_name')})"
    notes: list[str] = []
    per_turn = split_turns(response, load_object)
    turns = list(response.get("turns") or [])
    if per_turn is None:
        notes.append(f"{where}: the agent's trajectory was not recorded (it offers no trajectory/v1), so whatever "
                     "tools it called are not called again; only its replies are replayed")
        per_turn = [[] for _ in turns]
    plan_turns: list[list[dict]] = []
    for index, turn in enumerate(turns):
        actions: list[dict[str, Any]] = []
        for call in per_turn[index] if index < len(per_turn) else []:
            action: dict[str, Any] = {"tool": call.get("tool") or call.get("name"),
                                      "args": literal(call.get("args") or {}), "allow_error": True}
            if call.get("server"):
                action["server"] = call["server"]
            actions.append(action)
        if turn.get("state") != "completed" or turn.get("response") is None:
            notes.append(f"{where} turn {index + 1}: the agent's reply was not recorded (the turn ended "
                         f"{turn.get('state')!s}: a live model call whose response is not in the record); the replay "
                         "fails this turn as the run did")
            actions.append({"fail": literal(f"replay: turn {index + 1} was not recorded"), "code": "replay.unrecorded"})
        else:
            actions.append({"reply": literal(turn.get("response") or "")})
        plan_turns.append(actions)
    structured = response.get("structured_output")
    if structured is not None and plan_turns:
        plan_turns[-1].insert(-1, {"structured": literal(structured)})
    return {"turns": plan_turns, "after_last": "fail"}, notes


def conversations_plan(responses: list[dict], load_object: LoadObject | None) -> tuple[dict[str, Any], list[str]]:
    """The plan replaying several separate conversations with one agent (prompt_agent steps that each start their
    own): the scripted agent counts turns per conversation, so turn N of each is told apart by the conversation's
    first prompt (the input of its turn 1, then `history.0.input`) and runs that conversation's own turn N. When
    two of them began with the same prompt they cannot be told apart: their turns are joined in order, noted."""
    plans: list[tuple[str, dict[str, Any]]] = []
    notes: list[str] = []
    for response in responses:
        plan, why = solver_plan(response, load_object)
        notes.extend(why)
        first = (response.get("turns") or [{}])[0].get("prompt")
        plans.append((first if isinstance(first, str) else str(response.get("prompt_text") or ""), plan))
    firsts = [first for first, _ in plans]
    if len(set(firsts)) < len(firsts):
        steps = ", ".join(str(r.get("step_id")) for r in responses)
        notes.append(f"steps {steps} (agent {responses[0].get('agent_name')}): separate conversations that began "
                     "with the same prompt cannot be told apart; the replay plan follows their turns one after "
                     "another, in the recorded order")
        return {"turns": [t for _, plan in plans for t in plan["turns"]], "after_last": "fail"}, notes
    turns: list[list[dict]] = []
    for index in range(max(len(plan["turns"]) for _, plan in plans)):
        subject: dict[str, Any] = {"input": "text"} if index == 0 else {"saved": "history.0.input"}
        chain: list[dict] = [{"fail": literal(f"replay: no conversation recorded with this agent had a turn "
                                              f"{index + 1} beginning so"), "code": "replay.unrecorded"}]
        for first, plan in reversed(plans):
            own = plan["turns"][index] if index < len(plan["turns"]) else [
                {"fail": literal(f"replay: this conversation had {len(plan['turns'])} turn(s) recorded"),
                 "code": "replay.unrecorded"}]
            chain = [{"if": {**subject, "equals": literal(first)}, "then": own, "else": chain}]
        turns.append(chain)
    return {"turns": turns, "after_last": "fail"}, notes


def user_plan(response: dict) -> dict[str, Any]:
    """The user simulator's plan: each recorded reply, then the end of the conversation."""
    plan_turns: list[list[dict]] = []
    for turn in response.get("turns") or []:
        if turn.get("triggers_fired"):
            continue  # a trigger spoke for the simulator then: it fires again in the replay
        if turn.get("ended_by_user"):
            plan_turns.append([{"end": True}])
        elif "user_reply" in turn:
            plan_turns.append([{"reply": literal(turn.get("user_reply") or "")}])
    return {"turns": plan_turns, "after_last": "end"}


def judge_plan(verification: dict) -> dict[str, Any] | None:
    """The judge's plan: the verdict it gave (its last usable attempt); None when none was recorded."""
    judge = verification.get("judge") or {}
    attempts = [a for a in judge.get("attempts") or [] if isinstance(a, dict) and a.get("raw") is not None]
    if not attempts:
        return None
    return {"steps": [{"structured": literal(attempts[-1]["raw"])}]}
