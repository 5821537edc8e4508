"""examples/plugins/verifier-steps (agentenv-verifier-steps: the task steps `http_probe_verifier` and
`sql_state_verifier`), installed for real with pip into a throwaway venv (tests/kits/plugin_venv.py, once for the
module) and used as a user would: `agentenv plugin list/show`, `agentenv task validate` of bad configs, and
`agentenv run` of the package's bundle (a process sandbox running a tiny HTTP server over a SQLite file, and an env)
and of bundles written here, each in a fresh project folder under pytest's basetemp, with TMPDIR pointed at a folder
of the test's so what the steps leave behind is seen. The HTTP cases talk to a real server in this process
(127.0.0.1, a free port): counted retries, redirects off the allowed hosts, headers on a changed origin, bounded
bodies.
"""

from __future__ import annotations

import json
import shutil
import socket
import sqlite3
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from kits.plugin_venv import PLUGINS, PluginVenv

FOLDER = PLUGINS / "verifier-steps"
BUNDLE = FOLDER / "bundle"
DIST = "agentenv-verifier-steps"
PORT_IN_BUNDLE = 18431
SCRATCH_PREFIX = "agentenv-verifier-steps-"


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> PluginVenv:
    v = PluginVenv.create(tmp_path_factory.mktemp("verifier-steps") / "venv")
    v.install(FOLDER)
    assert v.has(DIST)
    return v


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def project_in(tmp_path: Path) -> tuple[Path, Path]:
    """A fresh project folder and an empty TMPDIR for the command."""
    project, tmp = tmp_path / "project", tmp_path / "tmp"
    project.mkdir(parents=True)
    tmp.mkdir()
    return project, tmp


def run(venv: PluginVenv, bundle: Path, project: Path, tmp: Path, *extra: str, code: int | None = None) -> list[dict]:
    proc = venv.shell(f"TMPDIR={tmp} agentenv run {bundle} --json {' '.join(extra)}", project, code=code)
    # a command that printed no JSON failed: say how (one did so once in a full parallel run, cause not yet seen)
    assert proc.stdout.strip(), f"agentenv run printed nothing (exit {proc.returncode}); stderr:\n{proc.stderr}"
    return list(json.loads(proc.stdout))


def record(venv: PluginVenv, project: Path, run_id: str) -> dict[str, Any]:
    return dict(json.loads(venv.agentenv("runs", "show", run_id, "--json", cwd=project).stdout))


def scratch_left(tmp: Path) -> list[Path]:
    return sorted(tmp.glob(f"{SCRATCH_PREFIX}*"))


def write_bundle(root: Path, tasks: dict[str, list[dict]]) -> Path:
    (root / "tasks").mkdir(parents=True)
    for name, steps in tasks.items():
        (root / "tasks" / f"{name}.json").write_text(json.dumps(steps, indent=1))
    return root


