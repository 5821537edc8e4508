"""A throwaway venv for the example plugin packages (examples/plugins/*): it sees agentenv-local (editable) and its
dependencies through a .pth file, so a test can `pip install` a plugin folder into it for real, as its page says,
and run `agentenv` there, without ever changing the project's own venv.

Installs are offline: pip gets `--no-index` and no build isolation (the build backend, hatchling, comes from the
project's venv), both through pip's environment variables, so a page's plain `pip install examples/plugins/X`
works the same in a test.

    venv = PluginVenv.create(tmp_path / "venv")
    venv.install(ROOT / "examples" / "plugins" / "sqlite-app")
    venv.agentenv("plugin", "show", "agentenv-sqlite-app", cwd=project)
    venv.shell("pip install examples/plugins/sqlite-app", cwd=ROOT)   # a page's console line
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PLUGINS = ROOT / "examples" / "plugins"
_MAIN = "from agentenv_local.cli.main import main; main()"


@dataclass
class PluginVenv:
    root: Path
    python: Path
    site: Path

    @classmethod
    def create(cls, root: Path) -> PluginVenv:
        subprocess.run([sys.executable, "-m", "venv", str(root)], check=True, timeout=300)
        python = root / "bin" / "python"
        site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   capture_output=True, text=True, check=True, timeout=60).stdout.strip())
        # after the venv's own packages: agentenv-local's source tree and the project venv's packages
        (site / "zz_agentenv_local.pth").write_text(f"{ROOT}\n{sysconfig.get_paths()['purelib']}\n")
        agentenv = root / "bin" / "agentenv"
        agentenv.write_text(f'#!/bin/sh\nexec "{python}" -c "{_MAIN}" "$@"\n')
        agentenv.chmod(0o755)
        return cls(root, python, site)

    def environ(self, home: Path | None = None) -> dict[str, str]:
        """The environment a command runs with: this venv's bin first on PATH, pip offline, no AGENTENV_* of the
        caller's (a test's hub or store must not leak in) but the sandbox default."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("AGENTENV_", "PIP_", "VIRTUAL_ENV")) or k == "AGENTENV_SANDBOX_DEFAULT"}
        env.update(PATH=f"{self.root / 'bin'}{os.pathsep}{env.get('PATH', '')}", VIRTUAL_ENV=str(self.root),
                   PIP_NO_INDEX="1", PIP_NO_BUILD_ISOLATION="0", PIP_DISABLE_PIP_VERSION_CHECK="1",
                   PIP_NO_DEPS="1")
        if home is not None:
            env["HOME"] = str(home)
        return env

    def shell(self, command: str, cwd: Path, *, code: int | None = 0, home: Path | None = None,
              timeout: float = 600) -> subprocess.CompletedProcess[str]:
        """Run one console line of a page (`pip ...`, `agentenv ...`, `python -m ...`) in this venv."""
        proc = subprocess.run(["/bin/sh", "-c", command], cwd=cwd, env=self.environ(home), capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL, check=False)
        shown = f"$ {command}\n(exit {proc.returncode})\n{proc.stdout}{proc.stderr}"
        assert "Traceback" not in proc.stdout + proc.stderr, shown
        if code is not None:
            assert proc.returncode == code, shown
        return proc

    def agentenv(self, *args: str, cwd: Path, code: int | None = 0, home: Path | None = None,
                 timeout: float = 600) -> subprocess.CompletedProcess[str]:
        import shlex

        return self.shell(shlex.join(["agentenv", *args]), cwd, code=code, home=home, timeout=timeout)

    def install(self, folder: Path) -> None:
        """`pip install FOLDER` into this venv (a real, non-editable install from the folder)."""
        self.shell(f"python -m pip install -q {folder}", cwd=ROOT)

    def has(self, distribution: str) -> bool:
        name = distribution.replace("-", "_")
        return any(self.site.glob(f"{name}-*.dist-info"))


def console_blocks(text: str) -> list[tuple[int, str, list[str]]]:
    """(line number, the `<!-- ... -->` marker on the line before it or "", the `$ ` commands) of every
    ```console block of a docs page."""
    out, lines = [], text.splitlines()
    for i, line in enumerate(lines):
        if line.strip() == "```console":
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
            before = next((lines[k].strip() for k in range(i - 1, -1, -1) if lines[k].strip()), "")
            marker = before if before.startswith("<!--") else ""
            out.append((i + 1, marker, [ln[2:].strip() for ln in lines[i + 1:end] if ln.startswith("$ ")]))
    return out
