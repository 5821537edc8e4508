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
import re
import shlex
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
        if home is not None:  # a home of the test's: the XDG folders a caller set would point outside it
            env["HOME"] = str(home)
            for name in ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"):
                env.pop(name, None)
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


def block_outputs(text: str) -> dict[int, list[str]]:
    """The output lines each console block shows (every non-blank line but the `$ ` ones), by its line number."""
    lines, out = text.splitlines(), {}
    for number, _marker, _commands in console_blocks(text):
        end = next(j for j in range(number, len(lines)) if lines[j].strip() == "```")
        out[number] = [ln for ln in lines[number:end] if ln.strip() and not ln.startswith("$ ")]
    return out


def _comparable(text: str) -> str:
    """Output as a page shows it: whitespace squeezed, durations and run ids (which differ per run) generalised."""
    text = re.sub(r"\b\d+\.\d+s\b", "N.Ns", text)
    text = re.sub(r"\b[\w.-]+-\d{8}-[0-9a-f]{8}\b", "RUN", text)
    return " ".join(text.split())


def run_plugin_page(venv: PluginVenv, text: str, project: Path, *, home: Path | None = None) -> None:
    """Follow a plugin page (docs/plugins/*.md) as a reader would: every ```console block in page order, a `pip ...`
    line at the checkout root (the pages say "from the root of an agentenv-local checkout"), any other line in
    `project` with `$CHECKOUT` set to the checkout root. A block exits 0 unless it is marked `<!-- exit: N -->` (any
    other marker fails: every block runs), and each output line it shows must be in what its commands printed."""
    outputs = block_outputs(text)
    for number, marker, commands in console_blocks(text):
        code = 0
        if marker:
            exit_marker = re.fullmatch(r"<!-- exit: (\d+) -->", marker)
            assert exit_marker, f"line {number}: unknown marker {marker!r}; every block of a plugin page runs"
            code = int(exit_marker.group(1))
        printed = ""
        for command in commands:
            if command.startswith("pip "):
                out = venv.shell(command, cwd=ROOT, code=code, home=home)
            else:
                out = venv.shell(f"CHECKOUT={shlex.quote(str(ROOT))}; {command}", cwd=project, code=code, home=home)
            printed += out.stdout + out.stderr
        shown = _comparable(printed)
        for line in outputs[number]:
            assert _comparable(line) in shown, f"line {number}: {line!r} is not in what it printed:\n{printed}"
