"""`agentenv store migrate-objects|cleanup-objects`: move a project's objects from one object store to another.

The migration copies every key from the configured object store into the new one through their own
put/get (so it works between any two), reads each copy back and checks its sha256, and only when every key
is there and verified writes `[store] objects = "<new>"` into the project's config file. It is resumable:
a key already on the new store is verified, not copied again, so running the command again after a kill
finishes the job. The old store's bytes stay until `agentenv store cleanup-objects --store OLD`, which
refuses while any of its keys is missing from the store in use. Both need this process to be the hub
(the stores are opened here): with `agentenv up` running they ask to stop it first.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
import tomllib
from pathlib import Path
from typing import Any

import click

from agentenv_local.errors import ConfigError, ConflictError, HubError

RECORD = "objects-migration.json"  # in the state dir: which migration is under way, or was done


@click.group("store")
def store_group() -> None:
    """Move the project's object store (artifact bytes) to another one, then clean up the old one.

    `[store] objects` names the object store (`local`, the built-in, or one a plugin adds: `agentenv plugin
    list` shows the `stores` there are). Change it with `migrate-objects`, never by hand: a project whose
    config names a store that lacks its objects cannot read its artifacts.
    """


def _hub_session(config: Any) -> Any:
    from agentenv_local.hub import connect
    from agentenv_local.hub.session import LocalSession

    session = connect(config=config)
    if not isinstance(session, LocalSession):
        session.close()
        raise HubError("another agentenv process is this project's hub; the object stores can only be changed "
                       "by the process that opens them",
                       hint="stop it (`agentenv down`, or wait for the running command to finish) and run again")
    return session


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@store_group.command("migrate-objects")
@click.option("--to", "target_name", required=True,
              help="The object store to move to (a name in `plugin list`'s stores).")
@click.option("--dry-run", is_flag=True, help="Count the keys and bytes to move; copy nothing, change nothing.")
@click.option("-v", "--verbose", is_flag=True, help="Print each key as it is copied (`copied KEY`) or verified.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def migrate_objects(target_name: str, dry_run: bool, verbose: bool, as_json: bool) -> None:
    """Copy every object to the store TO, verify each copy, then switch `[store] objects` to it.

    Run it again after an interruption: keys already copied are verified and kept. The old store's bytes
    are kept; remove them afterwards with `agentenv store cleanup-objects --store OLD`.
    """
    from agentenv_local.config import load_config, object_stores

    config = load_config()
    source_name = object_stores.configured_name(config)
    if target_name == source_name:
        raise ConfigError(f"[store] objects is already {target_name!r}: nothing to migrate",
                          hint="name another object store with --to")
    target = object_stores.resolve(config, target_name)  # an unknown name fails before the hub starts
    with _hub_session(config) as session:
        store = session.hub.store
        source = store.objects
        dest = store.open_objects(target.factory())
        keys = source.list()
        summary: dict[str, Any] = {"from": source_name, "to": target_name, "keys": len(keys),
                                   "bytes": sum(int(m["size"]) for m in keys), "copied": 0, "verified": 0,
                                   "already_there": sum(1 for m in keys if _same(dest.metadata(m["key"]), m))}
        if dry_run:
            summary["dry_run"] = True
            _report(summary, as_json)
            return
        record = session.paths.state_dir / RECORD
        _write_json(record, {"from": source_name, "to": target_name, "state": "copying", "at": time.time()})
        for meta in keys:
            key = meta["key"]
            on_target = dest.metadata(key)
            if on_target is None:
                dest.put(key, source.get(key), meta["content_type"])
                summary["copied"] += 1
                if verbose:
                    click.echo(f"copied {key}")
            elif not _same(on_target, meta):
                raise ConflictError(f"{key!r} is already on the {target_name!r} store with other bytes "
                                    f"(sha256 {on_target['sha256'][:12]}, here {meta['sha256'][:12]})",
                                    hint="nothing was switched; remove that key from the target store, or keep "
                                         f"[store] objects = {source_name!r}")
            if _sha(dest.get(key)) != meta["sha256"]:  # read back: what the project will read from now on
                raise ConflictError(f"{key!r} reads back from the {target_name!r} store with other bytes",
                                    hint="nothing was switched; check the target store's disk and run again")
            summary["verified"] += 1
            if verbose and on_target is not None:
                click.echo(f"verified {key}")
        config_file = _switch_config(config, session.paths.state_dir, target_name)
        _write_json(record, {"from": source_name, "to": target_name, "state": "switched", "at": time.time(),
                             "keys": summary["keys"]})
        summary["config_file"] = str(config_file)
        summary["cleanup"] = f"agentenv store cleanup-objects --store {source_name}"
        _report(summary, as_json)
        if os.environ.get("AGENTENV_STORE_OBJECTS"):
            click.echo("note: AGENTENV_STORE_OBJECTS is set and wins over the config file; unset it", err=True)


def _same(on_target: dict | None, meta: dict) -> bool:
    return on_target is not None and on_target["sha256"] == meta["sha256"]


def _report(summary: dict, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(summary, indent=2))
        return
    if summary.get("dry_run"):
        click.echo(f"{summary['keys']} key(s), {summary['bytes']} byte(s) to move from {summary['from']!r} to "
                   f"{summary['to']!r}; {summary['already_there']} already there. Nothing changed (--dry-run).")
        return
    click.echo(f"Moved {summary['keys']} key(s) ({summary['bytes']} bytes) from {summary['from']!r} to "
               f"{summary['to']!r}: {summary['copied']} copied, {summary['verified']} verified.")
    click.echo(f"[store] objects = {summary['to']!r} in {summary['config_file']}.")
    click.echo(f"The old bytes are kept; once you no longer need them: {summary['cleanup']}")


def _write_json(path: Path, value: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(value, indent=2) + "\n")
    os.replace(tmp, path)


_STORE_HEADER = re.compile(r"^\s*\[\s*store\s*\]\s*(#.*)?$")
_ANY_HEADER = re.compile(r"^\s*\[")
_OBJECTS_LINE = re.compile(r"^\s*objects\s*=")


def _switch_config(config: Any, state_dir: Path, name: str) -> Path:
    """Set `[store] objects = "<name>"` in the project's config file, keeping the rest of it as written."""
    path = Path(config.file_path) if config.file_path else state_dir / "config.toml"
    text = path.read_text(encoding="utf-8-sig") if path.exists() else ""
    lines = text.splitlines()
    setting = f'objects = "{name}"'
    start = next((i for i, line in enumerate(lines) if _STORE_HEADER.match(line)), None)
    if start is None:
        lines += (["", "[store]"] if lines else ["[store]"]) + [setting]
    else:
        end = next((i for i in range(start + 1, len(lines)) if _ANY_HEADER.match(lines[i])), len(lines))
        at = next((i for i in range(start + 1, end) if _OBJECTS_LINE.match(lines[i])), None)
        if at is None:
            lines.insert(start + 1, setting)
        else:
            lines[at] = setting
    new_text = "\n".join(lines) + "\n"
    try:
        written = tomllib.loads(new_text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: cannot set [store] objects in this file ({exc})",
                          hint=f'every object is copied and verified: set objects = "{name}" under [store] by hand')
    if (written.get("store") or {}).get("objects") != name:
        raise ConfigError(f"{path}: cannot set [store] objects in this file (it sets the store table another way)",
                          hint=f'every object is copied and verified: set objects = "{name}" under [store] by hand')
    _write_text(path, new_text)
    return path


