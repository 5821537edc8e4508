"""CPU of short `agentenv` commands, this tree against another revision, side by side.

    .venv/bin/python bench/bench_commands_ab.py --base REV [--reps 10] [-- COMMAND ...]

The other revision is checked out in a temporary git worktree and put first on PYTHONPATH, so the same venv runs
both; the two alternate, one call each in turn, in one scratch project (these machines drift 2x between hours,
so only a ratio measured in one run means anything). Prints each command's mean CPU (user + system of the
process and its children) for both and the ratio new/base. Default commands: `task list`, `runs list`,
`env list`, `run hello`.

Nothing here is asserted by the tests. Exit 1 when a command fails.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
AGENTENV = [sys.executable, "-c", "from agentenv_local.cli.main import main; main()"]
DEFAULT = [["task", "list"], ["runs", "list"], ["env", "list"], ["run", "hello"]]


def cpu_of(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[3:])} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the git revision to compare against (e.g. HEAD~3)")
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("command", nargs="*", help="one command to time instead of the defaults")
    args = parser.parse_args()
    commands = [args.command] if args.command else DEFAULT
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTENV_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # compiled once, as an installed tool is
    with tempfile.TemporaryDirectory(prefix="agentenv-ab-") as tmp:
        base_tree, project = Path(tmp) / "base", Path(tmp) / "project"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(base_tree), args.base],
                       check=True)
        try:
            project.mkdir()
            trees = {"base": {**env, "PYTHONPATH": str(base_tree)}, "new": {**env, "PYTHONPATH": str(ROOT)}}
            print(f"{'command':<14} {'base s':>8} {'new s':>8} {'new/base':>9}   (CPU per call, {args.reps} each)")
            for command in commands:
                for tree_env in trees.values():  # once each first: compiled caches, the store made
                    cpu_of(AGENTENV + command, project, tree_env)
                totals = dict.fromkeys(trees, 0.0)
                for _ in range(args.reps):
                    for name, tree_env in trees.items():
                        totals[name] += cpu_of(AGENTENV + command, project, tree_env)
                base, new = totals["base"] / args.reps, totals["new"] / args.reps
                print(f"{' '.join(command):<14} {base:8.3f} {new:8.3f} {new / base:9.2f}")
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base_tree)], check=False)
            shutil.rmtree(base_tree, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
