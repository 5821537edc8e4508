"""Host-side file access inside a folder that something else controls (a sandbox's /app).

A sandbox can swap any directory of its folder for a symlink at any moment, so checking a path and
then using it (realpath, then open) is a race the sandbox can win. Here every path component is
opened relative to its parent's fd with O_NOFOLLOW | O_DIRECTORY, files are created with O_EXCL and
renamed into place (a rename replaces a name, it never writes through it), and anything that is not
a plain folder or regular file (a symlink, a FIFO, a device, a socket) is refused with an error that
names the path. Only the root folder itself is trusted (the host made it).
"""

from __future__ import annotations

import os
import posixpath
import secrets
import stat
from pathlib import Path

from agentenv_local.errors import NotFoundError, StepError

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_HINT = ("the host never follows links (or opens FIFOs, devices, sockets) inside a sandbox's folder; "
         "use the real path, or copy the file inside the sandbox first")
Owner = tuple[int, int] | None


def parts_of(rel: str, path: str, where: str) -> list[str]:
    """The components of a relative path, `..` resolved lexically; refuses one that leaves the root."""
    norm = posixpath.normpath(rel) if rel else "."
    if norm == ".":
        return []
    if norm.startswith(("/", "../")) or norm == "..":
        raise StepError(f"path {path!r} leads out of {where}", hint="remove the '..' that points outside /app")
    return norm.split("/")


def file_kind(mode: int) -> str:
    """What a file of this `st_mode` is, for a message: "a FIFO", "a character device", "a folder"..."""
    return ("a symbolic link" if stat.S_ISLNK(mode) else "a FIFO" if stat.S_ISFIFO(mode)
            else "a socket" if stat.S_ISSOCK(mode) else "a character device" if stat.S_ISCHR(mode)
            else "a block device" if stat.S_ISBLK(mode) else "a folder" if stat.S_ISDIR(mode)
            else "a regular file" if stat.S_ISREG(mode) else "a special file")


class Refused(StepError):
    """A path component is not what the host may go through or open (`what` says what it is)."""

    def __init__(self, message: str, what: str):
        super().__init__(message, hint=_HINT)
        self.what = what


def _refuse(path: str, name: str, st: os.stat_result, where: str, doing: str) -> Refused:
    kind = file_kind(st.st_mode)
    return Refused(f"refusing to {doing} {path!r} in {where}: {name!r} is {kind}", kind)


def _lstat(name: str, dir_fd: int) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _open_dirs(root: Path, parts: list[str], path: str, where: str, doing: str, *,
               create: bool = False, owner: Owner = None) -> int:
    """An fd on root/parts..., every step opened no-follow (made when `create`); raises NotFoundError
    when a component is missing, StepError when one is a link or not a folder."""
    fd = os.open(root, _DIR)
    try:
        for name in parts:
            made = False
            try:
                child = os.open(name, _DIR, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise NotFoundError(f"no {path!r} in {where}") from None
                try:
                    os.mkdir(name, 0o755, dir_fd=fd)
                    made = True
                except FileExistsError:
                    pass
                child = _open_existing_dir(name, fd, path, where, doing)
            except OSError:  # a link or a file where a folder should be: say which
                child = _open_existing_dir(name, fd, path, where, doing)
            os.close(fd)
            fd = child
            if made and owner is not None:
                os.fchown(fd, *owner)
        return fd
    except BaseException:
        os.close(fd)
        raise


def _open_existing_dir(name: str, dir_fd: int, path: str, where: str, doing: str) -> int:
    try:
        return os.open(name, _DIR, dir_fd=dir_fd)
    except OSError as exc:
        st = _lstat(name, dir_fd)
        if st is None:
            raise NotFoundError(f"no {path!r} in {where}") from None
        if not stat.S_ISDIR(st.st_mode):
            raise _refuse(path, name, st, where, doing) from exc
        raise


def write_file(root: Path, rel: str, data: bytes, *, path: str, where: str, owner: Owner = None) -> None:
    """Write `data` to root/rel: parents made as needed, the file made new and renamed into place."""
    parts = parts_of(rel, path, where)
    if not parts:
        raise StepError(f"cannot write {path!r} in {where}: it is a directory")
    dfd = _open_dirs(root, parts[:-1], path, where, "write", create=True, owner=owner)
    name = parts[-1]
    try:
        st = _lstat(name, dfd)
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise StepError(f"cannot write {path!r} in {where}: it is a directory")
        if st is not None and not stat.S_ISREG(st.st_mode):
            raise _refuse(path, name, st, where, "write")
        mode = stat.S_IMODE(st.st_mode) & 0o777 if st is not None else 0o644  # never a setuid bit
        tmp = f".{name[:32]}.{secrets.token_hex(6)}.agentenv-tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dfd)
        try:
            try:
                view = memoryview(bytes(data))
                while view:
                    view = view[os.write(fd, view):]
                os.fchmod(fd, mode)
                if owner is not None:
                    os.fchown(fd, *owner)
            finally:
                os.close(fd)
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=dfd)
            except OSError:
                pass
            raise
    except IsADirectoryError:  # a folder appeared at the name since the check
        raise StepError(f"cannot write {path!r} in {where}: it is a directory") from None
    finally:
        os.close(dfd)


