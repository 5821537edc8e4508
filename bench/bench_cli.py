"""CLI benchmark: start-up, `run hello` end to end, and many runs at once, side by side.

    .venv/bin/python bench/bench_cli.py [--with-reference] [--help-reps 10] [--hello-reps 5]
                                        [--k 100] [--concurrency 20]

Measures, in one run:
- `agentenv --help`: median wall time of --help-reps calls (target <= 150 ms);
- `agentenv run hello` end to end: the median of --hello-reps first runs, each in a fresh
  temporary project, and the median of --hello-reps reruns in one project (target <= 0.5 s);
- `agentenv run hello --k 100 --concurrency 20` in a fresh project: runs/s; it must exit 0.

With --with-reference, the reference (the `agentenv-framework` package, CLI `agent-env`) is
installed into a side venv at /tmp/agentenv-bench-ref (--reference-venv; reused when present; it pins mcp<2 and
a2a-sdk 0.3, so it never goes into our venv) and timed the same way, each first run with
XDG_STATE_HOME pointing at a fresh temporary folder. The table prints both and the ratio.
If the install fails, the reason is printed and the bench goes on with ours only.

Nothing here is asserted by the tests (DESIGN.md section 9). Exit 1 only when a command fails.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

ROOT = Path(__file__).resolve().parents[1]
REF_VENV_DEFAULT = Path("/tmp/agentenv-bench-ref")
REF_PACKAGE = "agentenv-framework"

HELP_TARGET_S = 0.150
HELLO_TARGET_S = 0.5

T = TypeVar("T")


@dataclass
class Tool:
    label: str
    exe: str
    env: dict[str, str]
    state_var: str | None = None  # the env var that moves its state (the reference: XDG_STATE_HOME)
    temp_dirs: list[str] = field(default_factory=list)

    def fresh_dir(self) -> str:
        d = tempfile.mkdtemp(prefix=f"agentenv-bench-{self.label}-")
        self.temp_dirs.append(d)
        return d

    def cleanup(self) -> None:
        for d in self.temp_dirs:
            shutil.rmtree(d, ignore_errors=True)


class CommandFailed(Exception):
    pass


def clean_env() -> dict[str, str]:
    """The caller's environment minus anything that would point either tool at other state."""
    drop = ("AGENTENV_", "AGENT_ENV_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.pop("XDG_STATE_HOME", None)
    env.pop("VIRTUAL_ENV", None)
    return env


def timed(tool: Tool, args: list[str], cwd: str, state_dir: str | None = None, timeout: float = 600) -> float:
    env = dict(tool.env)
    if tool.state_var and state_dir:
        env[tool.state_var] = state_dir
    start = time.perf_counter()
    done = subprocess.run([tool.exe, *args], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
    took = time.perf_counter() - start
    if done.returncode != 0:
        tail = (done.stderr.strip() or done.stdout.strip())[-1500:]
        raise CommandFailed(f"`{Path(tool.exe).name} {' '.join(args)}` exited {done.returncode} in {cwd}:\n{tail}")
    return took


def bench_help(tool: Tool, reps: int) -> float:
    cwd = tool.fresh_dir()
    timed(tool, ["--help"], cwd)  # warm-up: byte-compiles the imports once, as any installed tool would
    return statistics.median(timed(tool, ["--help"], cwd) for _ in range(reps))


def bench_hello(tool: Tool, reps: int) -> tuple[float, float]:
    """(median first run in a fresh project, median rerun in one project)."""
    firsts = []
    for _ in range(reps):
        project = tool.fresh_dir()
        state = tool.fresh_dir() if tool.state_var else None
        firsts.append(timed(tool, ["run", "hello"], project, state))
    project = tool.fresh_dir()
    state = tool.fresh_dir() if tool.state_var else None
    timed(tool, ["run", "hello"], project, state)
    reruns = [timed(tool, ["run", "hello"], project, state) for _ in range(reps)]
    return statistics.median(firsts), statistics.median(reruns)


def bench_many(tool: Tool, k: int, concurrency: int) -> float:
    project = tool.fresh_dir()
    state = tool.fresh_dir() if tool.state_var else None
    took = timed(tool, ["run", "hello", "--k", str(k), "--concurrency", str(concurrency)], project, state,
                 timeout=1800)
    return k / took


def our_tool() -> Tool:
    candidates = [Path(sys.executable).parent / "agentenv", ROOT / ".venv" / "bin" / "agentenv"]
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return Tool("ours", str(c), clean_env())
    found = shutil.which("agentenv")
    if found:
        return Tool("ours", found, clean_env())
    sys.exit("agentenv is not installed: run scripts/setup.sh first")


def reference_tool(venv: Path) -> Tool | str:
    """The reference's CLI in its side venv (installing it if needed), or why it is unavailable."""
    exe = venv / "bin" / "agent-env"
    if not exe.is_file():
        python = shutil.which("python3") or sys.executable
        print(f"Installing the reference ({REF_PACKAGE}) into {venv} (once; reused later)...", flush=True)
        steps = [[python, "-m", "venv", str(venv)],
                 [str(venv / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check",
                  "-q", REF_PACKAGE]]
        for cmd in steps:
            try:
                done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
            except (OSError, subprocess.TimeoutExpired) as exc:
                return f"`{' '.join(cmd)}` failed: {exc}"
            if done.returncode != 0:
                lines = [ln for ln in (done.stderr + done.stdout).splitlines()
                         if ln.strip() and not ln.startswith("WARNING: Location")]
                return f"`{' '.join(cmd[-3:])}` exited {done.returncode}: " + " / ".join(lines[-5:])
        if not exe.is_file():
            return f"{REF_PACKAGE} installed, but {exe} is missing"
    env = clean_env()
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return Tool("reference", str(exe), env, state_var="XDG_STATE_HOME")


def version_of(tool: Tool) -> str:
    try:
        out = subprocess.run([tool.exe, "--version"], capture_output=True, text=True, env=tool.env, timeout=60)
        return (out.stdout.strip() or out.stderr.strip()).splitlines()[0]
    except (OSError, subprocess.TimeoutExpired, IndexError):
        return "?"


def fmt_s(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def main() -> int:
    parser = argparse.ArgumentParser(description="Benchmark the agentenv CLI (and the reference's, side by side).")
    parser.add_argument("--with-reference", action="store_true",
                        help=f"also time the reference ({REF_PACKAGE}) from a side venv")
    parser.add_argument("--reference-venv", type=Path, default=REF_VENV_DEFAULT,
                        help=f"the side venv for the reference (default {REF_VENV_DEFAULT})")
    parser.add_argument("--help-reps", type=int, default=10)
    parser.add_argument("--hello-reps", type=int, default=5)
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=20)
    args = parser.parse_args()

    ours = our_tool()
    ref: Tool | None = None
    if args.with_reference:
        got = reference_tool(args.reference_venv)
        if isinstance(got, str):
            print(f"Reference not available, measuring ours only: {got}")
        else:
            ref = got

    tools = [t for t in (ours, ref) if t is not None]
    print(f"Python {platform.python_version()} on {platform.system()} {platform.machine()}, "
          f"{os.cpu_count()} CPUs")
    for t in tools:
        print(f"  {t.label}: {version_of(t)} ({t.exe})")
    print()

    results: dict[str, dict[str, float | None]] = {t.label: {} for t in tools}
    failures: list[str] = []
    def attempt(label: str, key: str, measure: Callable[[], T]) -> T | None:
        """The measurement, or None (and the failure noted) when the command fails."""
        print(f"measuring {label}: {key} ...", flush=True)
        try:
            return measure()
        except (CommandFailed, subprocess.TimeoutExpired) as exc:
            failures.append(f"{label} {key}: {exc}")
            return None

    for t in tools:
        r = results[t.label]
        r["help"] = attempt(t.label, "help", lambda: bench_help(t, args.help_reps))
        hello = attempt(t.label, "hello", lambda: bench_hello(t, args.hello_reps))
        r["hello_first"], r["hello_rerun"] = hello if hello else (None, None)
    print(f"measuring ours: run hello --k {args.k} --concurrency {args.concurrency} ...", flush=True)
    try:
        results["ours"]["many"] = bench_many(ours, args.k, args.concurrency)
    except (CommandFailed, subprocess.TimeoutExpired) as exc:
        failures.append(f"ours many: {exc}")
        results["ours"]["many"] = None
    for t in tools:
        t.cleanup()

    rows = [
        (f"agentenv --help (median of {args.help_reps})", "help", "<= 150 ms", HELP_TARGET_S),
        (f"run hello, first run in a fresh project (median of {args.hello_reps})", "hello_first", "<= 0.5 s",
         HELLO_TARGET_S),
        (f"run hello, rerun in the same project (median of {args.hello_reps})", "hello_rerun", "<= 0.5 s",
         HELLO_TARGET_S),
    ]
    table = [["measure", "target", "ours", "", "reference", "reference / ours"]]
    for label, key, target_text, target in rows:
        mine = results["ours"].get(key)
        theirs = results["reference"].get(key) if ref else None
        verdict = "" if mine is None else ("ok" if mine <= target else "MISSED")
        ratio = f"{theirs / mine:.1f}x" if mine and theirs else "-"
        table.append([label, target_text, fmt_s(mine), verdict, fmt_s(theirs), ratio])
    many = results["ours"].get("many")
    table.append([f"run hello --k {args.k} --concurrency {args.concurrency}", "no error",
                  "-" if many is None else f"{many:.1f} runs/s", "ok" if many else "FAILED", "-", "-"])
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    print()
    for i, row in enumerate(table):
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))
    if ref is None and args.with_reference:
        print("\n(reference not measured: see above)")
    elif ref is None:
        print("\n(add --with-reference to time the reference side by side; its own notes say "
              "1.9-2.3 s for --help and 1.6-1.8 s for run hello on these machines)")
    if failures:
        print("\nFailures:")
        for f in failures:
            print(f"  - {f}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
