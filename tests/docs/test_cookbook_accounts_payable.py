"""docs/cookbooks/accounts-payable.md works as written: its `$ agentenv` commands run in page order in one empty
project folder, as a reader following it would, and exit as the page says (0, or 1 after `<!-- exit 1 -->`).

What the page cannot do by itself is done here: its no-test `cp -r .../examples/accounts-payable/{envs,artifacts,
tasks} accounts-payable/` block (the source is the reader's checkout) copies those folders at that point of the
page; run ids on the page (`week-20261201-0fa31f5f`) are replaced by the newest real run of the same task;
`--agent tool-loop` runs against the local wire-format model server, written into the project's
`.agentenv/config.toml` first as the page says (kits.cookbook, the model's replies in kits.accounts_payable);
`agentenv tui --run RUN` opens the TUI's app on the project in this process, where the DAG, Tools and Scores tabs
must show the run's steps, the clerk's tool calls (the refused approval among them) and both verifiers' scores.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

from kits.accounts_payable import model_script
from kits.cookbook import model_in_project, open_run_in_tui
from kits.warm_cli import run_agentenv

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "cookbooks" / "accounts-payable.md"
RUN_ID = re.compile(r"\b([A-Za-z0-9_.-]+?)-(\d{8})-([0-9a-f]{8})\b")
COPY = re.compile(r"^cp -r \S*examples/accounts-payable/\{([a-z,]+)\} (\S+)/$")


def blocks(text: str) -> list[tuple[int, str, list[str]]]:
    """(line number, the marker on the line before it or "", the `$` commands) of every ```console block."""
    out, lines = [], text.splitlines()
    for i, line in enumerate(lines):
        if line.strip() == "```console":
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
            before = next((lines[k].strip() for k in range(i - 1, -1, -1) if lines[k].strip()), "")
            marker = before if before.startswith("<!--") else ""
            out.append((i + 1, marker, [ln[2:].strip() for ln in lines[i + 1:end] if ln.startswith("$ ")]))
    return out


def test_the_page_is_linked_and_every_tested_command_is_agentenv():
    assert "cookbooks/accounts-payable.md" in (ROOT / "docs" / "index.md").read_text()
    assert "(accounts-payable.md)" in (ROOT / "docs" / "cookbooks" / "index.md").read_text()
    page = blocks(PAGE.read_text())
    skipped = [c for _, marker, cmds in page if marker == "<!-- no-test -->" for c in cmds]
    assert [c for c in skipped if not COPY.match(c)] == [], "every command but the copy is run by this test"
    tested = [(n, c) for n, marker, cmds in page if marker != "<!-- no-test -->" for c in cmds]
    assert len(tested) >= 7
    assert any(c.startswith("agentenv tui") for _, c in tested) and any("tool-loop" in c for _, c in tested)
    assert [c for _, c in tested if not c.startswith("agentenv ")] == []


def test_the_page_from_an_empty_folder_to_a_score(tmp_path, monkeypatch):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTENV_") or k == "AGENTENV_SANDBOX_DEFAULT"}
    env["HOME"] = str(tmp_path / "home")
    (tmp_path / "home").mkdir()
    project = tmp_path / "project"
    project.mkdir()

    def agentenv(argv: list[str]) -> subprocess.CompletedProcess:
        return run_agentenv(list(argv), cwd=project, env=env, timeout=180)

    ran, copied, outputs = 0, False, {}
    for line_no, marker, commands in blocks(PAGE.read_text()):
        if marker == "<!-- no-test -->":
            for command in commands:
                copy = COPY.match(command)
                if copy:
                    for folder in copy.group(1).split(","):
                        shutil.copytree(ROOT / "examples" / "accounts-payable" / folder,
                                        project / copy.group(2) / folder, dirs_exist_ok=True)
                    copied = True
            continue
        for command in commands:
            for match in RUN_ID.finditer(command):
                rows = json.loads(agentenv(["runs", "list", "--json", "--task", match.group(1), "--limit", "1"]).stdout)
                assert rows, f"line {line_no}: `{command}` names a run no earlier command made"
                command = command.replace(match.group(0), rows[0]["run_id"])
            if command.startswith("agentenv tui"):
                check_the_tui(project, shlex.split(command)[-1], monkeypatch)
                outputs[command] = ""
                ran += 1
                continue
            if "--agent tool-loop" in command:
                with model_in_project(project, model_script(), "sk-test-ap-cookbook") as server:
                    done = agentenv(shlex.split(command)[1:])
                    assert len(server.requests) == len(model_script()), f"line {line_no}: `{command}`"
                    assert all(not r.problems for r in server.requests), [r.problems for r in server.requests]
            else:
                done = agentenv(shlex.split(command)[1:])
            expected = 1 if marker == "<!-- exit 1 -->" else 0
            assert done.returncode == expected, (f"line {line_no}: `{command}` exited {done.returncode}, the page "
                                                 f"says {expected}\n{done.stdout}\n{done.stderr}")
            outputs[command] = done.stdout
            ran += 1
    assert copied and ran >= 7
    run = next(out for cmd, out in outputs.items() if cmd.endswith("--task week"))
    assert "tasks/week.json v1: failed (grade: 0.87, outcome: 0.71)" in run
    show = next(out for cmd, out in outputs.items() if cmd.startswith("agentenv runs show") and "--json" not in cmd)
    assert "the clerk approved it: it would be paid" in show and "[FAIL] no_duplicate_paid" in show
    model = next(out for cmd, out in outputs.items() if cmd.endswith("--agent tool-loop"))
    assert "tasks/week.json v1: passed (grade: 1, outcome: 1)" in model, model
    runs = json.loads(agentenv(["runs", "list", "--json", "--task", "week"]).stdout)
    assert [r["status"] for r in runs] == ["passed", "failed"]  # the model, then the scripted clerk
    assert "sk-test-ap-cookbook" not in agentenv(["runs", "show", runs[0]["run_id"], "--json"]).stdout


def check_the_tui(project: Path, run_id: str, monkeypatch) -> None:
    """The scripted clerk's run: its steps in the DAG, the clerk's tool calls (26 invoices read, the approval
    above the limit refused), and both verifiers' scores."""
    from kits.tui import until

    async def scenario(pilot, screen) -> None:
        state = screen.state
        assert {"deploy", "seed", "lock_down", "solver", "judge", "work", "grade", "outcome"} <= set(state.step_ids())
        await pilot.press("3")
        await until(pilot, lambda: sum(c.tool == "read_invoice" for c in state.tool_calls) == 26,
                    what="the clerk's tool calls to load")
        clerk = [c for c in state.tool_calls if c.role == "clerk"]
        assert "decision_log" not in {c.tool for c in clerk}
        refused = [c for c in clerk if "approval_limit_exceeded" in f"{c.result} {c.error}"]
        assert [(c.tool, c.arguments["invoice_id"]) for c in refused] == [("approve_invoice", "INV-2017")]
        await pilot.press("4")
        scores = {name: round(v["score"], 2) for name, v in state.verifications().items()}
        assert scores == {"grade": 0.87, "outcome": 0.71}
    open_run_in_tui(project, run_id, monkeypatch, scenario)