def _write_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


@store_group.command("cleanup-objects")
@click.option("--store", "old_name", required=True, help="The object store to empty (not the one in use).")
@click.option("--yes", is_flag=True, help="Do it (without it: say what would be removed).")
def cleanup_objects(old_name: str, yes: bool) -> None:
    """Remove this project's objects from an old object store, once the store in use holds every one of them."""
    from agentenv_local.config import load_config, object_stores

    config = load_config()
    in_use = object_stores.configured_name(config)
    if old_name == in_use:
        raise ConfigError(f"{old_name!r} is the object store in use ([store] objects); it cannot be cleaned up",
                          hint="migrate first: agentenv store migrate-objects --to OTHER")
    old = object_stores.resolve(config, old_name)
    with _hub_session(config) as session:
        store = session.hub.store
        old_store = store.open_objects(old.factory())
        keys = old_store.list()
        missing = [m["key"] for m in keys if not _same(store.objects.metadata(m["key"]), m)]
        if missing:
            raise ConflictError(f"{len(missing)} key(s) of {old_name!r} are not in {in_use!r}, e.g. {missing[0]!r}; "
                                "nothing was removed",
                                hint=f"run agentenv store migrate-objects --to {in_use} first")
        if not yes:
            click.echo(f"{len(keys)} key(s) of {old_name!r} are all in {in_use!r}; run again with --yes to remove "
                       "them from the old store.")
            return
        removed = old_store.purge()
        click.echo(f"Removed {removed['keys']} key(s) and {removed['files']} file(s) ({removed['bytes']} bytes) "
                   f"from {old_name!r}.")