def shop_copy(tmp_path: Path) -> tuple[Path, int]:
    """The package's bundle, copied, on a free port (the bundle's own port may be taken on a shared machine)."""
    port = free_port()
    copy = tmp_path / "shop-bundle"
    shutil.copytree(BUNDLE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    task = copy / "tasks" / "shop.json"
    task.write_text(task.read_text().replace(str(PORT_IN_BUNDLE), str(port)))
    return copy, port


# -- the plugin as agentenv sees it ------------------------------------------------------------------------------

def test_plugin_list_and_show_have_both_steps_active(venv: PluginVenv, tmp_path: Path) -> None:
    project, _ = project_in(tmp_path)
    listed = json.loads(venv.agentenv("plugin", "list", "--json", cwd=project).stdout)
    ours = [d for d in listed["plugins"] if d["name"] == DIST]
    assert len(ours) == 1 and ours[0]["version"] == "0.1.0"
    assert sorted((c["group"], c["name"], c["status"]) for c in ours[0]["contributions"]) == [
        ("task_steps", "http_probe_verifier", "active"), ("task_steps", "sql_state_verifier", "active")]
    text = venv.agentenv("plugin", "show", DIST, cwd=project).stdout
    assert "http_probe_verifier" in text and "sql_state_verifier" in text and "active" in text


# -- the package's bundle: a pass and a fail --------------------------------------------------------------------

def test_the_shop_bundle_passes_and_its_steps_leave_nothing(venv: PluginVenv, tmp_path: Path) -> None:
    bundle, port = shop_copy(tmp_path)
    project, tmp = project_in(tmp_path)
    runs = run(venv, bundle, project, tmp, code=0)
    assert [(r["status"], r["score"]) for r in runs] == [("passed", 1.0)]
    rec = record(venv, project, runs[0]["run_id"])
    probe = rec["verifications"]["probe"]
    assert [(r["type"], r["result"]) for r in probe["results"]] == [
        ("status", True), ("json_path", True), ("json_path", True), ("regex", True)]
    meta = rec["context"]["metadata"]["http_probes"]["probe"]
    assert meta["url"] == f"http://127.0.0.1:{port}/health" and meta["status"] == 200
    assert 1 <= meta["attempts"] <= 30  # the server may need a retry or two to come up: counted, bounded
    state = rec["verifications"]["state"]["results"]
    assert [(r["source"], r["result"]) for r in state] == [("sqlite", True), ("sqlite", True), ("env", True),
                                                           ("env", True)]
    assert state[1]["rows"] == [["BOLT-M6", 25], ["NUT-M6", 20]]
    # teardown: the scratch folder (SQLite copy, env tables) is gone, and so is the record of it
    assert scratch_left(tmp) == []
    assert rec["context"]["verifier_steps_scratch"] == []
    # the server the sandbox ran is stopped with it
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0


def test_wrong_expectations_grade_zero_with_reasons(venv: PluginVenv, tmp_path: Path) -> None:
    bundle, _ = shop_copy(tmp_path)
    task = bundle / "tasks" / "shop.json"
    doc = json.loads(task.read_text())
    steps = {s["id"]: s for s in doc["steps"]}
    steps["probe"].update(max_attempts=8, backoff_seconds=0.2)  # ~6 s of waits: the server is up by then
    steps["probe"]["checks"][1]["equals"] = 4
    steps["state"]["checks"][0]["expect_value"] = 3
    steps["state"]["checks"][3]["expect_rows"] = [["NUT-M6", 80]]
    task.write_text(json.dumps(doc))
    project, tmp = project_in(tmp_path)
    runs = run(venv, bundle, project, tmp, code=1)
    assert [(r["status"], r["score"]) for r in runs] == [("failed", 0.0)]
    rec = record(venv, project, runs[0]["run_id"])
    probe = rec["verifications"]["probe"]
    assert probe["score"] == 0 and [r["result"] for r in probe["results"]] == [True, True, False, True]
    assert probe["results"][2]["justification"] == "$.orders = 3, wanted 4"
    assert rec["context"]["metadata"]["http_probes"]["probe"]["attempts"] == 8  # retried to its budget
    state = rec["verifications"]["state"]
    assert [r["result"] for r in state["results"]] == [False, True, True, False]
    assert state["results"][0]["justification"] == "value 2, wanted 3"
    assert "wanted [[\"NUT-M6\", 80]]" in state["results"][3]["justification"]
    assert scratch_left(tmp) == []


# -- config errors, before anything runs ------------------------------------------------------------------------

BAD_STEPS: list[tuple[dict, str]] = [
    ({"type": "http_probe_verifier", "url": "http://example.com/"},
     "is not on this machine or a sandbox of the run"),
    ({"type": "http_probe_verifier", "url": "ftp://127.0.0.1/x"}, "only http:// and https:// URLs are probed"),
    ({"type": "http_probe_verifier", "port": 8000, "sandbox_name": "my box"}, "is not a sandbox name"),
    ({"type": "http_probe_verifier", "url": "http://127.0.0.1:1/", "port": 8000}, "give url, or port"),
    ({"type": "http_probe_verifier", "url": "http://127.0.0.1:1/", "checks": [{"type": "regex", "pattern": "(["}]},
     "checks[0] (regex).pattern: '([' does not compile"),
    ({"type": "http_probe_verifier", "url": "http://127.0.0.1:1/", "checks": [{"type": "json_path", "path": "$..x["}]},
     "checks[0] (json_path).path: '$..x[' is not a JSON path"),
    ({"type": "http_probe_verifier", "url": "http://127.0.0.1:1/", "headers": {"Authorization": "secret:API_KEY"}},
     "headers.Authorization: secret: references are not resolved by this step"),
    ({"type": "http_probe_verifier", "url": "http://127.0.0.1:1/", "expected_status": 42},
     "expected_status: 42 must be HTTP status codes"),
    ({"type": "sql_state_verifier", "sqlite_path": "/app/a.db",
      "checks": [{"query": "DELETE FROM orders", "expect_count": 0}]},
     "checks[0].query: is a DELETE statement; only SELECT queries are run"),
    ({"type": "sql_state_verifier", "env_id": "inventory",
      "checks": [{"query": "SELECT 1; DROP TABLE items", "expect_count": 1}]},
     "checks[0].query: holds 2 statements; give one SELECT"),
    ({"type": "sql_state_verifier", "sqlite_path": "/app/a.db",
      "checks": [{"query": "WITH x AS (SELECT 1) DELETE FROM orders", "expect_count": 0}]},
     "checks[0].query: is a DELETE statement"),
    ({"type": "sql_state_verifier", "sqlite_path": "/app/a.db", "env_id": "inventory",
      "checks": [{"query": "SELECT 1", "expect_value": 1}]}, "checks[0]: say which source it reads"),
    ({"type": "sql_state_verifier", "sqlite_path": "/app/a.db", "checks": [{"query": "SELECT 1"}]},
     "checks[0]: give what to expect"),
    ({"type": "sql_state_verifier", "sqlite_path": "/app/a.db",
      "checks": [{"query": "SELECT 1", "source": "env", "expect_value": 1}]},
     "checks[0].source: 'env' is not configured on this step"),
    ({"type": "sql_state_verifier", "checks": [{"query": "SELECT 1", "expect_value": 1}]},
     "give sqlite_path (a SQLite file in a sandbox) and/or env_id"),
]


def test_bad_configs_are_refused_by_task_validate_each_with_its_reason(venv: PluginVenv, tmp_path: Path) -> None:
    project, _ = project_in(tmp_path)
    steps = [{"id": f"s{i}", **raw, "depends_on": []} for i, (raw, _) in enumerate(BAD_STEPS)]
    (project / "bad.json").write_text(json.dumps(steps))
    out = venv.agentenv("task", "validate", "bad.json", cwd=project, code=None)
    assert out.returncode != 0
    text = out.stdout + out.stderr
    assert f"{len(BAD_STEPS)} problem(s)" in text
    for i, (_, reason) in enumerate(BAD_STEPS):
        line = next((ln for ln in text.splitlines() if f"step 's{i}'" in ln), "")
        assert reason in line, (i, reason, text)
    # each is fine once fixed: a good config of each step validates
    good = [{"id": "probe", "type": "http_probe_verifier", "url": "http://localhost:8000/x", "depends_on": [],
             "checks": [{"type": "json_path", "path": "$.a[0][\"b c\"]", "equals": 1}]},
            {"id": "sql", "type": "sql_state_verifier", "sqlite_path": "/app/a.db", "depends_on": [],
             "checks": [{"query": "-- the orders\nWITH o AS (SELECT * FROM orders) SELECT count(*) FROM o",
                         "expect_value": 1}]}]
    (project / "good.json").write_text(json.dumps(good))
    venv.agentenv("task", "validate", "good.json", cwd=project)


def test_a_bundle_with_a_bad_step_runs_nothing(venv: PluginVenv, tmp_path: Path) -> None:
    project, tmp = project_in(tmp_path)
    bundle = write_bundle(tmp_path / "bad-bundle", {"bad": [
        {"id": "box", "type": "deploy_sandbox", "sandbox_type": "process"},
        {"id": "sql", "type": "sql_state_verifier", "sqlite_path": "a.db",
         "checks": [{"query": "UPDATE orders SET qty = 0", "expect_count": 0}]}]})
    out = venv.shell(f"TMPDIR={tmp} agentenv run {bundle}", project, code=None)
    assert out.returncode != 0
    assert "is an UPDATE statement; only SELECT queries are run" in out.stdout + out.stderr
    assert json.loads(venv.agentenv("runs", "list", "--json", cwd=project).stdout) == []
    assert scratch_left(tmp) == []


# -- the probe against a real server: retries, redirects, headers, sizes ----------------------------------------

class _Server:
    def __init__(self) -> None:
        self.hits: dict[str, int] = {}
        self.headers: list[dict[str, str]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path
                outer.hits[path] = outer.hits.get(path, 0) + 1
                outer.headers.append({k.lower(): v for k, v in self.headers.items()})
                port = int(self.server.server_address[1])  # type: ignore[index]  # an HTTPServer: (host, port)
                if path == "/flaky":
                    self._send(503 if outer.hits[path] < 3 else 200, b'{"ready": true}')
                elif path == "/down":
                    self._send(503, b"{}")
                elif path == "/out":
                    self._redirect("http://example.invalid/steal")
                elif path == "/hop":
                    self._redirect(f"http://localhost:{port}/echo")
                elif path == "/echo":
                    self._send(200, json.dumps({k.lower(): v for k, v in self.headers.items()}).encode())
                elif path == "/big":
                    self._send(200, b"a" * 5000 + b"END")
                else:
                    self._send(404, b"{}")

            def _redirect(self, to: str) -> None:
                self.send_response(302)
                self.send_header("Location", to)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def _send(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self.httpd.server_address[1])
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[_Server]:
    s = _Server()
    yield s
    s.close()


def test_probe_retries_redirects_headers_and_sizes(venv: PluginVenv, tmp_path: Path, server: _Server) -> None:
    base = f"http://127.0.0.1:{server.port}"
    probe = {"type": "http_probe_verifier", "depends_on": [], "backoff_seconds": 0}
    bundle = write_bundle(tmp_path / "probe-bundle", {"probes": [
        {**probe, "id": "flaky", "url": f"{base}/flaky", "checks": [{"type": "json_path", "path": "$.ready",
                                                                      "equals": True}]},
        # counted budget: waits of 0.5 s planned while they fit in 1 s -> 3 attempts, however fast the machine
        {**probe, "id": "budget", "url": f"{base}/down", "max_attempts": 50, "backoff_seconds": 0.5,
         "backoff_factor": 1, "deadline_seconds": 1},
        {**probe, "id": "out", "url": f"{base}/out", "max_attempts": 5},
        {**probe, "id": "hop", "url": f"{base}/hop", "headers": {"X-Task": "t-1"},
         "checks": [{"type": "json_path", "path": "$.x-task", "exists": False}]},
        {**probe, "id": "echo", "url": f"{base}/echo", "headers": {"X-Task": "t-1"},
         "checks": [{"type": "json_path", "path": "$.x-task", "equals": "t-1"}]},
        {**probe, "id": "big", "url": f"{base}/big", "max_response_bytes": 100,
         "checks": [{"type": "regex", "pattern": "END"}]},
    ]})
    project, tmp = project_in(tmp_path)
    runs = run(venv, bundle, project, tmp, code=1)
    rec = record(venv, project, runs[0]["run_id"])
    verdicts = {k: v["score"] for k, v in rec["verifications"].items()}
    assert verdicts == {"flaky": 1.0, "budget": 0.0, "out": 0.0, "hop": 1.0, "echo": 1.0, "big": 0.0}
    probes = rec["context"]["metadata"]["http_probes"]
    assert probes["flaky"]["attempts"] == 3 and server.hits["/flaky"] == 3
    assert probes["budget"]["attempts"] == 3 and server.hits["/down"] == 3
    # a redirect off the allowed hosts is not followed, and not retried
    assert probes["out"]["attempts"] == 1 and server.hits["/out"] == 1
    assert "http://example.invalid/steal" in probes["out"]["error"]
    assert "does not follow" in rec["verifications"]["out"]["results"][0]["justification"]
    # followed to another loopback origin, without the task's header; the header's value is never recorded
    assert probes["hop"]["redirects"] == 1 and probes["hop"]["final_url"] == f"http://localhost:{server.port}/echo"
    assert probes["hop"]["header_names"] == ["X-Task"] and "t-1" not in json.dumps(probes)
    # nothing but the task's headers reaches the server: no credentials or cookies of agentenv's
    for seen in server.headers:
        assert not {"authorization", "cookie", "proxy-authorization"} & set(seen)
    assert probes["big"]["truncated"] is True
    assert "cut at 100 bytes" in rec["verifications"]["big"]["results"][1]["justification"]


# -- the SQLite source: links, non-databases, --keep ------------------------------------------------------------

def test_sqlite_source_never_follows_a_link_and_refuses_a_non_database(venv: PluginVenv, tmp_path: Path) -> None:
    outside = tmp_path / "outside.db"
    db = sqlite3.connect(outside)
    db.execute("CREATE TABLE secrets (v TEXT)")
    db.execute("INSERT INTO secrets VALUES ('s3cr3t')")
    db.commit()
    db.close()
    check = [{"query": "SELECT v FROM secrets", "expect_count": 1}]
    bundle = write_bundle(tmp_path / "link-bundle", {"links": [
        {"id": "box", "type": "deploy_sandbox", "sandbox_type": "process"},
        {"id": "plant", "type": "verify_sandbox",
         "criteria": [{"type": "bash_cmd_succeeds", "bash_cmd": f"ln -s {outside} link.db && echo hi > text.db"}]},
        {"id": "link", "type": "sql_state_verifier", "sqlite_path": "link.db", "checks": check,
         "fail_task_on_error": False},
        {"id": "text", "type": "sql_state_verifier", "sqlite_path": "text.db", "checks": check,
         "fail_task_on_error": False},
        # names no step deployed, and a port the sandbox does not expose: the step fails, naming what there is
        {"id": "ghost", "type": "sql_state_verifier", "sandbox_name": "ghost", "sqlite_path": "a.db", "checks": check,
         "fail_task_on_error": False},
        {"id": "port", "type": "http_probe_verifier", "sandbox_name": "sandbox", "port": 9,
         "fail_task_on_error": False}]})
    project, tmp = project_in(tmp_path)
    runs = run(venv, bundle, project, tmp, code=None)
    rec = record(venv, project, runs[0]["run_id"])
    assert rec["verifications"]["plant"]["score"] == 1.0
    assert "link" not in rec["verifications"] and "text" not in rec["verifications"]
    errors = {s: rec["steps"][s]["error"] or "" for s in ("link", "text", "ghost", "port")}
    assert "no sandbox named 'ghost' is deployed in this run (deployed: sandbox)" in errors["ghost"], errors
    assert "sandbox 'sandbox' does not expose port 9 (it exposes none)" in errors["port"], errors
    assert "cannot read 'link.db' in sandbox 'sandbox'" in errors["link"], errors
    assert "text.db in sandbox 'sandbox' is not a SQLite database" in errors["text"], errors
    assert "s3cr3t" not in json.dumps(rec)
    assert scratch_left(tmp) == []


def test_keep_leaves_the_scratch_copy_and_a_plain_run_removes_it(venv: PluginVenv, tmp_path: Path) -> None:
    steps: list[dict] = [{"id": "box", "type": "deploy_sandbox", "sandbox_type": "process"},
             {"id": "make", "type": "verify_sandbox", "criteria": [{"type": "bash_cmd_succeeds", "bash_cmd":
              "python3 -c \"import sqlite3; d = sqlite3.connect('a.db'); d.execute('CREATE TABLE t (x)'); "
              "d.executemany('INSERT INTO t VALUES (?)', [(i,) for i in range(5)]); d.commit()\""}]},
             {"id": "sql", "type": "sql_state_verifier", "sqlite_path": "/app/a.db", "max_rows": 3,
              "checks": [{"query": "SELECT x FROM t", "expect_count": 5},
                         {"query": "SELECT count(*) FROM t", "expect_value": 5}]}]
    bundle = write_bundle(tmp_path / "keep-bundle", {"keep": steps})
    for keep in (True, False):
        project, tmp = project_in(tmp_path / ("keep" if keep else "plain"))
        runs = run(venv, bundle, project, tmp, *(["--keep"] if keep else []), code=None)
        rec = record(venv, project, runs[0]["run_id"])
        rows = rec["verifications"]["sql"]["results"]
        assert [r["result"] for r in rows] == [False, True]
        assert rows[0]["justification"] == "the query returned more than 3 rows (max_rows)"
        left = scratch_left(tmp)
        if keep:
            assert len(left) == 1 and (left[0] / "sandbox.sqlite").is_file()
            assert rec["context"]["verifier_steps_scratch"] == [{"step_id": "sql", "path": str(left[0])}]
        else:
            assert left == []
