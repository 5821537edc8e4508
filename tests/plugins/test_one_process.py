"""examples/plugins/one-process (agentenv-one-process, the env provider `one_process`), installed for real with pip
into a throwaway venv (tests/kits/plugin_venv.py, once for the module) and used as a user would: `agentenv plugin
list/show`, and `agentenv run` of its bundle (a multi env of two SDK servers with `env_provider_type =
"one_process"`, and the same env with the built-in providers to compare), in fresh project folders under pytest's
basetemp. Processes are counted by pid (the instance records' children), and what is left running is looked for in
/proc (a one-process host whose working folder is in the project).

The provider is also driven directly by a small script run with that venv's python (DRIVER): real host process,
real MCP and data-plane requests over loopback HTTP, to check each server's data plane is its own, the host listens
on loopback only, a server that raises on import is named and nothing is left running.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from kits.plugin_venv import PLUGINS, PluginVenv

FOLDER = PLUGINS / "one-process"
BUNDLE = FOLDER / "bundle"
DIST = "agentenv-one-process"
HOST_MODULE = b"agentenv_one_process.host"


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> PluginVenv:
    v = PluginVenv.create(tmp_path_factory.mktemp("one-process") / "venv")
    v.install(FOLDER)
    assert v.has(DIST)
    return v


def fresh_project(tmp_path: Path, name: str = "project") -> Path:
    project = tmp_path / name
    project.mkdir()
    return project


def hosts_under(folder: Path) -> list[int]:
    """The pids of one-process hosts whose working folder is in `folder` (what must be gone after a run)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if HOST_MODULE in (entry / "cmdline").read_bytes() and \
                    os.readlink(entry / "cwd").startswith(str(folder) + os.sep):
                found.append(int(entry.name))
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found


def alive(pid: int) -> bool:
    """Is `pid` a live process (a zombie is not)?"""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def instances(venv: PluginVenv, project: Path) -> dict[str, dict]:
    listed = json.loads(venv.agentenv("env", "instances", "--all", "--json", cwd=project).stdout)
    return {r["env_id"].rsplit("/", 1)[-1]: r for r in listed}


# -- the plugin as agentenv sees it ------------------------------------------------------------------------------

def test_plugin_list_and_show_have_the_env_provider_active(venv: PluginVenv, tmp_path: Path) -> None:
    project = fresh_project(tmp_path)
    listed = json.loads(venv.agentenv("plugin", "list", "--json", cwd=project).stdout)
    ours = [d for d in listed["plugins"] if d["name"] == DIST]
    assert len(ours) == 1 and ours[0]["version"] == "0.1.0"
    assert [(c["group"], c["name"], c["status"]) for c in ours[0]["contributions"]] == [
        ("env_providers", "one_process", "active")]
    shown = json.loads(venv.agentenv("plugin", "show", DIST, "--json", cwd=project).stdout)
    assert shown["groups"] == {"env_providers": [{"name": "one_process",
                                                  "value": "agentenv_one_process.provider:OneProcessProvider",
                                                  "status": "active", "reason": None}]}
    venv.agentenv("plugin", "check", cwd=project)


# -- the bundle: one process instead of one per server ------------------------------------------------------------

