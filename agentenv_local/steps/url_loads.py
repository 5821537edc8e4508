"""`load_artifact.urls`: files fetched from URLs into a sandbox, offline-first.

An entry is a URL string (saved under the last segment of its decoded path; a repeated name becomes
`name-1.ext`, `name-2.ext`, ...) or `{"url": ..., "filename": ...}` (saved under that plain file name), as in
the reference. Locally a URL is `file://...` or a path on this machine (a regular file, read without
following a final symlink), or `http(s)://` to a loopback host only: nothing leaves the machine.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import posixpath
import stat
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

MAX_URL_BYTES = 256 * 1024 * 1024
URL_KEYS = frozenset({"url", "filename"})


class UrlLoadError(Exception):
    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message, self.hint = message, hint


def _name_problem(name: str) -> str | None:
    if not name or name in (".", "..") or "/" in name or "\\" in name or "\x00" in name:
        return "must be a plain file name, not a path"
    return None


def url_problems(urls: list[Any]) -> list[str]:
    """What is wrong with a `urls` list (no I/O): entry shapes, file names, names given twice."""
    try:
        downloads(urls)
    except UrlLoadError as exc:
        return [f"urls: {exc.message}"]
    return []


def downloads(urls: list[Any]) -> list[tuple[str, str]]:
    """Each entry as (url, file name), the reference's naming rules."""
    explicit: dict[str, str] = {}
    for entry in urls:
        if isinstance(entry, dict):
            unknown = sorted(set(entry) - URL_KEYS)
            if unknown:
                raise UrlLoadError(f"entry {entry!r} has unknown key(s) {unknown}; an object takes url and filename")
            url, name = entry.get("url"), entry.get("filename")
            if not isinstance(url, str) or not url:
                raise UrlLoadError(f"entry {entry!r} needs a non-empty string 'url'")
            if not isinstance(name, str) or (problem := _name_problem(name)):
                raise UrlLoadError(f"entry {entry!r}: filename {problem or 'must be a string'}")
            if name in explicit:
                raise UrlLoadError(f"filename {name!r} is given to two entries ({explicit[name]!r} and {url!r})")
            explicit[name] = url
        elif not isinstance(entry, str) or not entry:
            raise UrlLoadError(f"entry {entry!r} must be a URL string or an object with url and filename")
    out: list[tuple[str, str]] = []
    taken: set[str] = set()
    for entry in urls:
        if isinstance(entry, dict):
            out.append((entry["url"], entry["filename"]))
            continue
        base = posixpath.basename(unquote(urlparse(entry).path)) or "downloaded"
        if problem := _name_problem(base):
            raise UrlLoadError(f"{entry!r} would be saved as {base!r}, which {problem}; give it a filename")
        stem, ext = os.path.splitext(base)
        name, count = base, 0
        while name in taken:
            count += 1
            name = f"{stem}-{count}{ext}"
        taken.add(name)
        if name in explicit:
            raise UrlLoadError(f"{entry!r} would be saved as {name!r}, the filename given to {explicit[name]!r}; "
                               "give it a filename of its own")
        out.append((entry, name))
    return out


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def fetch(url: str, timeout: float) -> bytes:
    """The bytes `url` names (see the module's doc for what a URL may be)."""
    parsed = urlparse(url)
    if parsed.scheme in ("http", "https"):
        host = (parsed.hostname or "").lower()
        if not _is_loopback(host):
            raise UrlLoadError(f"{url!r} is not on this machine: a local run fetches http(s) only from a loopback "
                               "host (127.0.0.1, ::1, localhost)",
                               hint="download the file and give its path, or store it as an artifact")
        return await _fetch_http(url, timeout)
    if parsed.scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            raise UrlLoadError(f"{url!r} names a file on host {parsed.netloc!r}; file:// URLs are read locally")
        return _read_local(Path(unquote(parsed.path)), url)
    if parsed.scheme == "":
        return _read_local(Path(url).expanduser(), url)
    raise UrlLoadError(f"{url!r}: a local run loads file://, a local path, or http(s) from a loopback host, "
                       f"not {parsed.scheme}://")


def _read_local(path: Path, url: str) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        raise UrlLoadError(f"cannot read {url!r}: {exc.strerror}"
                           + (" (a symlink is not followed)" if path.is_symlink() else "")) from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise UrlLoadError(f"cannot read {url!r}: not a regular file")
        if info.st_size > MAX_URL_BYTES:
            raise UrlLoadError(f"{url!r} is {info.st_size} bytes; at most {MAX_URL_BYTES} are loaded")
        return handle.read()


async def _fetch_http(url: str, timeout: float) -> bytes:
    return await asyncio.to_thread(_get, url, timeout)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # a redirect could leave loopback: it is answered as the error it then is


def _get(url: str, timeout: float) -> bytes:
    # No proxy (loopback only) and no redirects.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())
    try:
        with opener.open(url, timeout=timeout) as reply:
            data = reply.read(MAX_URL_BYTES + 1)
    except urllib.error.HTTPError as exc:
        raise UrlLoadError(f"GET {url} answered {exc.code}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise UrlLoadError(f"GET {url} failed: {reason}") from None
    if len(data) > MAX_URL_BYTES:
        raise UrlLoadError(f"{url!r} is more than {MAX_URL_BYTES} bytes")
    return data
