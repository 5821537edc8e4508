"""Gateway benchmark: the overhead a gateway adds to a tool call.

    .venv/bin/python bench/bench_gateway.py [--calls 500] [--sessions 200]

Measured in one run, side by side (p50 over --calls sequential `echo` calls, mcp 2.x `Client`; the calls to every
path are interleaved one by one, so load changes hit all alike; this is repeated --rounds times with fresh
clients, and each ratio printed is the median of the rounds' ratios, with their range):
- direct: a client calling the echo example env (a subprocess) over streamable HTTP;
- gateway: the same client calling the same env through a gateway (a subprocess, `python -m
  agentenv_local.gateway`) over streamable HTTP: target <= 1.25x direct;
- the hub's gateway (`agentenv up`, `agentenv env deploy`), the product's own path: with the env in the hub
  (`run_as = "in_process"`, the default for a Python env: no hop between gateway and env) and with the env as
  a subprocess (an HTTP child, like the standalone gateway's);
- a byte-forwarding proxy (a subprocess that only pipes bytes, on the same event loop as the gateway) in front
  of the same env: the floor of any extra hop written in Python on this machine, printed for reference;
- in-process child through the gateway: `Gateway.call()` on an in-process echo env (the hub's path, no inbound
  HTTP): target < 1 ms; and the same gateway over HTTP, for reference;
- --sessions concurrent MCP sessions against the HTTP gateway, one call each: errors and calls/s;
- when the reference is installed (AGENTENV_REF_SERVER_VENV, default /tmp/agentenv-bench-ref), its gateway in
  front of the same echo server, for comparison;
- the reference's own MCP client, ``agentenv_protocol.ToolSession`` (mcp 1.x's protocol 2025-11-25 with a session
  id; run in the reference's side venv, AGENTENV_REF_VENV, default .venv-ref), calling echo directly, through
  the standalone gateway (target <= 1.15x direct), the hub's two and the byte-forwarding proxy, interleaved one
  call at a time. ``--toolsession-only`` measures just direct, the standalone gateway and the proxy.
Nothing here is asserted by the tests.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import socket
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

from gateway_support import hub_instances  # noqa: E402 - bench/ is put on the path above when run as a script

ECHO = ROOT / "examples" / "envs" / "echo" / "server.py"
REF_VENV = Path(os.environ.get("AGENTENV_REF_SERVER_VENV") or "/tmp/agentenv-bench-ref")
RATIO_TARGET = 1.25
TOOLSESSION_TARGET = 1.15
CLIENT_VENV = Path(os.environ.get("AGENTENV_REF_VENV") or ROOT / ".venv-ref")  # the reference's ToolSession

# Run by the reference's Python: p50 (ms) of echo calls over one ToolSession per URL, interleaved call by call.
TOOLSESSION_P50S = '''
import asyncio, json, statistics, sys, time
from agentenv_protocol import ToolSession

async def main(urls, calls):
    sessions = {name: await ToolSession(mcp_url=url).open() for name, url in urls.items()}
    try:
        for _ in range(20):
            for s in sessions.values():
                await s.call_tool("echo", {"text": "warm"})
        times = {name: [] for name in sessions}
        for i in range(calls):
            for name, s in sessions.items():
                t = time.perf_counter()
                await s.call_tool("echo", {"text": f"x{i}"})
                times[name].append(time.perf_counter() - t)
    finally:
        for s in sessions.values():
            await s.close()
    return {name: statistics.median(ts) * 1000 for name, ts in times.items()}

print(json.dumps(asyncio.run(main(json.loads(sys.argv[1]), int(sys.argv[2])))))
'''
INPROC_TARGET_MS = 1.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def process(args: list[str], pattern: str):
    proc = subprocess.Popen([sys.executable, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT)
    stderr = proc.stderr
    assert stderr is not None  # piped above
    try:
        line = stderr.readline()
        match = re.search(pattern, line)
        if not match:
            raise RuntimeError(f"{args}: {line}{stderr.read()}")
        threading.Thread(target=lambda: [None for _ in stderr], daemon=True).start()
        yield match.group(1)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


@contextlib.contextmanager
def reference_gateway(echo_base: str):
    """The reference's gateway (its own venv) in front of echo_base; yields its base URL, or None if absent."""
    python = REF_VENV / "bin" / "python"
    if not python.is_file():
        yield None
        return
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        # psycopg2 is imported at module level but used only with SERVICE_DB_URL: a stub stands in (Appendix B)
        Path(tmp, "psycopg2").mkdir()
        Path(tmp, "psycopg2", "__init__.py").write_text("")
        env = {**os.environ, "PYTHONPATH": tmp}
        if subprocess.run([str(python), "-c", "import agent_env.env.gateway.entrypoint"], env=env,
                          capture_output=True, check=False).returncode != 0:
            yield None
            return
        env |= {"MCP_HOST": "127.0.0.1", "MCP_PORT": str(port), "MCP_SERVER_NAME": "demo",
               "INTERNAL_MCP_SERVERS": f"echo={echo_base}/mcp", "REST_PROXY_URLS": f"mcp-echo={echo_base}",
               "GATEWAY_TRAJECTORY_FILE": f"{tmp}/trajectory.jsonl"}
        proc = subprocess.Popen([str(python), "-m", "agent_env.env.gateway.entrypoint"], env=env, cwd=tmp,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            base = f"http://127.0.0.1:{port}"
            asyncio.run(wait_ready(base))
            yield base
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


async def wait_ready(url: str) -> None:
    import httpx2

    async with httpx2.AsyncClient() as http:
        for _ in range(300):
            with contextlib.suppress(Exception):
                if (await http.get(url + "/state")).status_code == 200:
                    return
            await asyncio.sleep(0.1)
    raise RuntimeError(f"{url} did not get ready")


async def p50_over_mcp(mcp_url: str, calls: int) -> float:
    from mcp import Client

    async with Client(mcp_url) as client:
        for _ in range(20):
            await client.call_tool("echo", {"text": "warm"})
        times = []
        for i in range(calls):
            t = time.perf_counter()
            await client.call_tool("echo", {"text": f"x{i}"})
            times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


async def interleaved_p50s(urls: dict[str, str], calls: int) -> dict[str, float]:
    """p50 of the same echo call against each MCP URL, one call to each in turn, so that a change in the
    machine's load (2 shared cores) hits every path alike instead of whichever was measured then."""
    from contextlib import AsyncExitStack

    from mcp import Client

    async with AsyncExitStack() as stack:
        clients = {name: await stack.enter_async_context(Client(url)) for name, url in urls.items()}
        for _ in range(20):
            for client in clients.values():
                await client.call_tool("echo", {"text": "warm"})
        times: dict[str, list[float]] = {name: [] for name in clients}
        for i in range(calls):
            for name, client in clients.items():
                t = time.perf_counter()
                await client.call_tool("echo", {"text": f"x{i}"})
                times[name].append(time.perf_counter() - t)
    return {name: statistics.median(ts) * 1000 for name, ts in times.items()}


async def p50_inprocess(calls: int) -> float:
    from agentenv_local.env import load_env
    from agentenv_local.gateway.children import ChildSpec
    from agentenv_local.gateway.server import Gateway

    async with Gateway("bench", [ChildSpec("echo", load_env(ECHO))]) as gw:
        for _ in range(20):
            await gw.call("echo", {"text": "warm"})
        times = []
        for i in range(calls):
            t = time.perf_counter()
            await gw.call("echo", {"text": f"x{i}"})
            times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


async def sessions(mcp_url: str, count: int) -> tuple[int, float]:
    from mcp import Client

    async def one(i: int) -> None:
        async with Client(mcp_url) as c:
            await c.call_tool("echo", {"text": f"s{i}"})

    t = time.perf_counter()
    results = await asyncio.gather(*(one(i) for i in range(count)), return_exceptions=True)
    elapsed = time.perf_counter() - t
    return sum(1 for r in results if isinstance(r, BaseException)), count / elapsed


def toolsession_p50s(urls: dict[str, str], calls: int) -> dict[str, float] | None:
    """p50s (ms) of the reference's ToolSession against each MCP URL (interleaved), or None without its venv."""
    import json

    python = CLIENT_VENV / "bin" / "python"
    if not python.is_file():
        return None
    out = subprocess.run([str(python), "-c", TOOLSESSION_P50S, json.dumps(urls), str(calls)], capture_output=True,
                         text=True, check=False, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"the ToolSession client failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout)


def print_toolsession(rounds: list[dict[str, float]] | None) -> None:
    if not rounds:
        print(f"the reference's ToolSession: not measured (no reference venv at {CLIENT_VENV})")
        return

    def ratio(name: str) -> tuple[float, str]:
        ratios = sorted(r[name] / r["direct"] for r in rounds)
        spread = f" (rounds {ratios[0]:.2f}-{ratios[-1]:.2f})" if len(ratios) > 1 else ""
        return statistics.median(ratios), f"ratio {statistics.median(ratios):.2f}x{spread}"

    p50 = {name: statistics.median(r[name] for r in rounds) for name in rounds[0]}
    gateway = ratio("gateway")[0]
    print(f"the reference's ToolSession (2025-11-25, session id): direct p50 {p50['direct']:7.3f} ms")
    notes = {"gateway": f"target <= {TOOLSESSION_TARGET}x: {'ok' if gateway <= TOOLSESSION_TARGET else 'MISSED'}",
             "forwarder": "(the floor of any extra hop)"}
    labels = {"gateway": "the standalone gateway", "hub_inproc": "the hub's gateway, env in the hub",
              "hub_subproc": "the hub's gateway, env a subprocess", "forwarder": "a byte-forwarding proxy"}
    for key, label in labels.items():
        if key in p50:
            print(f"  through {label:<36} p50 {p50[key]:7.3f} ms  {ratio(key)[1]}  {notes.get(key, '')}".rstrip())


def toolsession_only(rounds: int, calls: int) -> int:
    with process(["-m", "agentenv_local.env", str(ECHO), "--port", "0"], r"serving on (http://\S+)") as echo:
        port = free_port()
        forwarder = ["-c", (f"import sys; sys.path.insert(0, {str(ROOT / 'bench')!r}); "
                            f"from gateway_support import forward; forward({echo!r})")]
        with process(["-m", "agentenv_local.gateway", "--child", f"echo={echo}/mcp", "--port", str(port)],
                     r"serving on (http://\S+)") as gw, process(forwarder, r"forwarding on (http://\S+)") as piped:
            asyncio.run(wait_ready(gw))
            urls = {"direct": echo + "/mcp", "gateway": gw + "/mcp", "forwarder": piped + "/mcp"}
            measured = [toolsession_p50s(urls, calls) for _ in range(max(1, rounds))]
    print(f"{len(measured)} interleaved rounds of {calls} calls per path; p50s are the rounds' medians")
    print_toolsession([m for m in measured if m is not None])
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (the ratios are their medians)")
    parser.add_argument("--toolsession-only", action="store_true",
                        help="measure only the reference's ToolSession, direct and through the gateway")
    args = parser.parse_args()
    if args.toolsession_only:
        return toolsession_only(args.rounds, args.calls)
    with process(["-m", "agentenv_local.env", str(ECHO), "--port", "0"], r"serving on (http://\S+)") as echo:
        port = free_port()
        # the floor of any extra hop: a proxy that only pipes bytes (no HTTP, no MCP) in front of the same env
        forwarder = ["-c", (f"import sys; sys.path.insert(0, {str(ROOT / 'bench')!r}); "
                            f"from gateway_support import forward; forward({echo!r})")]
        with process(["-m", "agentenv_local.gateway", "--child", f"echo={echo}/mcp", "--port", str(port)],
                     r"serving on (http://\S+)") as gw, process(forwarder, r"forwarding on (http://\S+)") as piped, \
                hub_instances(str(ECHO)) as hub:
            asyncio.run(wait_ready(gw))
            urls = {"direct": echo + "/mcp", "gateway": gw + "/mcp", "hub_inproc": hub["in_process"],
                    "hub_subproc": hub["subprocess"], "forwarder": piped + "/mcp"}
            rounds = [asyncio.run(interleaved_p50s(urls, args.calls)) for _ in range(max(1, args.rounds))]
            ts_urls = {"direct": echo + "/mcp", "gateway": gw + "/mcp", "hub_inproc": hub["in_process"],
                       "hub_subproc": hub["subprocess"], "forwarder": piped + "/mcp"}
            ts_measured = [toolsession_p50s(ts_urls, args.calls) for _ in range(max(1, args.rounds))]
            errors, rate = asyncio.run(sessions(gw + "/mcp", args.sessions))
        ref = None
        with reference_gateway(echo) as ref_base:
            if ref_base is not None:
                ref = asyncio.run(p50_over_mcp(ref_base + "/mcp", args.calls))
    inproc = asyncio.run(p50_inprocess(args.calls))
    inproc_http = None
    from agentenv_local.env import load_env
    from agentenv_local.gateway.children import ChildSpec
    from agentenv_local.gateway.server import Gateway

    sys.path.insert(0, str(ROOT / "tests"))  # the test kits (tests/kits/)
    from kits.gateway import serving_app

    gw_obj = Gateway("bench", [ChildSpec("echo", load_env(ECHO))])
    with serving_app(gw_obj.app()) as base:
        inproc_http = asyncio.run(p50_over_mcp(base + "/mcp", args.calls))
    p50s = {name: statistics.median(r[name] for r in rounds) for name in urls}
    direct = p50s["direct"]

    def ratio(name: str) -> str:
        ratios = sorted(r[name] / r["direct"] for r in rounds)
        spread = f" (rounds {ratios[0]:.2f}-{ratios[-1]:.2f})" if len(ratios) > 1 else ""
        return f"ratio {statistics.median(ratios):.2f}x{spread}"

    def verdict(name: str) -> str:
        return "ok" if statistics.median(r[name] / r["direct"] for r in rounds) <= RATIO_TARGET else "MISSED"

    print(f"{len(rounds)} interleaved rounds of {args.calls} calls per path; p50s are the rounds' medians")
    print(f"direct echo over streamable HTTP       p50 {direct:7.3f} ms")
    for key, label in (("hub_inproc", "hub gateway, env in the hub (default)"),
                       ("hub_subproc", "hub gateway, env as a subprocess     "),
                       ("gateway", "standalone gateway, HTTP child       ")):
        print(f"{label}  p50 {p50s[key]:7.3f} ms  {ratio(key)}  target <= {RATIO_TARGET}x: {verdict(key)}")
    print(f"a byte-forwarding proxy (no gateway)    p50 {p50s['forwarder']:7.3f} ms  {ratio('forwarder')}  "
          "the floor of any extra hop in Python here")
    from agentenv_local.loops import hub_event_loop, uvloop_available

    hub_loop = type(hub_event_loop()).__module__.split(".")[0]
    print(f"event loops: standalone gateway and forwarder {'uvloop' if uvloop_available() else 'asyncio'}, "
          f"hub {hub_loop} (AGENTENV_LOOP=uvloop to try uvloop there)")
    print(f"in-process child via Gateway.call()    p50 {inproc:7.3f} ms  (target < {INPROC_TARGET_MS} ms: "
          f"{'ok' if inproc < INPROC_TARGET_MS else 'MISSED'})")
    print(f"in-process child via gateway over HTTP p50 {inproc_http:7.3f} ms  (same-process client; for reference)")
    if ref is not None:
        print(f"through the reference's gateway         p50 {ref:7.3f} ms  ratio {ref / direct:.2f}x "
              "(measured after the rounds, against their median direct p50)")
    print_toolsession([m for m in ts_measured if m is not None])
    print(f"{args.sessions} concurrent MCP sessions: {errors} errors, {rate:.0f} calls/s (session open + 1 call)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