def read_file(root: Path, rel: str, *, path: str, where: str) -> bytes:
    """The bytes of the regular file root/rel; NotFoundError when there is none."""
    parts = parts_of(rel, path, where)
    if not parts:
        raise NotFoundError(f"no file {path!r} in {where}")
    try:
        dfd = _open_dirs(root, parts[:-1], path, where, "read")
    except NotFoundError:
        raise NotFoundError(f"no file {path!r} in {where}") from None
    name = parts[-1]
    try:
        st = _lstat(name, dfd)
        if st is None or stat.S_ISDIR(st.st_mode):
            raise NotFoundError(f"no file {path!r} in {where}")
        if not stat.S_ISREG(st.st_mode):  # a FIFO would hang the read, a device has no end
            raise _refuse(path, name, st, where, "read")
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
        except FileNotFoundError:
            raise NotFoundError(f"no file {path!r} in {where}") from None
        except OSError as exc:
            now = _lstat(name, dfd)
            if now is not None and not stat.S_ISREG(now.st_mode):
                raise _refuse(path, name, now, where, "read") from exc
            raise
        try:
            opened = os.fstat(fd)
            if not stat.S_ISREG(opened.st_mode):  # swapped between the check and the open
                raise _refuse(path, name, opened, where, "read")
            chunks = []
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)
    finally:
        os.close(dfd)


def kind(root: Path, rel: str, *, path: str, where: str) -> str | None:
    """"dir", "file" (anything that is not a folder: reading it says what it is) or None."""
    parts = parts_of(rel, path, where)
    if not parts:
        return "dir"
    try:
        dfd = _open_dirs(root, parts[:-1], path, where, "look at")
    except NotFoundError:
        return None
    try:
        st = _lstat(parts[-1], dfd)
    finally:
        os.close(dfd)
    return None if st is None else "dir" if stat.S_ISDIR(st.st_mode) else "file"


def list_files(root: Path, rel: str, *, path: str, where: str, skip_top: frozenset[str] = frozenset()) -> list[str]:
    """Every non-folder entry under root/rel (links listed, never followed), as sorted relative paths."""
    parts = parts_of(rel, path, where)
    try:
        top = _open_dirs(root, parts, path, where, "list")
    except NotFoundError:
        return []
    except Refused as exc:
        if exc.what == "a regular file":
            return []  # a file where a folder was asked for: no folder to list
        raise
    found: list[str] = []
    stack = [(top, "")]
    try:
        while stack:
            fd, prefix = stack.pop()
            try:
                with os.scandir(fd) as entries:
                    for entry in entries:
                        name = prefix + entry.name
                        if not prefix and entry.name in skip_top:
                            continue
                        if not entry.is_dir(follow_symlinks=False):
                            found.append(name)
                            continue
                        try:
                            stack.append((os.open(entry.name, _DIR, dir_fd=fd), name + "/"))
                        except OSError:  # swapped for something else meanwhile: not a folder to walk
                            found.append(name)
            finally:
                os.close(fd)
    finally:
        for fd, _prefix in stack:
            os.close(fd)
    return sorted(found)