def test_the_desk_runs_both_servers_in_one_process_and_the_verifier_reads_both(venv: PluginVenv,
                                                                               tmp_path: Path) -> None:
    project = fresh_project(tmp_path)
    runs = json.loads(venv.agentenv("run", str(BUNDLE), "--json", cwd=project).stdout)
    assert sorted((r["task_name"], r["status"], r["score"]) for r in runs) == [
        ("desk", "passed", 1.0), ("desk-apart", "passed", 1.0)], runs
    for run in runs:
        record = json.loads(venv.agentenv("runs", "show", run["run_id"], "--json", cwd=project).stdout)
        rows = record["verifications"]["outcome"]["results"]
        assert {r["id"]: r["result"] for r in rows} == {"tally_counted": True, "shelf_noted": True}

    found = instances(venv, project)
    desk, apart = found["desk"], found["desk-apart"]
    assert [(c["name"], c["kind"], c.get("env_provider")) for c in desk["children"]] == [
        ("tally", "subprocess", "one_process"), ("shelf", "subprocess", "one_process")]
    assert desk["gateway_url"] and desk["env_provider_type"] == "gateway"
    # what it saves, counted: the processes started for the same two servers
    desk_pids = {c["pid"] for c in desk["children"]}
    apart_pids = {c["pid"] for c in apart["children"]}
    assert (len(desk_pids), len(apart_pids)) == (1, 2)
    # each server on its own path of the one loopback port
    urls = [c["url"] for c in desk["children"]]
    assert len({u.rsplit("/", 2)[0] for u in urls}) == 1 and len(set(urls)) == 2
    assert all(u.startswith("http://127.0.0.1:") for u in urls)
    # stopped with its instance: no host left, by pid and by looking
    assert desk["status"] == apart["status"] == "terminated"
    assert not any(alive(pid) for pid in desk_pids | apart_pids)
    assert hosts_under(project) == []


def write_env(folder: Path, toml: str, server: str | None = None) -> None:
    folder.mkdir(parents=True)
    (folder / "env.toml").write_text(toml)
    if server is not None:
        (folder / "server.py").write_text(server)


def test_a_server_that_raises_on_import_is_named_and_nothing_is_left_running(venv: PluginVenv,
                                                                             tmp_path: Path) -> None:
    bundle = tmp_path / "broken-bundle"
    shutil.copytree(BUNDLE / "envs" / "tally", bundle / "envs" / "tally")
    write_env(bundle / "envs" / "ledger", 'module = "server.py:Ledger"\n',
              'raise RuntimeError("ledger needs LEDGER_DB, which is not set")\n')
    write_env(bundle / "envs" / "pair", 'type = "multi"\nmcp_server_envs = ["tally", "ledger"]\n'
                                        'env_provider_type = "one_process"\n')
    (bundle / "tasks").mkdir()
    (bundle / "tasks" / "pair.json").write_text(json.dumps(
        {"steps": [{"id": "deploy", "type": "deploy_env", "env_id": "pair"}]}))
    project = fresh_project(tmp_path)
    out = venv.shell(f"agentenv run {bundle} 2>&1", cwd=project, code=1).stdout
    assert "server 'ledger' did not load in the one process: cannot load server.py:Ledger: " \
           "RuntimeError: ledger needs LEDGER_DB, which is not set" in out, out
    assert "python -m agentenv_local.env server.py:Ledger" in out  # the hint: see why on its own
    assert hosts_under(project) == []
    assert [r["status"] for r in instances(venv, project).values()] == []  # it never ran: nothing recorded


def test_bad_input_is_refused_with_what_to_do(venv: PluginVenv, tmp_path: Path) -> None:
    bundle = tmp_path / "bad-bundle"
    write_env(bundle / "envs" / "probe", 'command = ["python", "-c", "pass"]\n')
    write_env(bundle / "envs" / "pair", 'type = "multi"\nmcp_server_envs = ["probe"]\n'
                                        'env_provider_type = "one_process"\n')
    (bundle / "tasks").mkdir()
    (bundle / "tasks" / "pair.json").write_text(json.dumps(
        {"steps": [{"id": "deploy", "type": "deploy_env", "env_id": "pair"}]}))
    project = fresh_project(tmp_path)
    out = venv.shell(f"agentenv run {bundle} 2>&1", cwd=project, code=1).stdout
    assert "the one_process env provider cannot run it: it is a command server; only module envs" in out, out
    assert hosts_under(project) == []

    typo = tmp_path / "typo-bundle"
    shutil.copytree(BUNDLE, typo, ignore=shutil.ignore_patterns("__pycache__"))
    toml = typo / "envs" / "desk" / "env.toml"
    toml.write_text(toml.read_text().replace('"one_process"', '"one_proces"'))
    other = fresh_project(tmp_path, "other")
    out = venv.shell(f"agentenv run {typo} --task desk 2>&1", cwd=other, code=None).stdout
    assert "env_provider_type: 'one_proces' is neither a topology (gateway) nor an installed env provider; " \
           "plugins' env providers: one_process" in out, out
    assert "passed" not in out


