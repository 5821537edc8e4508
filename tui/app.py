"""The Textual app: holds the data source, the clock and the event pump; screens do the showing."""

from __future__ import annotations

from typing import Any, ClassVar

from textual.app import App
from textual.binding import Binding, BindingType
from textual.message import Message

from agentenv_local.hub.launch import Launcher

from .clock import Clock, SystemClock
from .data import EventPump, Source
from .model import RunsModel


class EventsArrived(Message):
    """A batch of hub events (the pump sends at most one every 50 ms)."""

    def __init__(self, events: list[dict]) -> None:
        super().__init__()
        self.events = events


class AgentenvTui(App):
    TITLE = "agentenv"
    CSS_PATH = "app.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark,f1", "help", "Help"),
        Binding("ctrl+t", "toggle_dark", "Light/dark"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, source: Source, clock: Clock | None = None, live: bool = True, open_run: str | None = None,
                 batch_interval: float = 0.05, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.source = source
        self.clock = clock or SystemClock()
        self.live = live
        self.open_run = open_run
        self.batch_interval = batch_interval
        self.runs = RunsModel()
        self.launcher = Launcher(source)
        self.pump: EventPump | None = None
        self.events_seen = 0
        self.hub_gone = False

    def now(self) -> float:
        return self.clock.now()

    def on_mount(self) -> None:
        from .screens.runs import RunsScreen

        self.push_screen(RunsScreen())
        if self.open_run:
            from .screens.run import RunScreen

            self.push_screen(RunScreen(self.open_run))
        if self.live:
            self.pump = EventPump(self.source.subscribe(), lambda events: self.post_message(EventsArrived(events)),
                                  interval=self.batch_interval).start()

    def on_events_arrived(self, message: EventsArrived) -> None:
        events = message.events
        self.events_seen += len(events)
        if any(e.get("kind") == "hub.gone" for e in events):
            self.hub_gone = True
            self.notify("The hub stopped: live updates ended. Restart `agentenv tui` to reconnect.",
                        severity="error", timeout=30)
        changed = self.runs.apply(events)
        if self.launcher.on_events(events):
            self.run_worker(self.launcher.fill, thread=True, group="launch")
        from textual.css.query import NoMatches

        for screen in self.screen_stack:
            handler = getattr(screen, "on_hub_events", None)
            if handler is not None and screen.is_mounted:
                try:
                    handler(events, changed)
                except NoMatches:  # the screen is being taken down
                    pass

    def action_help(self) -> None:
        from .screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_toggle_dark(self) -> None:
        self.theme = "textual-light" if self.theme != "textual-light" else "textual-dark"

    def on_unmount(self) -> None:
        if self.pump is not None:
            self.pump.stop()

    def fail(self, what: str, exc: BaseException) -> None:
        """Tell the person what failed (from any thread)."""
        text = getattr(exc, "render", None)
        message = text() if callable(text) else f"{type(exc).__name__}: {exc}"
        self.later(self.notify, f"{what}: {message}", severity="error", timeout=10)

    def later(self, callback, *args: Any, **kwargs: Any) -> None:
        """Run `callback` on the app's thread, from a worker thread; a no-op once the app is closing."""
        if not self.is_running:
            return
        try:
            self.call_from_thread(lambda: callback(*args, **kwargs))
        except Exception:  # the app (or the screen the callback draws on) went away
            pass
