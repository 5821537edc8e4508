"""Issue 12: hundreds of generated malformed inputs, each refused with one clear error and nothing stored.

Every case is a file (or a folder, or an environment variable) a clumsy or hostile user could hand agentenv:
task JSON files, bundles (folder layouts, task JSON, artifact.toml, evals, env.toml), config.toml and
AGENTENV_* variables, eval files and artifact folders. Each is run through the real CLI against one real
project whose store already holds a run, an artifact, a task and an env, and must give: no traceback,
exit 1 (2 for a bad command-line argument), a message naming the file and the field or line, and a store
exactly as it was.

Most cases run in-process (`agentenv_local.cli.main.main` with its real error handling, inside click's
output capture): 500 subprocesses would take minutes on 2 cores. A fixed sample of about 30 runs as real
`agentenv` subprocesses, to prove the in-process answers are the ones a user sees.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tomllib
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kits.warm_cli import run_agentenv

REPO = Path(__file__).resolve().parents[2]
HELLO = REPO / "examples" / "hello"
ECHO_SERVER = REPO / "examples" / "envs" / "echo" / "server.py"
AGENTENV = Path(sys.executable).parent / "agentenv"
FIFO = b"\0FIFO"  # a file spec meaning "make a FIFO here"
DIR = b"\0DIR"  # a file spec meaning "make a directory here"


@dataclass
class Case:
    area: str
    name: str
    argv: list[str]  # "{dir}" is replaced by the case's folder (relative to the project)
    files: dict[str, bytes] = field(default_factory=dict)  # relative to the case folder
    expect: tuple = ()  # each item a substring of the error output, or a tuple of alternatives
    code: int = 1
    env: dict[str, str] = field(default_factory=dict)
    bundle: bool = False  # the case folder starts as a copy of examples/hello
    config: bytes | None = None  # written as .agentenv/config.toml for this case only


# --- task JSON -----------------------------------------------------------------------------------

GOOD_STEPS: list[dict[str, Any]] = [
    {"id": "box", "type": "deploy_sandbox", "sandbox_name": "box", "cpu": 1.0, "memory_mb": 512},
    {"id": "load", "type": "load_artifact", "artifact_id": "greeting", "sandbox_name": "box",
     "destination_path": "/app/greeting", "depends_on": ["box"]},
    {"id": "hello", "type": "verify_sandbox", "sandbox_name": "box", "fail_task_on_error": True,
     "retry_config": {"max_retries": 1},
     "criteria": [{"type": "probe_file_contains", "paths": ["greeting/hello.txt"], "expected": "hello"}]},
]
WRONG: dict[type, list[Any]] = {
    str: [123, ["x"], {"a": 1}], int: ["x", [1], {"a": 1}, 1.5], float: ["x", [1.0], {"a": 1}],
    bool: ["maybe", [True], {"a": 1}], list: ["x", 5, {"a": 1}], dict: ["x", 5, [1]]}
JSON_LINE_OR_PLACE = ("line", " at ")


def _steps(changes: dict | None = None) -> list[dict]:
    steps = json.loads(json.dumps(GOOD_STEPS))
    for (index, key), value in (changes or {}).items():
        steps[index][key] = value
    return steps


def _dump(steps) -> bytes:
    return json.dumps(steps, indent=1).encode()


def _leaves(value, path=()):
    """(path, value) of every leaf under a JSON value (paths of keys and indexes)."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _leaves(v, (*path, i))
    else:
        yield path, value


def _set(steps, path, value):
    target = steps
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value


