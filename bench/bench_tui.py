"""TUI benchmark: a run emitting ~1,000 events/s while a person presses keys.

    .venv/bin/python bench/bench_tui.py [--rate 1000] [--seconds 8] [--presses 30]

A long-lived hub (`agentenv up`) runs in a tmp project with one run waiting on a gate. A producer
connection appends tool-call and log events for that run through the hub (`events.append_many`,
batches every 20 ms) at --rate events/s. The TUI (headless, Textual's Pilot, 100x30) is a client of
the same hub, on that run's screen, receiving the events from the hub's stream through its batching
pipeline (EventPump -> one message per 50 ms -> RunState.apply -> one repaint).

Printed, side by side in one run:
- the event rate produced and the rate the TUI took in (sustained: its count over the same window);
- input latency: time from a key press (switching tabs) to the screen showing the new tab, p50/p95/max,
  under that load and with no load (the ratio shows what the load costs; the target is < 100 ms);
- batches delivered (events per repaint).
Nothing here is asserted by the tests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _agentenv() -> str:
    return str(Path(sys.executable).parent / "agentenv")


def _start_hub(project: Path) -> subprocess.Popen:
    proc = subprocess.Popen([_agentenv(), "up"], cwd=project, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if (project / ".agentenv" / "hub.json").exists() and (project / ".agentenv" / "hub.sock").exists():
            return proc
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("the hub did not start")


def _producer(project: Path, run_id: str, rate: int, stop: threading.Event, sent: list[int],
              count_file: Path | None = None) -> None:
    from agentenv_local.hub import connect

    session = connect(start=project, become_hub=False)
    tick = 0.02
    per_tick = max(1, int(rate * tick))
    n = 0
    next_at = time.perf_counter()
    try:
        while not stop.is_set():
            batch = []
            for _ in range(per_tick):
                n += 1
                if n % 2:
                    batch.append({"kind": "env.tool_call", "run_id": run_id, "body": {
                        "event_type": "tool_call", "event_id": f"event_{n}", "instance_id": "bench",
                        "role": "agent", "tool_call": {"function_name": "search_emails", "arguments": {"q": n}},
                        "virtual_time": "2025-03-14T09:00:00Z"}})
                else:
                    batch.append({"kind": "env.tool_call_result", "run_id": run_id, "body": {
                        "event_type": "tool_call_result", "tool_call_event_id": f"event_{n - 1}",
                        "instance_id": "bench", "tool_call_result": {"content": [{"type": "text", "text": "ok"}]}}})
            session.call("events.append_many", batch)
            sent[0] += len(batch)
            if count_file is not None:
                count_file.write_text(str(sent[0]))
            next_at += tick
            delay = next_at - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
    finally:
        session.close()


async def _measure(project: Path, run_id: str, rate: int, seconds: float, presses: int) -> dict:
    from textual import events
    from textual.widgets import TabbedContent

    from tui.app import AgentenvTui
    from tui.data import HubSource
    from tui.screens.run import RunScreen

    source = HubSource.connect(start=project)
    app = AgentenvTui(source, open_run=run_id)
    out: dict = {}
    async with app.run_test(size=(100, 30)) as pilot:
        while not (isinstance(app.screen, RunScreen) and app.screen.state.record):
            await pilot.pause(0.05)
        screen = app.screen
        tabs = screen.query_one("#tabs", TabbedContent)

        async def press_latencies(n: int) -> list[float]:
            got = []
            for i in range(n):
                want = "tools" if i % 2 == 0 else "dag"
                key = "3" if want == "tools" else "1"
                t0 = time.perf_counter()
                # as a terminal delivers it (Pilot.press would also wait for animations to end)
                driver = app._driver
                assert driver is not None  # the app runs under run_test
                driver.send_message(events.Key(key, key))
                while tabs.active != want:
                    await asyncio.sleep(0.001)
                got.append((time.perf_counter() - t0) * 1000)
                await pilot.pause(seconds / max(1, n) / 2)
            return got

        out["idle_ms"] = await press_latencies(max(5, presses // 3))
        seen0, batches0 = app.events_seen, app.pump.batches if app.pump else 0
        count_file = project.parent / "produced"
        # the producer is another process, as a run's gateway would be: it does not share our GIL
        producer = subprocess.Popen([sys.executable, __file__, "--produce", run_id, "--project", str(project),
                                     "--rate", str(rate), "--count-file", str(count_file)])
        t0 = time.perf_counter()
        await pilot.pause(0.5)  # let the stream reach a steady state
        out["load_ms"] = await press_latencies(presses)
        remaining = seconds - (time.perf_counter() - t0)
        if remaining > 0:
            await pilot.pause(remaining)
        elapsed = time.perf_counter() - t0
        producer.terminate()
        producer.wait(10)
        await pilot.pause(0.3)  # what was in flight arrives
        received = app.events_seen - seen0
        sent = int(count_file.read_text() or 0) if count_file.exists() else 0
        out.update(sent=sent, received=received, elapsed=elapsed,
                   batches=(app.pump.batches if app.pump else 0) - batches0,
                   tool_rows=len(screen.state.tool_calls))
    source.close()
    return out


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--presses", type=int, default=30)
    parser.add_argument("--produce", help=argparse.SUPPRESS)  # internal: be the producer process
    parser.add_argument("--project", help=argparse.SUPPRESS)
    parser.add_argument("--count-file", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.produce:
        import signal

        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        _producer(Path(args.project), args.produce, args.rate, stop, [0], Path(args.count_file))
        return
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "proj"
        (project / "tasks").mkdir(parents=True)
        release = Path(tmp) / "release"
        hub = _start_hub(project)
        try:
            from agentenv_local.hub import connect

            with connect(start=project, become_hub=False) as s:
                s.store.documents.put("tasks", "@local/bench/gated", {"steps": [
                    {"id": "box", "type": "deploy_sandbox", "sandbox_name": "box", "sandbox_type": "process"},
                    {"id": "wait", "type": "verify_sandbox", "sandbox_name": "box", "criteria": [
                        {"type": "bash_cmd_succeeds",
                         "bash_cmd": f"for i in $(seq 2400); do [ -f {release} ] && exit 0; sleep 0.05; done"}]}]})
                run_id = s.call("runner.submit", task_id="@local/bench/gated")["run_id"]
            result = asyncio.run(_measure(project, run_id, args.rate, args.seconds, args.presses))
        finally:
            release.touch()
            subprocess.run([_agentenv(), "down"], cwd=project, capture_output=True, timeout=60, check=False)
            try:
                hub.wait(30)
            except subprocess.TimeoutExpired:
                hub.kill()
    produced = result["sent"] / result["elapsed"]
    taken = result["received"] / result["elapsed"]
    idle, load = result["idle_ms"], result["load_ms"]
    print(json.dumps({"rate_target": args.rate, "seconds": round(result["elapsed"], 2)}))
    print(f"events produced   {produced:8.0f} /s   ({result['sent']} events through the hub's socket stream)")
    print(f"events taken in   {taken:8.0f} /s   (sustained: {taken / produced:.2f}x of produced; "
          f"{result['batches']} batches, {result['received'] / max(1, result['batches']):.0f} events per repaint)")
    print(f"input latency, no load   p50 {statistics.median(idle):6.1f} ms  p95 {_pct(idle, .95):6.1f} ms  "
          f"max {max(idle):6.1f} ms")
    print(f"input latency, at load   p50 {statistics.median(load):6.1f} ms  p95 {_pct(load, .95):6.1f} ms  "
          f"max {max(load):6.1f} ms   "
          f"(target < 100 ms; ratio p50 {statistics.median(load) / statistics.median(idle):.1f}x)")
    print(f"tool-call rows kept      {result['tool_rows']}")


if __name__ == "__main__":
    main()
