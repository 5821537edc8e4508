"""The `run` a verifier script gets: the reference's `Run` (turns, firings, `as_of`) that is also our run dict.

The reference calls `verify(mcp_url, run=run)` with its `Run`: the graded prompt's conversation by turn and every
trigger firing, each placed in the turn it fell in. Our scripts read `run` as a dict (`run["response"]`,
`run["env"]["admin_token"]`, `json.dumps(run)`). `Run` is a `dict` subclass holding exactly the keys we always
passed, with the reference's queries as methods, so either kind of script works unchanged. A dict subclass rather
than a Mapping: `json.dumps(run)` and `isinstance(run, dict)` keep working in the scripts we already have.

Built (in the script's subprocess) from what the step passes beside the dict (`context`):
- the graded prompt response (the one `prompt_id` names, else the run's last): its `turns` give one `Turn` per
  agent turn; turn n's user message is the prompt (n = 1) or the user simulator's reply of turn n - 1;
- the user simulator's trigger firings (`triggers_fired` of a turn): placed exactly, in the turn they wrote;
- each env's trigger events (`GET /triggers/state` of its gateway): one `Firing` per `fired` or `failed`
  event. Our turns carry no clock times, so an env firing is placed only when that is certain: in turn 1 of a
  one-turn prompt, in turn 0 with no prompt; for a longer conversation an env log with firings is `unavailable`
  (asking for it raises `RunRecordUnavailable`, as the reference does for a log it cannot place).

`turns` is a property in the reference; it returns a tuple that may also be called (`run.turns()`), so both
spellings work. A `Message`'s and a `Firing`'s times are None where we have none (`sent_at`, user-agent `at`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


class RunRecordUnavailable(LookupError):
    """A query needs a record that could not be read: `source` is "conversation" or a `Firing.source`."""

    def __init__(self, source: str, reason: str) -> None:
        super().__init__(f"{source}: {reason}")
        self.source, self.reason = source, reason


class Sequence(tuple):
    """A tuple that also answers a call with itself: `run.turns` (the reference) and `run.turns()` both work."""

    def __call__(self) -> Sequence:
        return self


@dataclass(frozen=True)
class Message:
    turn: int
    role: str  # "user" or "agent"
    text: str
    sent_at: datetime | None = None
    author: str | None = None
    written_by_triggers: tuple[str, ...] = ()
    parts: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class Firing:
    trigger_id: str
    source: str  # "env:<env_id>" or "user_agent"
    turn: int  # 0: before the first message
    at: datetime | None
    virtual_time: datetime | None
    ok: bool
    provoked_by: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Turn:
    number: int
    message: Message
    reply: Message | None
    _firings: tuple[Firing, ...] = field(default=(), repr=False)
    _unavailable: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)

    @property
    def firings(self) -> tuple[Firing, ...]:
        _need(self._unavailable, list(self._unavailable))
        return self._firings


def _need(unavailable: Mapping[str, str], sources: list[str]) -> None:
    for source in sources:
        if source in unavailable:
            raise RunRecordUnavailable(source, unavailable[source])


class Run(dict):
    """Our run dict (same keys) with the reference's `Run` queries."""

    def __init__(self, data: Mapping[str, Any], turns: tuple[Turn, ...] = (), firings: tuple[Firing, ...] = (),
                 logs: tuple[str, ...] = (), unavailable: Mapping[str, str] | None = None) -> None:
        super().__init__(data)
        self._turns = turns
        self._firings = firings
        self._logs = logs
        self.unavailable: dict[str, str] = dict(unavailable or {})

    @property
    def turns(self) -> Sequence:
        _need(self.unavailable, ["conversation"])
        return Sequence(self._turns)

    def turn(self, number: int) -> Turn:
        if not 1 <= number <= len(self.turns):
            raise LookupError(f"the run has no turn {number}")
        return self._turns[number - 1]

    def firings(self, trigger_id: str | None = None, *, env: str | None = None) -> tuple[Firing, ...]:
        """Oldest first, of `trigger_id` and `env` when given; raises RunRecordUnavailable for a missing log."""
        source = None if env is None else f"env:{env}"
        _need(self.unavailable, [source] if source else list(self.unavailable))
        if source and source not in self._logs:
            raise RunRecordUnavailable(source, "no firing log was captured")
        return tuple(f for f in self._firings
                     if (trigger_id is None or f.trigger_id == trigger_id) and (source is None or f.source == source))

    def firing(self, trigger_id: str, *, env: str | None = None) -> Firing | None:
        """The first firing of `trigger_id`, or None if it never fired."""
        return next(iter(self.firings(trigger_id, env=env)), None)

    def as_of(self, turn: int) -> Run:
        """The run after `turn`: its first `turn` turns, and what fired up to then."""
        if turn < 0:
            raise ValueError(f"turn must be >= 0, got {turn}")
        if "conversation" in self.unavailable or turn >= len(self._turns):
            return self
        return Run(self, self._turns[:turn], tuple(f for f in self._firings if f.turn <= turn), self._logs,
                   self.unavailable)


