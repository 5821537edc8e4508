"""docs/cookbooks/enterprise-escalation.md works: every `$ ` line of its ```console blocks runs, in page order, in
one fresh project folder, the way a reader would (later commands see what earlier ones made), and exits 0; the
output lines the page shows come out (those with run ids or durations, and `...`, are not compared).

Three commands need more than a shell: run ids on the page are examples, each replaced by the newest real run of
the same task; `--agent tool-loop` runs against the local wire-format model server (written into the project's
`.agentenv/config.toml` first, as the page says); `agentenv tui --run RUN` opens the TUI's app on the project in
this process (a Pilot), where the Env tab must show the triggers' statuses and the Tools tab the RBAC refusal."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

from kits.cookbook import model_in_project, open_run_in_tui
from kits.escalation import model_script
from kits.servers import agentenv_exe

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "cookbooks" / "enterprise-escalation.md"
NO_TEST = "<!-- no-test -->"
RUN_ID = re.compile(r"\b([A-Za-z0-9_.-]+?)-(\d{8})-([0-9a-f]{8})\b")
DURATION = re.compile(r"\b\d+(\.\d+)?s\b")


def console_blocks(text: str) -> list[tuple[int, list[str], bool]]:
    """(line number, lines, skipped) of every ```console block, in page order."""
    blocks = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```console":
            j = i + 1
            while j < len(lines) and lines[j].strip() != "```":
                j += 1
            before = next((lines[k].strip() for k in range(i - 1, -1, -1) if lines[k].strip()), "")
            blocks.append((i + 1, lines[i + 1:j], before == NO_TEST))
            i = j + 1
        else:
            i += 1
    return blocks


def steps(block: list[str]) -> list[tuple[str, list[str]]]:
    """Each `$ ` command of a block with the output lines the page shows under it."""
    out: list[tuple[str, list[str]]] = []
    for line in block:
        if line.startswith("$ "):
            out.append((line[2:].strip(), []))
        elif out:
            out[-1][1].append(line)
    return out


def test_every_command_on_the_page_is_run_here():
    blocks = console_blocks(PAGE.read_text(encoding="utf-8"))
    assert not [n for n, _, skipped in blocks if skipped], "every block of this page is run by this test"
    commands = [c for _, lines, _ in blocks for c, _ in steps(lines)]
    assert sum(c.startswith("agentenv ") for c in commands) >= 6


def test_the_page_goes_from_an_empty_folder_to_a_score(tmp_path, monkeypatch):
    exe = agentenv_exe()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTENV_") or k == "AGENTENV_SANDBOX_DEFAULT"}
    env["HOME"] = str(tmp_path / "home")
    env["PATH"] = f"{Path(exe).parent}{os.pathsep}{env.get('PATH', '')}"
    (tmp_path / "home").mkdir()
    project = tmp_path / "project"
    project.mkdir()

    def newest_run(task: str) -> str:
        done = subprocess.run([exe, "runs", "list", "--json", "--task", task, "--limit", "1"], cwd=project,
                              env=env, capture_output=True, text=True, timeout=60)
        rows = json.loads(done.stdout) if done.returncode == 0 and done.stdout.strip() else []
        assert rows, f"the page names a run of {task!r}, but no earlier command made one"
        return str(rows[0]["run_id"])

    ran: list[str] = []
    for line_no, lines, _ in console_blocks(PAGE.read_text(encoding="utf-8")):
        for command, shown in steps(lines):
            for match in RUN_ID.finditer(command):
                command = command.replace(match.group(0), newest_run(match.group(1)))
            where = f"{PAGE.name} line {line_no}: `{command}`"
            if command.startswith("agentenv tui"):
                check_the_tui(project, shlex.split(command)[-1], monkeypatch)
                ran.append(command)
                continue
            if "--agent tool-loop" in command:
                with model_in_project(project, model_script(), "sk-test-cookbook") as server:
                    done = subprocess.run(["bash", "-c", command], cwd=project, env=env, stdin=subprocess.DEVNULL,
                                          capture_output=True, text=True, timeout=300)
                    assert len(server.requests) == len(model_script()), where
            else:
                done = subprocess.run(["bash", "-c", command], cwd=project, env=env, stdin=subprocess.DEVNULL,
                                      capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, f"{where} exited {done.returncode}\n{done.stdout}\n{done.stderr}"
            for expected in shown:
                if expected.strip() in ("", "...") or RUN_ID.search(expected) or DURATION.search(expected):
                    continue
                assert expected in done.stdout, f"{where}: the page shows {expected!r}, the output:\n{done.stdout}"
            if command.startswith("agentenv run ./escalation-lab"):
                assert "passed (grade: 1, outcome: 1)" in done.stdout, done.stdout
            ran.append(command)
    assert any(c.startswith("agentenv tui") for c in ran) and any("tool-loop" in c for c in ran)
    runs = json.loads(subprocess.run([exe, "runs", "list", "--json", "--task", "escalation"], cwd=project, env=env,
                                     capture_output=True, text=True, timeout=60).stdout)
    assert [r["status"] for r in runs] == ["passed", "passed"]  # scripted, then the model


def check_the_tui(project: Path, run_id: str, monkeypatch) -> None:
    from kits.tui import until

    async def scenario(pilot, screen) -> None:
        await pilot.press("2")
        await until(pilot, lambda: screen.envs and screen.envs[0].triggers, what="the env panel to load")
        helpdesk = screen.envs[0]
        assert {t.id: t.status for t in helpdesk.triggers} == {
            "cto_email": "fired", "update_due": "fired", "first_response_deadline": "cancelled"}
        assert helpdesk.clock.mode == "stepped"
        assert helpdesk.roles["support"]["disabled"] == ["approve_credit_exception", "close_escalation"]
        await pilot.press("3")
        await until(pilot, lambda: any(c.tool == "approve_credit_exception" for c in screen.state.tool_calls),
                    what="the tool calls to load")
        denied = [c.tool for c in screen.state.tool_calls if c.denied]
        assert denied == ["approve_credit_exception"]
        assert {"receive_customer_email", "record_sla_event"} <= {
            c.tool for c in screen.state.tool_calls if c.role == "trigger"}
    open_run_in_tui(project, run_id, monkeypatch, scenario)