# -- the provider driven directly (real host process, real HTTP) --------------------------------------------------

DRIVER = r'''
import asyncio, json, shutil, sys
from pathlib import Path
from types import SimpleNamespace

import httpx
from mcp import Client

from agentenv_local.hosting.envs.instance import DeployError, Instance
from agentenv_local.hosting.envs.records import parse_env
from agentenv_local.http_guard import ADMIN_TOKEN_ENV
from agentenv_one_process.provider import OneProcessProvider

ENVS, WORK = Path(sys.argv[1]), Path(sys.argv[2])
TOKEN = "an-admin-token"


def materialize(inst, name, server):
    folder = inst.folder / name
    shutil.copytree(ENVS / name, folder)
    return folder


def server(name):
    return parse_env({"module": f"server.py:{name.title()}"}, name)


def listening(pid):
    """The local addresses of the TCP sockets `pid` listens on."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        target = str(fd.readlink()) if fd.is_symlink() else ""
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = []
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            cols = line.split()
            if cols[3] == "0A" and cols[9] in inodes:
                found.append(cols[1])
    return found


def alive(pid):
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


async def rpc(http, base, method, params=None, token=TOKEN):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    r = await http.post(base + "/agentenv", headers=headers,
                        json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}})
    return r.status_code, (r.json() if r.status_code == 200 else None)


async def main():
    out = {}
    host = SimpleNamespace(ready_timeout=60.0, paths=None, services=None, materialize=materialize)
    provider = OneProcessProvider(host)
    inst = Instance("envi-driver1", {}, WORK / "envi-driver1", admin_token=TOKEN)
    urls = {}
    for name in ("tally", "shelf"):
        urls[name], info = await provider.start(inst, name, f"env {name}", server(name))
    pid = info["pid"]
    out["processes_started"] = provider.processes_started
    out["alive_while_running"] = alive(pid)
    out["cwd"] = str(Path(f"/proc/{pid}/cwd").readlink())
    out["listening"] = listening(pid)
    bases = {n: u.removesuffix("/mcp") for n, u in urls.items()}
    for name, url in urls.items():
        async with Client(url) as c:
            out[f"{name}_tools"] = sorted(t.name for t in (await c.list_tools()).tools)
    async with Client(urls["tally"]) as c:
        await c.call_tool("increment", {"name": "x", "by": 5})
    async with Client(urls["shelf"]) as c:
        await c.call_tool("put_note", {"key": "k", "text": "kept"})
    async with httpx.AsyncClient(timeout=10) as http:
        out["no_token"] = (await rpc(http, bases["tally"], "data/get", token=None))[0]
        out["wrong_token"] = (await rpc(http, bases["tally"], "data/get", token="guess"))[0]
        out["tally_before"] = (await rpc(http, bases["tally"], "data/get"))[1]["result"]
        await rpc(http, bases["tally"], "data/reset")
        out["tally_after_reset"] = (await rpc(http, bases["tally"], "data/get"))[1]["result"]
        out["shelf_after_tally_reset"] = (await rpc(http, bases["shelf"], "data/get"))[1]["result"]
        port_root = bases["tally"].rsplit("/", 1)[0]
        out["unknown_path"] = (await http.get(port_root + "/9-nobody/.well-known/agent-env.json")).status_code
        out["cards"] = [(await http.get(b + "/.well-known/agent-env.json")).json()["name"] for b in bases.values()]
    await provider.stop(inst)
    out["alive_after_stop"] = alive(pid)

    broken = Instance("envi-driver2", {}, WORK / "envi-driver2", admin_token=TOKEN)
    await provider.start(broken, "tally", "env tally", server("tally"))
    second = provider._hosts[broken.instance_id].pid
    try:
        await provider.start(broken, "ledger", "env ledger", server("ledger"))
        out["broken"] = None
    except DeployError as e:
        out["broken"] = e.message
    out["broken_host_alive_before_stop"] = alive(second)
    await provider.stop(broken)  # what the manager does when a deploy fails
    out["broken_host_alive_after_stop"] = alive(second)
    out["processes_started_total"] = provider.processes_started
    print(json.dumps(out))


asyncio.run(main())
'''