def task_json_variants() -> list[tuple[str, bytes, tuple]]:
    """(name, file content, what the error must mention besides the file)."""
    out: list[tuple[str, bytes, tuple]] = []
    text = _dump(GOOD_STEPS)
    for n, cut in enumerate(range(7, len(text) - 1, max(1, len(text) // 30))):
        out.append((f"truncated at {cut} ({n})", text[:cut], ("not valid JSON (line",)))
    for path, value in _leaves(GOOD_STEPS):  # a wrong type in every field, nested ones too
        top = path[1]
        for wrong in WRONG[type(value)]:
            steps = json.loads(text)
            _set(steps, path, wrong)
            where = "field 'type'" if path[1:] == ("type",) else f"field '{top}" if len(path) == 2 else top
            out.append((f"{'.'.join(map(str, path))} = {json.dumps(wrong)}", _dump(steps), (where,)))
    for i, step in enumerate(GOOD_STEPS):
        out.append((f"step {i}: unknown field", _dump(_steps({(i, "sandbox_nmae"): "x"})), ("field 'sandbox_nmae'",)))
        for key in ("id", "type"):
            steps = _steps()
            del steps[i][key]
            out.append((f"step {i}: no {key}", _dump(steps), (f"field '{key}'",)))
        for hostile in ("../x", "a/../b", "..", "a\u0000b", "a\nb", "x" * 300, "\t"):
            out.append((f"step {i}: id {hostile[:8]!r}", _dump(_steps({(i, "id"): hostile})), ("field 'id'",)))
        for kind in ("", "deploy_sandbx", "../deploy_sandbox", "y" * 100_000, "a\u0000b", "DEPLOY_SANDBOX"):
            out.append((f"step {i}: type {kind[:8]!r}", _dump(_steps({(i, "type"): kind})), ("field 'type'",)))
        for path, value in _leaves(step):
            if isinstance(value, str) and path[0] not in ("type",):
                steps = _steps()
                _set(steps, (i, *path), "\ud800")
                place = f"[{i}]." + "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in path).lstrip(".")
                out.append((f"lone surrogate at {place}", json.dumps(steps).encode(), ("not valid Unicode", place)))
    out += [
        ("missing criteria", _dump([s for s in GOOD_STEPS[:2]] + [{k: v for k, v in GOOD_STEPS[2].items()
                                                                  if k != "criteria"}]), ("field 'criteria'",)),
        ("missing artifact_id", _dump(GOOD_STEPS[:1] + [{k: v for k, v in GOOD_STEPS[1].items()
                                                         if k != "artifact_id"}]), ("artifact_id",)),
        ("duplicate id", _dump(_steps({(1, "id"): "box"})), ("duplicate step id",)),
        ("duplicate id 2", _dump(_steps({(2, "id"): "load"})), ("duplicate step id",)),
        ("cycle", _dump(_steps({(0, "depends_on"): ["hello"]})), ("field 'depends_on'", "cycle")),
        ("self dependency", _dump(_steps({(1, "depends_on"): ["load"]})), ("field 'depends_on'", "itself")),
        ("unknown dependency", _dump(_steps({(1, "depends_on"): ["ghost"]})), ("field 'depends_on'",)),
        ("long unknown dependency", _dump(_steps({(1, "depends_on"): ["g" * 50_000]})), ("field 'depends_on'",)),
        ("forward reference", _dump(_steps({(1, "depends_on"): ["hello"]})), ("field 'depends_on'",)),
        ("unknown retry anchor", _dump(_steps({(2, "retry_config"): {"retry_from_step_id": "ghost"}})),
         ("retry_config.retry_from_step_id",)),
        ("retry typo", _dump(_steps({(2, "retry_config"): {"max_retires": 2}})), ("retry_config",)),
    ]
    for depth in (65, 1000, 100_000):
        nested = b"[" * depth + b"]" * depth
        out.append((f"nested {depth} in a field", text.replace(b'"box",\n  "cpu"', nested + b',\n  "cpu"', 1),
                    ("nested too deeply", JSON_LINE_OR_PLACE)))
        out.append((f"nested {depth} at the top", nested, ("nested too deeply",)))
    out.append(("nested objects", b'[{"id": "a", "type": "deploy_sandbox", "metadata": ' + b'{"a": ' * 5000
                + b"1" + b"}" * 5000 + b"}]", ("nested too deeply", "line 1")))
    for key, at in (("memory_mb", 0), ("version", 1), ("max_retries", 2)):
        big = b"9" * 5000
        steps = _dump(_steps({(at, key): 7}) if key != "max_retries" else _steps())
        steps = steps.replace(b'"max_retries": 1', b'"max_retries": ' + big) if key == "max_retries" else \
            steps.replace(f'"{key}": 7'.encode(), f'"{key}": '.encode() + big)
        out.append((f"huge number in {key}", steps, ("4300 digits", "line")))
    for literal in (b"NaN", b"Infinity", b"-Infinity", b"1e999"):
        for key in ("cpu", "memory_mb"):
            out.append((f"{key} = {literal.decode()}", text.replace(f'"{key}": '.encode() + (b"1.0" if key == "cpu"
                        else b"512"), f'"{key}": '.encode() + literal), (f"field '{key}'",)))
        out.append((f"max_retries = {literal.decode()}",
                    text.replace(b'"max_retries": 1', b'"max_retries": ' + literal),
                    ("field 'retry_config",)))
    middle = text.index(b"greeting")
    for name, data in (("invalid byte first", b"\xff" + text), ("invalid byte in a string", text[:middle] + b"\xfe"
                       + text[middle:]), ("invalid byte last", text + b"\x80"),
                       ("cut multibyte", text[:middle] + b"\xc3" + text[middle:]),
                       ("overlong slash", text[:middle] + b"\xc0\xaf" + text[middle:]),
                       ("UTF-16", b"\xff\xfe" + text.decode().encode("utf-16-le")),
                       ("Latin-1 text", text.replace(b"hello.txt", "h\u00e9llo.txt".encode("latin-1")))):
        out.append((name, data, ("not UTF-8", "byte")))
    out += [
        ("BOM and truncated", b"\xef\xbb\xbf" + text[:40], ("not valid JSON (line",)),
        ("two BOMs", b"\xef\xbb\xbf\xef\xbb\xbf" + text, ("not valid JSON (line 1",)),
        ("BOM only", b"\xef\xbb\xbf", ("not valid JSON (line 1",)),
        ("empty", b"", ("not valid JSON (line 1",)),
        ("blank", b"  \n\n \t", ("not valid JSON (line",)),
        ("comment", b"// a task\n" + text, ("not valid JSON (line 1",)),
        ("trailing comma", text[:-2] + b",\n]", ("not valid JSON (line",)),
        ("object", b"{}", ("a task is a JSON list",)),
        ("number", b"5", ("a task is a JSON list",)),
        ("string", b'"steps"', ("a task is a JSON list",)),
        ("null", b"null", ("a task is a JSON list",)),
        ("empty list", b"[]", ("no steps",)),
        ("steps not a list", b'{"steps": 5}', ("a task is a JSON list",)),
        ("empty steps", b'{"steps": []}', ("no steps",)),
        ("numbers", b"[1, 2]", ("step #1",)),
        ("nested empty list", b"[[]]", ("step #1",)),
        ("null step", b"[null]", ("step #1",)),
        ("two values", text + text, ("not valid JSON (line",)),
        ("NUL byte", text[:middle] + b"\0" + text[middle:], ("not valid JSON (line",)),
    ]
    return out


# --- TOML files ----------------------------------------------------------------------------------


def toml_truncations(text: str, count: int) -> list[tuple[str, bytes]]:
    """Prefixes of `text` that are not valid TOML (tomllib is the judge of syntax)."""
    out = []
    for cut in range(3, len(text) - 1):
        try:
            tomllib.loads(text[:cut])
        except tomllib.TOMLDecodeError:
            out.append((f"truncated at {cut}", text[:cut].encode()))
    step = max(1, len(out) // count)
    return out[::step][:count]


def toml_hostile(key: str) -> list[tuple[str, bytes, tuple]]:
    """Values any TOML key should refuse cleanly: nesting, huge numbers, bad bytes, bad escapes."""
    return [
        ("nested 65", f"{key} = {'[' * 65}{']' * 65}\n".encode(), ("nested too deeply",)),
        ("nested 5000", f"{key} = {'[' * 5000}{']' * 5000}\n".encode(), ("nested too deeply",)),
        ("nested tables", (f"{key} = " + "{a = " * 3000 + "1" + "}" * 3000 + "\n").encode(), ("nested too deeply",)),
        ("huge number", f"\n{key} = {'9' * 5000}\n".encode(), ("4300 digits", "line")),
        ("invalid byte", f'{key} = "\xff"\n'.encode("latin-1"), ("not UTF-8",)),
        ("UTF-16", f'{key} = "x"\n'.encode("utf-16"), ("not UTF-8",)),
        ("surrogate escape", f'{key} = "\\ud800"\n'.encode(), ("line",)),
        ("NUL byte", f'{key} = "a\0b"\n'.encode(), ("line",)),
        ("BOM and garbage", b"\xef\xbb\xbf" + f"{key} = =\n".encode(), ("line",)),
        ("duplicate key", f'{key} = "a"\n{key} = "b"\n'.encode(), ("line",)),
    ]


TOML_PLACE = (("line", "end of"),)  # a syntax error says where: a line, or the end of the file
ARTIFACT_TOML = 'type = "file_artifact_universe"\nid = "@local/malformed/greeting"\ndescription = "d"\n'
EVAL_TOML = 'tasks = ["hello"]\nid = "@local/malformed/smoke"\ndescription = "d"\n'
ENV_MODULE = 'module = "server.py:Echo"\n'
ENV_TOML = ENV_MODULE + 'description = "echo"\n'


def artifact_toml_variants() -> list[tuple[str, bytes, tuple]]:
    out: list[tuple[str, bytes, tuple]] = [(n, d, TOML_PLACE) for n, d in toml_truncations(ARTIFACT_TOML, 8)]
    for key in ("type", "id", "description"):
        for wrong in ("5", "[]", "{}", "true", "nan", "inf", "1979-05-27"):
            out.append((f"{key} = {wrong}", f"{key} = {wrong}\n".encode(), (f"'{key}'",)))
    for bad_id in ("no-prefix", "@local/../x", "@local/a\\u0001b", "@local/" + "x" * 300, "@local/a\\nb"):
        out.append((f"id {bad_id[:12]!r}", f'id = "{bad_id}"\n'.encode(), ("'id'",)))
    out += [("unknown key", b'tpye = "file"\n', ("tpye",)), ("type image", b'type = "image"\n', ("type 'image'",)),
            ("type file with two files", b'type = "file"\n', ("exactly one file",))]
    out += toml_hostile("description")
    return out


def eval_toml_variants() -> list[tuple[str, bytes, tuple]]:
    out: list[tuple[str, bytes, tuple]] = [(n, d, TOML_PLACE) for n, d in toml_truncations(EVAL_TOML, 8)]
    for wrong in ("5", '"hello"', "[1]", "[]", "[[]]", "[{}]", "nan", "true", '["hello", 5]'):
        out.append((f"tasks = {wrong}", f"tasks = {wrong}\n".encode(), ("'tasks'",)))
    for name in ("ghost", "../tasks/hello", "tasks/hello", "hello.json", "/etc/passwd", "hello\\u0000", "",
                 "HELLO", " hello", "x" * 5000):
        out.append((f"task name {name[:12]!r}", f'tasks = ["{name}"]\n'.encode(),
                    (("unknown task(s)", "task_id"), "'tasks'")))
    out += [
        ("10001 tasks", ("tasks = [" + ", ".join(['"hello"'] * 10_001) + "]\n").encode(), ("'tasks'", "limit")),
        ("10001 names", ("tasks = [" + ", ".join(f'"t{i}"' for i in range(10_001)) + "]\n").encode(),
         ("'tasks'", "limit")),
        ("200000 names", ("tasks = [" + ", ".join(f'"t{i}"' for i in range(200_000)) + "]\n").encode(),
         ("limit",)),
        ("no tasks key", b'id = "@local/x/y"\n', ("'tasks'",)),
        ("empty file", b"", ("'tasks'",)),
        ("id number", b'tasks = ["hello"]\nid = 5\n', ("'id'",)),
        ("id control", b'tasks = ["hello"]\nid = "a\\u0001b"\n', ("'id'",)),
        ("id dotdot", b'tasks = ["hello"]\nid = "@local/../x"\n', ("'id'",)),
        ("description number", b'tasks = ["hello"]\ndescription = 5\n', ("'description'",)),
        ("unknown key", b'tasks = ["hello"]\ntaks = 1\n', ("taks",)),
    ]
    out += [(n, b'tasks = ["hello"]\n' + d, e) for n, d, e in toml_hostile("description")]
    return out


def env_toml_variants() -> list[tuple[str, bytes, tuple]]:
    out: list[tuple[str, bytes, tuple]] = [(n, d, TOML_PLACE) for n, d in toml_truncations(ENV_TOML, 6)]
    for key, wrongs in (("module", ("5", "[]", "{}", '"server.py"', '"missing.py:Echo"', '"/etc/x.py:Echo"',
                                    '"../x.py:Echo"', '"a b:Echo"')),
                        ("description", ("5", "[]")), ("type", ("5", '"weird"')),
                        ("env_vars", ('"x"', "5", "{a = 5}", "{a = nan}")),
                        ("url", ("5", '"ftp://x"')), ("id", ("5", '"noprefix"'))):
        for wrong in wrongs:
            body = f"{key} = {wrong}\n" if key == "module" else ENV_MODULE + f"{key} = {wrong}\n"
            out.append((f"{key} = {wrong}", body.encode(), (("module", key) if key == "module" else (key,),)))
    out += [("unknown key", (ENV_TOML + "zzz = 1\n").encode(), ("zzz",)),
            ("empty", b"", ("env.toml",)),
            ("two sources", (ENV_TOML + 'url = "http://127.0.0.1:1/mcp"\n').encode(), ("env.toml",))]
    out += [(n, ENV_MODULE.encode() + d, e) for n, d, e in toml_hostile("description")]
    return out


# --- config.toml and AGENTENV_* ------------------------------------------------------------------


def _config_leaves():
    from agentenv_local.config import schema

    return schema.leaves()


def config_variants() -> list[tuple[str, bytes, tuple]]:
    from agentenv_local.config import schema

    out: list[tuple[str, bytes, tuple]] = []
    wrong_for = {int: ['"8"', "1.5", "[]", "true"], float: ['"x"', "[]", "true"], bool: ['"yes"', "1", "[]"],
                 str: ["5", "[]", "{}"], list: ['"x"', "5"]}
    for node in _config_leaves():
        section, key = ".".join(node.path[:-1]), node.path[-1]
        base = schema._strip_optional(node.annotation)
        kind = list if getattr(base, "__origin__", None) is list else base
        for wrong in wrong_for.get(kind, []):
            out.append((f"{node.dotted} = {wrong}", f"[{section}]\n{key} = {wrong}\n".encode(), (f"'{node.dotted}'",)))
        if kind in (int, float):
            lo, hi = _bounds(node)
            for value in (lo - 1, hi + 1, 10**30, "inf", "-inf", "nan"):
                out.append((f"{node.dotted} = {value}", f"[{section}]\n{key} = {value}\n".encode(),
                            (f"'{node.dotted}'", "got")))
    text = "[runner]\nconcurrency = 2\n[hub]\nlinger_s = 0.5\n[model]\nbase_url = \"http://127.0.0.1:1/v1\"\n"
    out += [(n, d, TOML_PLACE) for n, d in toml_truncations(text, 10)]
    out += [(f"{n}", b"[plugins.x]\n" + d, e) for n, d, e in toml_hostile("a")]
    out += [
        ("unknown section", b"[runnr]\nconcurrency = 2\n", ("'runnr'",)),
        ("unknown key", b"[runner]\nconcurency = 2\n", ("'runner.concurency'",)),
        ("section as value", b"runner = 5\n", ("'runner'",)),
        ("key as table", b"[runner.concurrency]\na = 1\n", ("'runner.concurrency'",)),
        ("free table not a table", b"[sandbox]\nproviders = 5\n", ("'sandbox.providers'",)),
        ("bad ref", b'[model]\napi_key = "secret:"\n', ("'model.api_key'",)),
        ("huge concurrency", b"[runner]\nconcurrency = " + b"9" * 5000 + b"\n", ("4300 digits", "line 2")),
    ]
    return out


def _bounds(node) -> tuple[float, float]:
    key = node.key  # the bounds as the schema declares them (an int stays an int)
    lo: Any = next((b for b in (key.ge, key.gt) if b is not None), 0.0)
    hi: Any = next((b for b in (key.le, key.lt) if b is not None), 1e9)
    return lo, hi


def env_var_variants() -> list[tuple[str, dict, tuple]]:
    out = []
    for node in _config_leaves():
        if node.expects.startswith(("an integer", "a number")):
            for text in ("inf", "nan", "-1", "x", "9" * 5000, "1e400"):
                out.append((f"{node.env_var}={text[:8]}", {node.env_var: text}, (node.env_var,)))
    return out


# --- building the cases --------------------------------------------------------------------------


def build_cases() -> list[Case]:
    cases: list[Case] = []
    for name, data, expect in task_json_variants():
        cases.append(Case("task file (task create)", name, ["task", "create", "{dir}/task.json", "--id", "malformed"],
                          {"task.json": data}, ("task.json", *expect)))
    for name, data, expect in task_json_variants():
        cases.append(Case("bundle task JSON (run --dry-run)", name, ["run", "./{dir}", "--dry-run"],
                          {"tasks/hello.json": data}, ("tasks/hello.json", *expect), bundle=True))
    for name, data, expect in artifact_toml_variants():
        cases.append(Case("artifact.toml (run --dry-run)", name, ["run", "./{dir}", "--dry-run"],
                          {"artifacts/greeting/artifact.toml": data}, ("artifacts/greeting/artifact.toml", *expect),
                          bundle=True))
    for name, data, expect in eval_toml_variants():
        cases.append(Case("bundle eval TOML (run --dry-run)", name, ["run", "./{dir}", "--dry-run"],
                          {"evals/smoke.toml": data}, ("evals/smoke.toml", *expect), bundle=True))
    echo = ECHO_SERVER.read_bytes()
    for name, data, expect in env_toml_variants():
        cases.append(Case("env.toml (env put)", name, ["env", "put", "{dir}/echo", "--id", "malformed-echo"],
                          {"echo/env.toml": data, "echo/server.py": echo}, ("echo/env.toml", *expect)))
        cases.append(Case("bundle env.toml (run --dry-run)", name, ["run", "./{dir}", "--dry-run"],
                          {"envs/echo/env.toml": data, "envs/echo/server.py": echo}, ("envs/echo/env.toml", *expect),
                          bundle=True))
    cases += layout_cases()
    for name, data, expect in config_variants():
        cases.append(Case("config.toml (config show)", name, ["config", "show"], config=data,
                          expect=("config.toml", *expect)))
    for name, data, expect in config_variants()[::12]:  # every command refuses a bad config, not only `config`
        cases.append(Case("config.toml (task list)", name, ["task", "list"], config=data,
                          expect=("config.toml", *expect)))
    for name, env, expect in env_var_variants():
        cases.append(Case("AGENTENV_* variables (config show)", name, ["config", "show"], env=env, expect=expect))
    cases += config_file_cases()
    cases += eval_file_cases()
    cases += artifact_put_cases()
    return cases


def layout_cases() -> list[Case]:
    area = "bundle folder layout (run --dry-run)"
    big = b"[" + b" " * (17 << 20) + b"]"
    layouts = [
        ("tasks is a file", {"tasks": b"x", "evals/smoke.toml": b'tasks = ["hello"]\n'}, ("smoke.toml",), ["tasks"]),
        ("task is a folder", {"tasks/hello.json/x": b"1"}, ("tasks/hello.json",), ["tasks/hello.json"]),
        ("task not JSON", {"tasks/notes.txt": b"x"}, ("tasks/notes.txt",), []),
        ("task is a FIFO", {"tasks/hello.json": FIFO}, ("tasks/hello.json",), ["tasks/hello.json"]),
        ("task links to /dev/zero", {}, ("tasks/hello.json",), ["tasks/hello.json", "->/dev/zero"]),
        ("task over 16 MB", {"tasks/hello.json": big}, ("tasks/hello.json", "limit"), []),
        ("artifact.toml is a folder", {"artifacts/greeting/artifact.toml/x": b"1"},
         ("artifacts/greeting/artifact.toml", "directory"), []),
        ("artifact.toml is a FIFO", {"artifacts/greeting/artifact.toml": FIFO},
         ("artifacts/greeting/artifact.toml", "not a regular file"), []),
        ("artifact.toml over 1 MB", {"artifacts/greeting/artifact.toml": b"#" * (2 << 20)},
         ("artifact.toml", "limit"), []),
        ("loose artifact file", {"artifacts/loose.txt": b"x"}, ("artifacts/loose.txt",), []),
        ("empty artifact folder", {"artifacts/empty": DIR}, ("artifacts/empty",), []),
        ("eval is a folder", {"evals/smoke.toml": DIR}, ("evals/smoke.toml",), []),
        ("eval not TOML", {"evals/smoke.md": b"x"}, ("evals/smoke.md",), []),
        ("eval is a FIFO", {"evals/smoke.toml": FIFO}, ("evals/smoke.toml", "not a regular file"), []),
        ("kind typo", {"task/x.json": b"[]"}, ("task/",), []),
        ("bundle.toml", {"bundle.toml": b"name = 'x'\n"}, ("bundle.toml",), []),
        ("no kinds", {"README.md": b"x"}, ("no tasks",), ["tasks", "artifacts"]),
        ("env is a file", {"envs/echo": b"x"}, ("envs/echo",), []),
        # (a folder with server.py and no env.toml is the reference's env folder: docs/reference-compat.md)
        ("env without env.toml or server.py", {"envs/echo/tools.py": b"x"}, ("envs/echo", "env.toml"), []),
        ("env.toml is a folder", {"envs/echo/env.toml/x": b"1"}, ("envs/echo",), []),
        ("env.toml is a FIFO", {"envs/echo/env.toml": FIFO}, ("envs/echo/env.toml", "not a regular file"), []),
        ("skill without SKILL.md", {"skills/s/x.md": b"x"}, ("skills/s",), []),
        ("task name not UTF-8", {b"tasks/\xff.json".decode("utf-8", "surrogateescape"): b"[]"}, ("\\xff",), []),
        ("artifact file name not UTF-8", {b"artifacts/greeting/\xfe.txt".decode("utf-8", "surrogateescape"): b"x"},
         ("\\xfe",), []),
        ("eval name not UTF-8", {b"evals/\xfd.toml".decode("utf-8", "surrogateescape"): b"tasks=[]"}, ("\\xfd",), []),
        ("folder name not UTF-8", {b"artifacts/\xfc/x".decode("utf-8", "surrogateescape"): b"x"}, ("\\xfc",), []),
    ]
    out = []
    for name, files, expect, removed in layouts:
        case = Case(area, name, ["run", "./{dir}", "--dry-run"], dict(files), expect, bundle=True)
        case.removed = removed  # type: ignore[attr-defined]
        out.append(case)
    return out


def config_file_cases() -> list[Case]:
    area = "AGENTENV_CONFIG and the config file itself (config show)"
    return [
        Case(area, "AGENTENV_CONFIG=/dev/zero", ["config", "show"], env={"AGENTENV_CONFIG": "/dev/zero"},
             expect=("/dev/zero", "character device")),
        Case(area, "AGENTENV_CONFIG=a folder", ["config", "show"], {"d": DIR}, env={"AGENTENV_CONFIG": "{dir}/d"},
             expect=("AGENTENV_CONFIG", "directory")),
        Case(area, "AGENTENV_CONFIG=missing", ["config", "show"], env={"AGENTENV_CONFIG": "{dir}/nope.toml"},
             expect=("nope.toml", "missing")),
        Case(area, "AGENTENV_CONFIG=a FIFO", ["config", "show"], {"f.toml": FIFO},
             env={"AGENTENV_CONFIG": "{dir}/f.toml"}, expect=("f.toml", "FIFO")),
        Case(area, "AGENTENV_CONFIG=2 MB", ["config", "show"], {"big.toml": b"#" * (2 << 20)},
             env={"AGENTENV_CONFIG": "{dir}/big.toml"}, expect=("big.toml", "limit")),
        Case(area, "AGENTENV_CONFIG=bad TOML", ["task", "list"], {"c.toml": b"[hub]\nlinger_s = inf\n"},
             env={"AGENTENV_CONFIG": "{dir}/c.toml"}, expect=("c.toml", "'hub.linger_s'", "inf")),
        Case(area, "config.toml is a folder", ["config", "show"], config=DIR, expect=("config.toml", "directory")),
        Case(area, "config.toml is a FIFO", ["config", "show"], config=FIFO, expect=("config.toml", "FIFO")),
        Case(area, "config.toml over 1 MB", ["config", "show"], config=b"#" * (2 << 20),
             expect=("config.toml", "limit")),
        Case(area, "config.toml not UTF-8", ["task", "list"], config=b"[hub]\nlinger_s = 1 # \xff\n",
             expect=("config.toml", "not UTF-8")),
    ]


def eval_file_cases() -> list[Case]:
    area = "eval files (eval create)"
    out = []
    good = json.dumps([{"task_id": "malformed-known", "task_version": 1}]).encode()
    variants: list[tuple[str, str, bytes, tuple]] = [(f"json {n}", "e.json", d, ("line",)) for n, d in
                ((f"truncated at {c}", good[:c]) for c in range(3, len(good) - 1, 4))]
    variants += [(f"toml {n}", "e.toml", d, e) for n, d, e in eval_toml_variants()
                 if "unknown task" not in e and "'id'" not in e and "'description'" not in e and "taks" not in e
                 and not n.startswith("truncated")]
    for wrong in ('5', '"x"', "{}", "[5]", '[{"task_id": 5}]', '[{"task_version": 1}]', '[{"task_id": ""}]',
                  '[{"task_id": "x", "task_version": "1"}]', '[{"task_id": "x", "task_version": 0}]',
                  '[{"task_id": "x", "task_version": -1}]', '[{"task_id": "x", "task_version": true}]',
                  '[{"task_id": "x", "task_version": 1.5}]', '[{"task_id": "x", "task_version": NaN}]',
                  '{"tasks": 5}', '{"tasks": []}'):
        variants.append((f"json {wrong}", "e.json", wrong.encode(), (("tasks", "task_id", "task_version"),)))
    variants += [("json nested", "e.json", b"[" * 100_000 + b"]" * 100_000, ("nested too deeply",)),
                 ("json huge version", "e.json", b'[{"task_id": "x", "task_version": ' + b"9" * 5000 + b"}]",
                  ("4300 digits", "line 1")),
                 ("json surrogate", "e.json", b'[{"task_id": "\\ud800"}]', ("not valid Unicode", "task_id")),
                 ("json not UTF-8", "e.json", b'[{"task_id": "\xff"}]', ("not UTF-8",)),
                 ("json 10001 entries", "e.json", json.dumps(["x"] * 10_001).encode(), ("limit",)),
                 ("json unknown tasks", "e.json", json.dumps([f"ghost-{i}" for i in range(50)]).encode(),
                  ("unknown task(s)", "and 40 more")),
                 ("toml unknown task", "e.toml", b'tasks = ["ghost"]\n', ("unknown task(s)", "ghost")),
                 ("FIFO", "e.json", FIFO, ("not a regular file",))]
    for name, file, data, expect in variants:
        out.append(Case(area, name, ["eval", "create", f"{{dir}}/{file}", "--id", "malformed-eval"], {file: data},
                        (file, *expect)))
    return out


def artifact_put_cases() -> list[Case]:
    area = "artifact put"
    out = [
        Case(area, "/dev/zero", ["artifact", "put", "/dev/zero", "--id", "malformed-z"], expect=("/dev/zero",)),
        Case(area, "a FIFO", ["artifact", "put", "{dir}/f", "--id", "malformed-f"], {"f": FIFO}, expect=("f",)),
        Case(area, "a name not UTF-8", ["artifact", "put", "{dir}/d", "--id", "malformed-n"],
             {b"d/\xff.txt".decode("utf-8", "surrogateescape"): b"x"}, expect=("\\xff",)),
        Case(area, "an empty folder", ["artifact", "put", "{dir}/d", "--id", "malformed-e"], {"d": DIR},
             expect=("no files",)),
    ]
    for bad in ("../x", "a/../b", "..", "a\x01b", "a\nb", "x" * 300, "", "a\udcffb"):
        out.append(Case(area, f"--id {bad[:8]!r}", ["artifact", "put", "{dir}/f.txt", "--id", bad], {"f.txt": b"x"},
                        expect=("--id",), code=2))
    for bad in ("../x", "a\x01b", "x" * 300):
        out.append(Case(area, f"task create --id {bad[:8]!r}", ["task", "create", "{dir}/t.json", "--id", bad],
                        {"t.json": _dump(GOOD_STEPS)}, expect=("--id",), code=2))
    return out


CASES = build_cases()
AREAS = sorted({c.area for c in CASES}, key=[c.area for c in CASES].index)
SUBPROCESS = {id(c) for c in random.Random(12).sample(
    [c for c in CASES if all("\0" not in a and "\udcff" not in a for a in c.argv) and c.config != DIR
     and len(str(c.files)) < 100_000], 30)}


# --- the project and the runners -----------------------------------------------------------------


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTENV_")}
    env["AGENTENV_SANDBOX_DEFAULT"] = "process"
    return env


def _agentenv(root: Path, *args: str) -> subprocess.CompletedProcess:
    proc = run_agentenv(list(args), cwd=root, env=_clean_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc


def store_dump(root: Path) -> dict:
    """Every table's row count and content hash, and the object files on disk."""
    import duckdb

    con = duckdb.connect(str(root / ".agentenv" / "store.duckdb"), read_only=True)
    try:
        tables = [r[0] for r in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'").fetchall()]
        out: dict[str, Any] = {t: con.execute(f'SELECT count(*), bit_xor(hash(t)) FROM "{t}" t').fetchone()
                               for t in tables}
    finally:
        con.close()
    objects = root / ".agentenv" / "objects"
    out["object files"] = sorted(str(p.relative_to(objects)) for p in objects.rglob("*")) if objects.exists() else []
    return out


def _store_stat(root: Path) -> tuple:
    state = root / ".agentenv"
    return tuple((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(state.glob("store.duckdb*")))


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """A project whose store holds a run, an artifact, a task, an eval's task and an env."""
    root = tmp_path_factory.mktemp("malformed")
    _agentenv(root, "run", "hello")
    (root / "greet").mkdir()
    (root / "greet" / "hello.txt").write_text("hello")
    _agentenv(root, "artifact", "put", "greet", "--id", "greeting")
    (root / "t.json").write_text(json.dumps(GOOD_STEPS))
    _agentenv(root, "task", "create", "t.json", "--id", "malformed-known")
    (root / "echo").mkdir()
    (root / "echo" / "env.toml").write_text(ENV_TOML)
    shutil.copy(ECHO_SERVER, root / "echo" / "server.py")
    _agentenv(root, "env", "put", "echo", "--id", "echo")
    dump = store_dump(root)
    assert dump["runs"][0] == 1 and dump["documents"][0] >= 4
    return {"root": root, "dump": dump, "stat": _store_stat(root), "n": 0}


def _materialize(project: dict, case: Case) -> str:
    root: Path = project["root"]
    project["n"] += 1
    rel = f"c{project['n']}"
    folder = root / rel
    if case.bundle:
        shutil.copytree(HELLO, folder)
        (folder / "evals").mkdir(exist_ok=True)
        for gone in getattr(case, "removed", []):
            if gone.startswith("->"):
                continue
            target = folder / gone
            shutil.rmtree(target) if target.is_dir() else target.unlink(missing_ok=True)
        if "->/dev/zero" in getattr(case, "removed", []):
            (folder / "tasks" / "hello.json").symlink_to("/dev/zero")
    folder.mkdir(exist_ok=True)
    for name, data in case.files.items():
        path = folder / name
        if data == DIR:
            path.mkdir(parents=True, exist_ok=True)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
        if data == FIFO:
            os.mkfifo(path)
        else:
            path.write_bytes(data)
    config = root / ".agentenv" / "config.toml"
    if case.config == DIR:
        config.mkdir()
    elif case.config == FIFO:
        os.mkfifo(config)
    elif case.config is not None:
        config.write_bytes(case.config)
    return rel


def _cleanup(project: dict, rel: str) -> None:
    root: Path = project["root"]
    shutil.rmtree(root / rel, ignore_errors=True)
    config = root / ".agentenv" / "config.toml"
    if config.is_dir():
        shutil.rmtree(config)
    elif config.exists() or config.is_symlink():
        config.unlink()


def run_in_process(root: Path, argv: list[str], env: dict[str, str]) -> tuple[int, str]:
    """The real CLI entry point in this process: (exit code, stdout + stderr); a traceback if one escaped."""
    from click.testing import CliRunner

    from agentenv_local.cli.main import main

    saved_argv, saved_cwd = sys.argv, os.getcwd()
    saved_env = {k: os.environ.get(k) for k in env}
    code: object = 0
    runner = CliRunner()
    with runner.isolation() as (out, err, _):
        sys.argv = ["agentenv", *argv]
        os.environ.update(env)
        os.chdir(root)
        try:
            main()
        except SystemExit as exc:
            code = exc.code
        except BaseException:  # an escaped exception is exactly what this suite hunts
            sys.stderr.write(traceback.format_exc())
            code = "escaped"
        finally:
            sys.argv = saved_argv
            os.chdir(saved_cwd)
            for k, v in saved_env.items():
                os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
        sys.stdout.flush()
        sys.stderr.flush()
        text = out.getvalue().decode("utf-8", "replace") + err.getvalue().decode("utf-8", "replace")
    return (code if isinstance(code, int) else (0 if code is None else -1)), text


def run_subprocess(root: Path, argv: list[str], env: dict[str, str]) -> tuple[int, str]:
    proc = run_agentenv(list(argv), cwd=root, env={**_clean_env(), **env}, timeout=60)
    return proc.returncode, proc.stdout + proc.stderr


def check_case(project: dict, case: Case, *, subprocess_run: bool) -> str | None:
    """Run one case; the reason it failed, or None."""
    rel = _materialize(project, case)
    try:
        argv = [a.replace("{dir}", rel) for a in case.argv]
        env = {k: v.replace("{dir}", str(project["root"] / rel)) for k, v in case.env.items()}
        runner = run_subprocess if subprocess_run else run_in_process
        code, text = runner(project["root"], argv, env)
    finally:
        _cleanup(project, rel)
    problems = []
    if "Traceback" in text:
        problems.append("a traceback")
    if code != case.code:
        problems.append(f"exit {code}, not {case.code}")
    for want in case.expect:
        options = want if isinstance(want, tuple) else (want,)
        if not any(o in text for o in options):
            problems.append(f"no {' or '.join(map(repr, options))} in the message")
    if _store_stat(project["root"]) != project["stat"]:
        if store_dump(project["root"]) != project["dump"]:
            problems.append("the store changed")
            project["dump"] = store_dump(project["root"])
        project["stat"] = _store_stat(project["root"])
    if problems:
        return f"[{case.area}] {case.name}: {'; '.join(problems)}\n    {text[:600]!r}"
    return None


# --- the tests -----------------------------------------------------------------------------------


def test_at_least_500_cases_across_every_area(capsys):
    counts = Counter(c.area for c in CASES)
    lines = [f"{'area':<62} cases", *(f"{area:<62} {counts[area]:>5}" for area in AREAS),
             f"{'total (' + str(len(SUBPROCESS)) + ' of them also as real subprocesses)':<62} {len(CASES):>5}"]
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    assert len(CASES) >= 500
    assert len(AREAS) >= 10 and min(counts.values()) >= 4


def test_the_good_inputs_the_cases_break_are_good():
    """Each generator breaks a valid input, so the error is the breakage, not the base."""
    from agentenv_local.config.loader import check_tree
    from agentenv_local.tasks.model import parse_task

    parse_task(GOOD_STEPS, "t")
    for text in (ARTIFACT_TOML, EVAL_TOML, ENV_TOML):
        tomllib.loads(text)
    check_tree(tomllib.loads("[runner]\nconcurrency = 2\n[hub]\nlinger_s = 0.5\n"), "x")


@pytest.mark.parametrize("area", AREAS)
def test_malformed_inputs_are_refused_in_process(project, area):
    failures = [f for c in CASES if c.area == area and (f := check_case(project, c, subprocess_run=False))]
    assert not failures, f"{len(failures)} case(s) failed:\n" + "\n".join(failures[:15])


def test_a_sample_as_real_subprocesses(project):
    failures = [f for c in CASES if id(c) in SUBPROCESS and (f := check_case(project, c, subprocess_run=True))]
    assert not failures, f"{len(failures)} case(s) failed:\n" + "\n".join(failures[:15])


def test_a_stored_task_or_eval_of_the_wrong_shape_is_shown_as_invalid(tmp_path):
    """`task list` used to raise TypeError on a stored body without a steps list; now the row says invalid."""
    from stores.database import DuckDBStore

    _agentenv(tmp_path, "task", "list")  # creates the store
    state = tmp_path / ".agentenv"
    store = DuckDBStore(state / "store.duckdb", state / "objects")
    try:
        store.documents.put("tasks", "odd", {"steps": 5})
        store.documents.put("tasks", "odder", {"no": "steps"})
        store.documents.put("evals", "odd-eval", {"tasks": "x"})
    finally:
        store.close()
    listed = json.loads(_agentenv(tmp_path, "task", "list", "--json").stdout)
    assert {r["id"]: r["steps"] for r in listed} == {"odd": None, "odder": None}
    assert "invalid" in _agentenv(tmp_path, "task", "list").stdout
    assert "invalid" in _agentenv(tmp_path, "eval", "list").stdout
    for argv in (["task", "get", "--id", "odd"], ["task", "validate", "--id", "odder"], ["task", "run", "--id", "odd"],
                 ["eval", "run", "--id", "odd-eval"]):
        code, text = run_subprocess(tmp_path, argv, {})
        assert code == 1 and "Traceback" not in text and "malformed in the store" in text, (argv, text)


def test_the_checker_sees_a_write(project):
    """The "store unchanged" check is real: a command that does write is caught by it."""
    good = Case("control", "a good task", ["task", "create", "{dir}/t.json", "--id", "malformed-written"],
                {"t.json": _dump(GOOD_STEPS)}, code=0)
    assert "the store changed" in (check_case(project, good, subprocess_run=False) or "")
