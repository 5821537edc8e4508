"""examples/plugins/sqlite-app (agentenv-sqlite-app, the env type `sqlite_app`), installed for real with pip into a
throwaway venv (tests/kits/plugin_venv.py, once for the module) and used as a user would: `agentenv plugin
list/show`, `agentenv run` of bundles whose env.toml says `type = "sqlite_app"` (in a fresh project folder under
pytest's basetemp), and the env's server started from that venv and driven over MCP (streamable HTTP) and its data
plane, with the hostile cases: identifiers with quotes and semicolons, writes to read-only or hidden tables, queries
that are not one SELECT, huge results, and database paths that leave the env's folder.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from kits.plugin_venv import PLUGINS, PluginVenv

FOLDER = PLUGINS / "sqlite-app"
SHOP = FOLDER / "shop"
DIST = "agentenv-sqlite-app"


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> PluginVenv:
    v = PluginVenv.create(tmp_path_factory.mktemp("sqlite-app") / "venv")
    v.install(FOLDER)
    assert v.has(DIST)
    return v


def fresh_project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    return project


def tree_digest(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


# -- the plugin as agentenv sees it ------------------------------------------------------------------------------

def test_plugin_list_and_show_have_the_env_type_active(venv: PluginVenv, tmp_path: Path) -> None:
    project = fresh_project(tmp_path)
    listed = json.loads(venv.agentenv("plugin", "list", "--json", cwd=project).stdout)
    ours = [d for d in listed["plugins"] if d["name"] == DIST]
    assert len(ours) == 1 and ours[0]["version"] == "0.1.0"
    assert [(c["group"], c["name"], c["status"]) for c in ours[0]["contributions"]] == [
        ("env_types", "sqlite_app", "active")]
    shown = json.loads(venv.agentenv("plugin", "show", DIST, "--json", cwd=project).stdout)
    assert shown["groups"] == {"env_types": [
        {"name": "sqlite_app", "value": "agentenv_sqlite_app.env_type:SqliteAppType", "status": "active",
         "reason": None}]}
    text = venv.agentenv("plugin", "show", DIST, cwd=project).stdout
    assert "sqlite_app" in text and "active" in text
    venv.agentenv("plugin", "check", cwd=project)


# -- bundles that use it ----------------------------------------------------------------------------------------

def test_the_shop_bundle_refunds_the_order_and_the_verifier_reads_the_rows(venv: PluginVenv, tmp_path: Path) -> None:
    before = tree_digest(SHOP)
    project = fresh_project(tmp_path)
    runs = json.loads(venv.agentenv("run", str(SHOP), "--json", cwd=project).stdout)
    assert [(r["status"], r["score"]) for r in runs] == [("passed", 1.0)]
    record = json.loads(venv.agentenv("runs", "show", runs[0]["run_id"], "--json", cwd=project).stdout)
    rows = record["verifications"]["outcome"]["results"]
    assert {r["id"]: r["result"] for r in rows} == {"order_refunded": True, "one_refund": True, "two_writes": True}
    assert tree_digest(SHOP) == before  # the bundle's files are never written (each instance has its own copy)


SEED_ORDERS = [(1, "open"), (2, "open")]
COPY_TASK = {
    "steps": [
        {"id": "deploy", "type": "deploy_env", "env_id": "db"},
        {"id": "solver", "type": "deploy_agent", "agent_name": "solver", "env_ids": ["db"], "depends_on": ["deploy"],
         "config": {"plan": [
             {"tool": "insert_row", "args": {"table": "orders", "values": {"status": "new"}}},
             {"tool": "insert_row", "args": {"table": "customers", "values": {"name": "x"}}, "allow_error": True,
              "save_as": "denied"},
             {"reply": "{denied}"}]}},
        {"id": "ask", "type": "prompt_agent", "agent_name": "solver", "prompt": "add an order",
         "depends_on": ["solver"]},
        {"id": "outcome", "type": "env_outcome_verifier", "env_id": "db", "file_artifact_id": "verifier",
         "prompt_id": "ask", "depends_on": ["ask"]},
    ]}
COPY_VERIFIER = '''
import json, urllib.request

def verify(mcp_url, run):
    request = urllib.request.Request(run["env"]["gateway_url"].rstrip("/") + "/agentenv",
        data=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "data/get"}).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer " + run["env"]["admin_token"]})
    tables = json.load(urllib.request.urlopen(request))["result"]["parts"][0]["data"]
    reply = json.dumps(run["response"])
    return [
        {"id": "own_copy", "result": [o["status"] for o in tables["orders"]] == ["open", "open", "new"],
         "description": "the seed's two orders and this run's one"},
        {"id": "customers_kept", "result": [c["name"] for c in tables["customers"]] == ["Ann"],
         "description": "the read-only table is as seeded"},
        {"id": "refused", "result": "read_only_table" in reply, "description": "the write was refused"},
    ]
'''


def database_bundle(root: Path, env_toml: str) -> Path:
    """A bundle whose env `db` ships `shop.db`, a real SQLite file."""
    env = root / "envs" / "db"
    env.mkdir(parents=True)
    conn = sqlite3.connect(env / "shop.db")
    conn.executescript("CREATE TABLE orders (id INTEGER PRIMARY KEY, status TEXT);"
                       "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT);"
                       "INSERT INTO customers (name) VALUES ('Ann');")
    conn.executemany("INSERT INTO orders VALUES (?, ?)", SEED_ORDERS)
    conn.commit()
    conn.close()
    (env / "env.toml").write_text(env_toml)
    (root / "tasks").mkdir()
    (root / "tasks" / "add.json").write_text(json.dumps(COPY_TASK))
    (root / "artifacts" / "verifier").mkdir(parents=True)
    (root / "artifacts" / "verifier" / "verify.py").write_text(COPY_VERIFIER)
    return root


def test_a_shipped_database_file_is_copied_for_each_run(venv: PluginVenv, tmp_path: Path) -> None:
    bundle = database_bundle(tmp_path / "dbbundle",
                             'type = "sqlite_app"\ndatabase = "shop.db"\nwrite_tables = ["orders"]\n')
    seed = (bundle / "envs" / "db" / "shop.db").read_bytes()
    project = fresh_project(tmp_path)
    runs = json.loads(venv.agentenv("run", str(bundle), "--k", "2", "--json", cwd=project).stdout)
    assert [(r["status"], r["score"]) for r in runs] == [("passed", 1.0), ("passed", 1.0)]  # neither saw the other's
    assert (bundle / "envs" / "db" / "shop.db").read_bytes() == seed
    assert sorted(p.name for p in (bundle / "envs" / "db").iterdir()) == ["env.toml", "shop.db"]


@pytest.mark.parametrize(("env_toml", "expected"), [
    ('type = "sqlite_app"\ndatabase = "../../etc/passwd"\n', "database: '../../etc/passwd' must stay inside"),
    ('type = "sqlite_app"\ndatabase = "/etc/passwd"\n', "must be a path relative to the env's folder"),
    ('type = "sqlite_app"\n', "give exactly one of database"),
    ('type = "sqlite_app"\ndatabase = "shop.db"\nmodule = "evil.py:Evil"\n', "module: a sqlite_app env serves"),
    ('type = "sqlite_app"\ndatabase = "shop.db"\nread_only = true\nwrite_tables = ["orders"]\n',
     "write_tables: a read_only env has no writable tables"),
    ('type = "sqlite_app"\ndatabase = "shop.db"\ntables = ["orders"]\nwrite_tables = ["customers"]\n',
     "'customers' not in tables"),
    ('type = "sqlite_app"\ndatabase = "shop.db"\nmax_row = 5\n', "max_row: unknown key"),
])
def test_a_bad_env_toml_is_refused_before_anything_is_stored(venv: PluginVenv, tmp_path: Path, env_toml: str,
                                                             expected: str) -> None:
    bundle = database_bundle(tmp_path / "bad", env_toml)
    project = fresh_project(tmp_path)
    failed = venv.agentenv("run", str(bundle), cwd=project, code=1)
    assert expected in failed.stdout + failed.stderr
    assert json.loads(venv.agentenv("runs", "list", "--json", cwd=project).stdout) == []
    assert json.loads(venv.agentenv("env", "list", "--json", cwd=project).stdout) == []


def test_a_database_link_leaving_the_bundle_is_never_read(venv: PluginVenv, tmp_path: Path) -> None:
    bundle = database_bundle(tmp_path / "link", 'type = "sqlite_app"\ndatabase = "passwd.db"\n')
    (bundle / "envs" / "db" / "passwd.db").symlink_to("/etc/passwd")
    project = fresh_project(tmp_path)
    failed = venv.agentenv("run", str(bundle), cwd=project, code=1)
    assert "passwd.db: a link to /etc/passwd" in failed.stdout + failed.stderr
    assert json.loads(venv.agentenv("runs", "list", "--json", cwd=project).stdout) == []


def test_a_database_that_is_not_sqlite_fails_the_deploy_with_the_reason(venv: PluginVenv, tmp_path: Path) -> None:
    bundle = database_bundle(tmp_path / "notdb", 'type = "sqlite_app"\ndatabase = "notes.db"\n')
    (bundle / "envs" / "db" / "notes.db").write_text("root:x:0:0:root:/root:/bin/bash\n")
    project = fresh_project(tmp_path)
    failed = venv.agentenv("run", str(bundle), cwd=project, code=1)
    assert "notes.db is not a SQLite database file" in failed.stdout + failed.stderr


# -- the env's server, from the plugin's venv, over MCP and its data plane ---------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(venv: PluginVenv, folder: Path, settings: dict) -> tuple[subprocess.Popen[str], str]:
    port = free_port()
    env = {**venv.environ(), "AGENTENV_SQLITE_APP_SETTINGS": json.dumps(settings)}
    proc = subprocess.Popen([str(venv.python), "-m", "agentenv_local.env", "agentenv_sqlite_app.server:SqliteApp",
                             "--port", str(port)], cwd=folder, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    for _ in range(600):
        if proc.poll() is not None:
            return proc, base
        try:
            if httpx.get(f"{base}/ready", timeout=2).status_code == 200:
                return proc, base
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    proc.kill()
    raise AssertionError("the server never answered")


def stop(proc: subprocess.Popen[str]) -> str:
    if proc.poll() is None:
        proc.terminate()
    out, _ = proc.communicate(timeout=30)
    return out


def calls(base: str, *requests: tuple[str, dict]) -> list[Any]:
    """Each (tool, args) called over one MCP client: its structured content, with isError."""
    from mcp import Client

    async def go() -> list[Any]:
        out = []
        async with Client(f"{base}/mcp") as client:
            for name, args in requests:
                result = await client.call_tool(name, args)
                out.append({"error": result.is_error, **(result.structured_content or {})})
        return out

    return asyncio.run(go())


def rpc(base: str, method: str, params: dict | None = None) -> dict:
    body: dict = {"jsonrpc": "2.0", "id": 1, "method": method}
    if params is not None:
        body["params"] = params
    return httpx.post(f"{base}/agentenv", json=body, timeout=30).json()


ODD = 'odd"; DROP TABLE orders; --'


@pytest.fixture
def server(venv: PluginVenv, tmp_path: Path):
    folder = tmp_path / "env"
    folder.mkdir()
    conn = sqlite3.connect(folder / "shop.db")
    conn.executescript(f"""
        CREATE TABLE orders (id INTEGER PRIMARY KEY, status TEXT NOT NULL, note TEXT);
        CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT);
        CREATE TABLE cards (customer_id INTEGER, token TEXT);
        CREATE TABLE "{ODD.replace('"', '""')}" (id INTEGER PRIMARY KEY, "we;ird""col" TEXT);
        CREATE TABLE big (n INTEGER);
        WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 5000) INSERT INTO big SELECT n FROM c;
        INSERT INTO orders (id, status) VALUES (1, 'paid'), (2, 'paid');
        INSERT INTO customers (name) VALUES ('Ann');
        INSERT INTO cards VALUES (1, 'tok_secret');
    """)
    conn.close()
    seed = (folder / "shop.db").read_bytes()
    proc, base = start_server(venv, folder, {"database": "shop.db", "tables": ["orders", "customers", ODD, "big"],
                                             "write_tables": ["orders", ODD], "max_rows": 50})
    assert proc.poll() is None, stop(proc)
    yield base
    stop(proc)
    assert (folder / "shop.db").read_bytes() == seed  # the shipped file is only ever read


def test_tools_read_and_write_and_report_changes(server: str) -> None:
    listed, described, found, inserted, updated, deleted = calls(
        server, ("list_tables", {}), ("describe_table", {"table": "orders"}),
        ("query", {"sql": "SELECT id, status FROM orders WHERE status = ? ORDER BY id", "params": ["paid"]}),
        ("insert_row", {"table": "orders", "values": {"id": 3, "status": "new"}}),
        ("update_rows", {"table": "orders", "values": {"status": "refunded"}, "where": {"id": 1}}),
        ("delete_rows", {"table": "orders", "where": {"id": 2}}))
    assert listed["tables"] == [{"name": "orders", "rows": 2, "writable": True},
                                {"name": "customers", "rows": 1, "writable": False},
                                {"name": ODD, "rows": 0, "writable": True},
                                {"name": "big", "rows": 5000, "writable": False}]
    assert [c["name"] for c in described["columns"]] == ["id", "status", "note"]
    assert found["rows"] == [{"id": 1, "status": "paid"}, {"id": 2, "status": "paid"}] and not found["truncated"]
    assert inserted["inserted"] == {"id": 3, "status": "new", "note": None}
    assert updated == {"error": False, "updated": 1, "rows": [{"id": 1, "status": "refunded", "note": None}]}
    assert deleted == {"error": False, "deleted": 1}
    orders = rpc(server, "data/get")["result"]["parts"][0]["data"]["orders"]
    assert [(o["id"], o["status"]) for o in orders] == [(1, "refunded"), (3, "new")]


def test_identifiers_with_quotes_and_semicolons_are_names_never_sql(server: str) -> None:
    results = calls(
        server,
        ("describe_table", {"table": 'orders"; DROP TABLE orders; --'}),
        ("insert_row", {"table": "orders; DELETE FROM orders", "values": {"status": "x"}}),
        ("insert_row", {"table": "orders", "values": {'status") VALUES (1); DROP TABLE orders; --': "x"}}),
        ("update_rows", {"table": "orders", "values": {"status": "x"}, "where": {"1=1 OR id": 1}}),
        ("insert_row", {"table": ODD, "values": {'we;ird"col': "'); DROP TABLE orders; --"}}),
        ("query", {"sql": f'SELECT "we;ird""col" AS v FROM "{ODD.replace(chr(34), chr(34) * 2)}"'}),
    )
    assert [r.get("code") for r in results[:4]] == ["unknown_table", "unknown_table", "unknown_column",
                                                    "unknown_column"]
    assert all(r["error"] for r in results[:4]) and "list_tables" in results[0]["hint"]
    assert results[4]["inserted"] == {"id": 1, 'we;ird"col': "'); DROP TABLE orders; --"}  # stored as data
    assert results[5]["rows"] == [{"v": "'); DROP TABLE orders; --"}]
    orders = rpc(server, "data/get")["result"]["parts"][0]["data"]["orders"]
    assert [(o["id"], o["status"]) for o in orders] == [(1, "paid"), (2, "paid")]


def test_read_only_and_hidden_tables_and_non_selects_are_refused(server: str) -> None:
    results = calls(
        server,
        ("insert_row", {"table": "customers", "values": {"name": "Mallory"}}),
        ("delete_rows", {"table": "customers", "where": {"id": 1}}),
        ("insert_row", {"table": "cards", "values": {"token": "x"}}),
        ("query", {"sql": "SELECT * FROM cards"}),
        ("query", {"sql": "SELECT name FROM customers WHERE id IN (SELECT customer_id FROM cards)"}),
        ("query", {"sql": "SELECT sql FROM sqlite_schema"}),
        ("query", {"sql": "SELECT 1; DROP TABLE orders"}),
        ("query", {"sql": "DELETE FROM orders"}),
        ("query", {"sql": "WITH x AS (SELECT 1) DELETE FROM orders"}),
        ("query", {"sql": "PRAGMA table_info(cards)"}),
        ("query", {"sql": "ATTACH DATABASE '/tmp/x.db' AS x"}),
        ("delete_rows", {"table": "orders", "where": {}}),
    )
    assert [r.get("code") for r in results] == [
        "read_only_table", "read_only_table", "unknown_table", "not_allowed", "not_allowed", "not_allowed",
        "bad_query", "not_a_select", "not_allowed", "not_a_select", "not_a_select", "where_required"]
    assert all(r["error"] and r["applied"] == "no" for r in results)
    assert "tok_secret" not in json.dumps(results)
    tables = rpc(server, "data/get")["result"]["parts"][0]["data"]
    assert [(o["id"], o["status"]) for o in tables["orders"]] == [(1, "paid"), (2, "paid")]
    assert tables["customers"] == [{"id": 1, "name": "Ann"}] and len(tables["cards"]) == 1


def test_huge_results_are_capped(server: str) -> None:
    capped, limited, blob, endless = calls(
        server,
        ("query", {"sql": "SELECT n FROM big"}),
        ("query", {"sql": "SELECT n FROM big", "limit": 7}),
        ("query", {"sql": "SELECT randomblob(100000000)"}),
        ("query", {"sql": "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c) SELECT count(*) FROM c"}),
    )
    assert (capped["row_count"], capped["truncated"], capped["rows"][-1]) == (50, True, {"n": 50})
    assert (limited["row_count"], limited["truncated"]) == (7, True)
    assert blob["error"] and "too big" in blob["message"]
    assert endless["error"] and endless["code"] == "query_too_costly"


def test_data_plane_reset_add_get(server: str) -> None:
    calls(server, ("delete_rows", {"table": "orders", "where": {"id": 1}}))
    assert rpc(server, "data/reset") == {"jsonrpc": "2.0", "id": 1, "result": {}}
    added = rpc(server, "data/add", {"parts": [{"kind": "data", "data": {"orders": [{"id": 9, "status": "new"}],
                                                                         "cards": [{"customer_id": 2, "token": "t"}]}},
                                               {"kind": "text", "text": json.dumps({"customers": [{"name": "Bo"}]})}]})
    assert added == {"jsonrpc": "2.0", "id": 1, "result": {}}
    refused = rpc(server, "data/add", {"parts": [{"kind": "data", "data": {"orders": [{"id": 10, "status": "x"}],
                                                                           'x"; DROP TABLE orders': [{}]}}]})
    assert refused["error"]["data"]["code"] == "unknown_table"
    tables = rpc(server, "data/get")["result"]["parts"][0]["data"]
    assert [o["id"] for o in tables["orders"]] == [1, 2, 9]  # the refused batch added nothing (all or none)
    assert [c["name"] for c in tables["customers"]] == ["Ann", "Bo"] and len(tables["cards"]) == 2
    assert len(tables["big"]) == 5000


@pytest.mark.parametrize(("make", "expected"), [
    (lambda f: (f / "shop.db").symlink_to("/etc/passwd"), "shop.db is a link or leaves the env's folder"),
    (lambda f: None, "shop.db is not in the env's folder"),
    (lambda f: (f / "shop.db").write_text("not sqlite"), "shop.db is not a SQLite database file"),
])
def test_the_server_refuses_a_database_it_must_not_read(venv: PluginVenv, tmp_path: Path, make: Any,
                                                        expected: str) -> None:
    folder = tmp_path / "env"
    folder.mkdir()
    make(folder)
    proc, _base = start_server(venv, folder, {"database": "shop.db"})
    out = stop(proc)
    assert proc.returncode not in (0, None) and expected in out, out


def test_bad_tables_settings_fail_the_start(venv: PluginVenv, tmp_path: Path) -> None:
    folder = tmp_path / "env"
    folder.mkdir()
    (folder / "schema.sql").write_text("CREATE TABLE t (id INTEGER PRIMARY KEY);")
    proc, _base = start_server(venv, folder, {"schema_sql": "schema.sql", "tables": ["t", "nope"]})
    out = stop(proc)
    assert proc.returncode not in (0, None) and "tables: 'nope' not among t" in out, out
    assert sorted(os.listdir(folder)) == ["schema.sql"]
    shutil.rmtree(folder)
