"""A run's review gates and human agents: the conversation, the person's reply or decision."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import Button, Input, Static


class HumanPanel(Vertical):
    class Decide(Message):
        def __init__(self, decision: str) -> None:
            super().__init__()
            self.decision = decision

    class Reply(Message):
        def __init__(self, text: str, end: bool) -> None:
            super().__init__()
            self.text = text
            self.end = end

    def compose(self) -> ComposeResult:
        yield Static("", id="reviews", classes="box")
        with Horizontal(id="review-row"):
            yield Button("Continue (y)", variant="success", id="review-continue")
            yield Button("Abort (x)", variant="error", id="review-abort")
        with VerticalScroll(id="conversation"):
            yield Static("", id="conversation-body")
        with Horizontal(id="reply-row"):
            yield Input(placeholder="reply to the human agent's question (enter sends)", id="reply")
            yield Button("Send & end", id="reply-end")

    def on_mount(self) -> None:
        self.show([], {}, [], live=False)

    def show(self, reviews: list[dict], conversations: dict, pending: list[dict], live: bool,
             recorded: list[dict] | None = None) -> None:
        waiting = [r for r in reviews if not r.get("decision")]
        text = Text()
        if waiting:
            r = waiting[0]
            text.append("Review waiting: ", style="bold")
            text.append(f"{r.get('label') or r.get('step_id')}  (step {r.get('step_id')})\n")
            text.append("Continue lets the run go on; abort fails the step.", style="dim")
        else:
            decided = [r for r in reviews if r.get("decision")]
            text.append("No review gate is waiting." if not decided else
                        "Reviews: " + ", ".join(f"{r.get('label') or r.get('step_id')} → {r['decision']}"
                                                for r in decided), style="dim")
        self.query_one("#reviews", Static).update(text)
        self.query_one("#review-row").display = bool(waiting)
        body = Text()
        if conversations:
            for agent, contexts in conversations.items():
                for context_id, entries in (contexts or {}).items():
                    body.append(f"{agent} · conversation {context_id}\n", style="bold")
                    for entry in entries:
                        who = "you" if entry.get("role") == "human" else "asked"
                        body.append(f"  {who}: ", style="bold" if who == "asked" else "")
                        body.append(f"{entry.get('text') or ''}")
                        if entry.get("status") and entry.get("status") != "answered":
                            body.append(f"   [{entry['status']}]", style="italic")
                        body.append("\n")
        for r in recorded or []:
            body.append(f"prompt {r.get('prompt_id')} · agent {r.get('agent_name')}\n", style="bold")
            for t in r.get("turns") or []:
                body.append(f"  [{t.get('turn')}] prompt: {t.get('prompt')}\n")
                body.append(f"      response: {t.get('response')}\n")
                if "user_reply" in t:
                    body.append(f"      reply: {t['user_reply']}\n")
        if pending:
            q = pending[0]
            body.append(f"\nwaiting for your answer ({q.get('agent_name')}): ", style="bold")
            body.append(f"{q.get('text') or ''}\n")
        if not body.plain:
            body.append("No human agent in this run." if not live else
                        "No human agent question yet (a task deploys one with a2a_agent_id \"human\").", style="dim")
        self.query_one("#conversation-body", Static).update(body)
        self.query_one("#reply-row").display = bool(pending)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "review-continue":
            self.post_message(self.Decide("continue"))
        elif event.button.id == "review-abort":
            self.post_message(self.Decide("abort"))
        elif event.button.id == "reply-end":
            box = self.query_one("#reply", Input)
            self.post_message(self.Reply(box.value, True))
            box.value = ""

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "reply" and event.value.strip():
            self.post_message(self.Reply(event.value, False))
            event.input.value = ""