def build_run(data: Mapping[str, Any], context: Mapping[str, Any]) -> Run:
    """The `Run` over our run dict `data`; `context` = {"prompt": the graded prompt response or None,
    "env_events": {env_id: [trigger event, ...]}, "env_unavailable": {env_id: why}} (see the module docstring)."""
    prompt = context.get("prompt")
    unavailable = {f"env:{e}": why for e, why in (context.get("env_unavailable") or {}).items()}
    turns_raw = [t for t in ((prompt or {}).get("turns") or []) if isinstance(t, dict)]
    if prompt and not turns_raw:  # a prompt recorded without turns: its prompt and reply are the one turn
        turns_raw = [{"prompt": prompt.get("prompt_text") or "", "response": prompt.get("response") or ""}]
    # a user simulator's trigger fires after the agent's reply of turn n (so in turn n) and writes turn n + 1's message
    user_agent = [Firing(trigger_id=str(tid), source="user_agent", turn=i + 1, at=None, virtual_time=None, ok=True)
                  for i, t in enumerate(turns_raw) for tid in (t.get("triggers_fired") or [])]
    firings = list(user_agent)
    logs = ["user_agent"] if prompt else []
    for env_id, events in (context.get("env_events") or {}).items():
        source = f"env:{env_id}"
        found = _env_firings(source, events, turn=1 if prompt else 0)
        if found and prompt and len(turns_raw) > 1:
            unavailable[source] = "withheld: our turns carry no times, so a multi-turn prompt's firings can't be placed"
            continue
        firings += found
        logs.append(source)
    firings.sort(key=lambda f: (f.turn, f.at or datetime.min))
    author = (prompt or {}).get("agent_name")
    turns = []
    for i, raw in enumerate(turns_raw):
        number = i + 1
        text = raw.get("prompt") if i == 0 else turns_raw[i - 1].get("user_reply")
        wrote = tuple(f.trigger_id for f in user_agent if f.turn == number - 1)
        message = Message(number, "user", str(text or ""), written_by_triggers=wrote)
        reply = Message(number, "agent", str(raw.get("response") or ""), author=author)
        turns.append(Turn(number, message, reply, tuple(f for f in firings if f.turn == number), unavailable))
    return Run(data, tuple(turns), tuple(firings), tuple(logs), unavailable)


def _env_firings(source: str, events: list[Any], turn: int) -> list[Firing]:
    """One Firing per `fired`/`failed` event, provoked by its trigger's oldest unclaimed `detected` event."""
    detected: dict[str, list[Any]] = {}
    firings = []
    for event in events:
        if not isinstance(event, dict) or not event.get("trigger_id"):
            continue
        tid, kind = str(event["trigger_id"]), event.get("kind")
        if kind == "detected":
            detected.setdefault(tid, []).append(event.get("provoking"))
        elif kind in ("fired", "failed"):
            pending = detected.get(tid) or []
            firings.append(Firing(trigger_id=tid, source=source, turn=turn, at=_time(event.get("ts")),
                                  virtual_time=_time(event.get("virtual_time")), ok=kind == "fired",
                                  provoked_by=pending.pop(0) if pending else None))
    return firings


def _time(value: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")) if value else None
    except ValueError:
        return None