def test_each_server_keeps_its_own_data_plane_in_the_one_loopback_process(venv: PluginVenv, tmp_path: Path) -> None:
    envs = tmp_path / "envs"
    for name in ("tally", "shelf"):
        shutil.copytree(BUNDLE / "envs" / name, envs / name, ignore=shutil.ignore_patterns("__pycache__"))
    write_env(envs / "ledger", 'module = "server.py:Ledger"\n', 'raise RuntimeError("no ledger today")\n')
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    work = tmp_path / "work"
    work.mkdir()
    proc = subprocess.run([str(venv.python), str(script), str(envs), str(work)], capture_output=True, text=True,
                          timeout=300, env=venv.environ(), cwd=work, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["processes_started"] == 1 and out["alive_while_running"]
    assert out["cwd"].startswith(str(work) + os.sep)  # what hosts_under looks for, at the end
    # listening on loopback only (127.0.0.1 in /proc/net/tcp's little-endian hex), and on one port
    assert len(out["listening"]) == 1 and out["listening"][0].startswith("0100007F:"), out["listening"]
    assert out["tally_tools"] == ["counts", "increment"]
    assert out["shelf_tools"] == ["get_note", "list_notes", "put_note"]
    assert (out["no_token"], out["wrong_token"]) == (401, 401)
    assert out["tally_before"]["parts"][0]["data"] == {"counts": {"x": 5}}
    assert out["tally_after_reset"]["parts"][0]["data"] == {"counts": {}}
    assert out["shelf_after_tally_reset"]["parts"][0]["data"] == {"notes": {"k": "kept"}}
    assert out["unknown_path"] == 404
    assert out["cards"] == ["tally", "shelf"]
    assert out["alive_after_stop"] is False
    assert out["broken"] == ("env ledger: server 'ledger' did not load in the one process: cannot load "
                             "server.py:Ledger: RuntimeError: no ledger today")
    assert out["broken_host_alive_before_stop"] and not out["broken_host_alive_after_stop"]
    assert out["processes_started_total"] == 2  # one per instance, whatever its number of servers
    assert hosts_under(work) == []


ORPHAN = r'''
import asyncio, os, shutil, sys
from pathlib import Path
from types import SimpleNamespace

from agentenv_local.hosting.envs.instance import Instance
from agentenv_local.hosting.envs.records import parse_env
from agentenv_one_process.provider import OneProcessProvider

ENVS, WORK = Path(sys.argv[1]), Path(sys.argv[2])


def materialize(inst, name, server):
    shutil.copytree(ENVS / name, inst.folder / name)
    return inst.folder / name


async def main():
    provider = OneProcessProvider(SimpleNamespace(ready_timeout=60.0, materialize=materialize))
    inst = Instance("envi-orphan", {}, WORK / "envi-orphan", admin_token="t")
    _url, info = await provider.start(inst, "tally", "env tally", parse_env({"module": "server.py:Tally"}, "tally"))
    print(info["pid"], flush=True)
    os._exit(0)  # a hub that dies without stopping anything


asyncio.run(main())
'''


def test_the_host_never_outlives_a_hub_that_died(venv: PluginVenv, tmp_path: Path) -> None:
    envs = tmp_path / "envs"
    shutil.copytree(BUNDLE / "envs" / "tally", envs / "tally", ignore=shutil.ignore_patterns("__pycache__"))
    script = tmp_path / "orphan.py"
    script.write_text(ORPHAN)
    work = tmp_path / "work"
    work.mkdir()
    proc = subprocess.run([str(venv.python), str(script), str(envs), str(work)], capture_output=True, text=True,
                          timeout=300, env=venv.environ(), cwd=work, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    pid = int(proc.stdout.split()[-1])
    for _ in range(300):  # its stdin closed with the "hub": it shuts down on its own (polled, not timed)
        if not alive(pid):
            break
        time.sleep(0.1)
    assert not alive(pid), f"the one process {pid} outlived the hub that started it"
    assert hosts_under(work) == []
