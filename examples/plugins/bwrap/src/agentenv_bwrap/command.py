"""The argv that runs one command in a bwrap sandbox.

Each command is one `bwrap` invocation: a fresh mount namespace whose root is an empty tmpfs remounted read-only,
with a minimal read-only set of the host's folders (/usr, /bin, /lib..., /etc), the sandbox's own folder as the
only writable bind on `/app`, a fresh tmpfs on /tmp, a new /proc and /dev, every namespace unshared (no network
unless asked), `--die-with-parent`, `--new-session`; bwrap itself sets no_new_privs.

Run as root, the command is launched as a per-sandbox unprivileged host uid (`setpriv`), so the sandbox's
processes are not host root: RLIMIT_NPROC counts them (the kernel exempts root) and a setuid file gains nothing.
That uid cannot traverse a private project folder, so a private mount namespace (`unshare --mount`) first binds
the sandbox's folder on a small tmpfs at /tmp, where bwrap (as that uid) finds it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# The host folders every sandbox sees, read-only (those missing on a host are skipped: --ro-bind-try).
BASE_RO = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32", "/etc")
SANDBOX_UID = 1000  # the uid (and gid) commands run as inside the sandbox
# The mount-namespace step for root: the folder (the launcher's cwd) bound at /tmp/app on a private tmpfs.
_STAGE = ("mount -t tmpfs -o mode=0711,size=64k agentenv-bwrap /tmp && mkdir /tmp/app && "
          "mount -c --bind /proc/self/cwd /tmp/app && cd / && exec \"$@\"")


@dataclass
class Limits:
    nofile: int = 1024
    nproc: int = 256
    address_space_mb: int = 8192


@dataclass
class Launch:
    """How to start one command: `argv`, run with `cwd` as its working directory."""

    argv: list[str]
    cwd: str
    staged: bool = field(default=False)


def bwrap_argv(app_dir: str, inner: list[str], *, workdir: str, share_net: bool, limits: Limits,
               host_uid: int | None, extra_ro: tuple[str, ...] = (), bwrap: str = "bwrap") -> Launch:
    """The launcher argv for `inner` run in the sandbox whose /app is the host folder `app_dir`.

    `host_uid`: the unprivileged host uid to run as (only when we are root); None runs bwrap as we are."""
    staged = host_uid is not None
    args = [bwrap, "--unshare-all", "--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID),
            "--die-with-parent", "--new-session", "--disable-userns", "--tmpfs", "/"]
    for path in (*BASE_RO, *extra_ro):
        args += ["--ro-bind-try", path, path]
    if share_net:
        args += ["--share-net"]
    args += ["--bind", "/tmp/app" if staged else app_dir, "/app", "--tmpfs", "/tmp", "--proc", "/proc",
             "--dev", "/dev", "--remount-ro", "/", "--chdir", workdir, "--", *inner]
    prlimit = ["prlimit", f"--nofile={limits.nofile}:{limits.nofile}", f"--nproc={limits.nproc}:{limits.nproc}",
               f"--as={limits.address_space_mb * 1024 * 1024}:{limits.address_space_mb * 1024 * 1024}", "--"]
    if not staged:
        return Launch([*prlimit, *args], cwd="/")
    setpriv = ["setpriv", f"--reuid={host_uid}", f"--regid={host_uid}", "--clear-groups", "--inh-caps=-all",
               "--bounding-set=-all"]
    unshare = ["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", _STAGE, "sh"]
    return Launch([*unshare, *prlimit, *setpriv, *args], cwd=app_dir, staged=True)
