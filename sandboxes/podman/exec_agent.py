# Runs on any image's python3, old ones too; must answer every request.
"""The exec agent: runs inside a container and serves the host's requests, either on its stdin/stdout
(started as `podman exec -i CONTAINER python3 -u -c <this file>`) or, as the container's main process,
on a unix socket in a folder the host bind-mounts (`... -c <this file> --listen /.agentenv/agent.sock`),
which any host process can connect to without a `podman exec`.

One JSON object per line each way; requests carry an "id" and run in their own thread, so several
commands can be in flight at once. Standard library only (it runs on the image's own Python).
Ops: exec (argv, cwd, env, timeout, stdin), read, write, stat, list.
"""

import base64
import json
import os
import signal
import subprocess
import sys
import threading
import time


class _Out:
    """One connection's answers; a lock keeps lines from different threads whole."""

    def __init__(self, write, flush):
        self.lock = threading.Lock()
        self.write = write
        self.flush = flush

    def send(self, obj):
        line = (json.dumps(obj, separators=(",", ":")) + "\n").encode()
        with self.lock:
            try:
                self.write(line)
                self.flush()
            except OSError:  # the host went away; its requests die with it
                pass


def _b64(data):
    return base64.b64encode(data).decode("ascii")


def _oom_kills():
    """How many processes the container's memory limit has killed so far (cgroup v2, else v1)."""
    for path, key in (("/sys/fs/cgroup/memory.events", "oom_kill"),
                      ("/sys/fs/cgroup/memory/memory.oom_control", "oom_kill")):
        try:
            with open(path) as f:
                for line in f:
                    name, _, value = line.partition(" ")
                    if name == key:
                        return int(value)
        except (OSError, ValueError):
            continue
    return None


def _exec(req):
    started = time.monotonic()
    env = dict(os.environ)
    env.update(req.get("env") or {})
    before = _oom_kills()
    try:
        proc = subprocess.Popen(req["argv"], cwd=req.get("cwd") or None, env=env, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    except FileNotFoundError:
        return {"exit_code": 127, "stdout": "", "stderr": _b64(("%s: command not found" % req["argv"][0]).encode())}
    except NotADirectoryError:
        return {"exit_code": 126, "stdout": "", "stderr": _b64(b"working directory is not a directory")}
    except PermissionError:
        return {"exit_code": 126, "stdout": "", "stderr": _b64(("%s: permission denied" % req["argv"][0]).encode())}
    stdin = base64.b64decode(req["stdin"]) if req.get("stdin") else None
    timed_out = False
    try:
        out, err = proc.communicate(stdin, timeout=req.get("timeout"))
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        out, err = proc.communicate()
    after = _oom_kills()
    code = proc.returncode
    return {"exit_code": 128 - code if code < 0 else code, "stdout": _b64(out), "stderr": _b64(err),
            "timed_out": timed_out, "signal": -code if code < 0 else None,
            "oom_killed": bool(before is not None and after is not None and after > before),
            "duration_s": time.monotonic() - started}


def _read(req):
    with open(req["path"], "rb") as f:
        return {"data": _b64(f.read())}


def _write(req):
    path = req["path"]
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    tmp = "%s.agentenv-%d.tmp" % (path, threading.get_ident())
    with open(tmp, "wb") as f:
        f.write(base64.b64decode(req["data"]))
    os.replace(tmp, path)
    if req.get("mode") is not None:
        os.chmod(path, req["mode"])
    return {}


def _stat(req):
    path = req["path"]
    kind = ("dir" if os.path.isdir(path) else "file" if os.path.isfile(path)
            else "other" if os.path.lexists(path) else None)
    return {"kind": kind}


def _list(req):
    base = req["path"]
    found = []
    for folder, _dirs, files in os.walk(base):
        for name in files:
            found.append(os.path.relpath(os.path.join(folder, name), base))
    return {"files": sorted(found)}


OPS = {"exec": _exec, "read": _read, "write": _write, "stat": _stat, "list": _list}


def _serve(req, out):
    try:
        result = OPS[req["op"]](req)
    except KeyError as exc:
        result = {"error": "bad request: missing %s" % exc, "errno": "EINVAL"}
    except OSError as exc:
        import errno as _errno
        result = {"error": "%s: %s" % (exc.strerror or exc, req.get("path", "")),
                  "errno": _errno.errorcode.get(exc.errno or 0, "EIO")}
    except Exception as exc:  # report, never die: the host waits for an answer to every id
        result = {"error": "%s: %s" % (type(exc).__name__, exc), "errno": "EIO"}
    result["id"] = req.get("id")
    out.send(result)


def _session(lines, out):
    out.send({"id": 0, "ready": True, "pid": os.getpid()})
    for line in lines:
        line = line.strip()
        if not line:
            continue
        try:
            req = json.loads(line)
        except ValueError:
            out.send({"id": None, "error": "not JSON", "errno": "EINVAL"})
            continue
        threading.Thread(target=_serve, args=(req, out), daemon=True).start()


def _listen(path):
    import socket

    try:
        os.unlink(path)
    except OSError:
        pass
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path + ".tmp")
    server.listen(64)
    os.rename(path + ".tmp", path)  # the socket appears only once it can be connected to (after listen)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    while True:
        conn, _ = server.accept()
        f = conn.makefile("rwb", buffering=0)
        reader = conn.makefile("rb")
        threading.Thread(target=_session, args=(reader, _Out(f.write, lambda: None)), daemon=True).start()


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--listen":
        _listen(sys.argv[2])
    else:
        out = _Out(sys.stdout.buffer.write, sys.stdout.buffer.flush)
        _session(sys.stdin.buffer, out)


main()
