"""Find bundles: built-in examples and installed plugin bundles (entry-point group `bundles`).

An entry point's value is a callable returning a folder, or a package; every sub-folder of it
that is a bundle (has at least one kind directory) is offered under its folder name.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from agentenv_local.errors import NotFoundError
from agentenv_local.plugins import registry

KINDS = ("envs", "agents", "artifacts", "skills", "tasks", "evals")


@dataclass
class BundleInfo:
    name: str
    path: Path
    package: str
    description: str
    tasks: int

    def to_dict(self) -> dict:
        return {"name": self.name, "path": str(self.path), "package": self.package,
                "description": self.description, "tasks": self.tasks}


def is_bundle(folder: Path) -> bool:
    return folder.is_dir() and any((folder / k).is_dir() for k in KINDS)


def describe(folder: Path) -> str:
    readme = folder / "README.md"
    if readme.is_file():
        for line in readme.read_text(encoding="utf-8", errors="replace").splitlines():
            line = line.strip().lstrip("#").strip()
            if line:
                return line
    return ""


def known_bundles() -> list[BundleInfo]:
    out: list[BundleInfo] = []
    contributions = registry().load_all("bundles")
    for c in contributions.values():
        if c.status != "active":
            continue
        root = c.obj() if callable(c.obj) else Path(getattr(c.obj, "__file__", "") or "").parent
        root = Path(root)
        if not root.is_dir():
            continue
        for folder in sorted(root.iterdir()):
            if is_bundle(folder):
                tasks = len(list((folder / "tasks").glob("*.json"))) if (folder / "tasks").is_dir() else 0
                out.append(BundleInfo(folder.name, folder, f"{c.distribution} {c.version}", describe(folder), tasks))
    return out


def find_bundle(name_or_path: str) -> tuple[Path, str | None]:
    """A folder path wins; else a known bundle's name. Returns (folder, installed package or None)."""
    path = Path(name_or_path).expanduser()
    if path.is_dir() or "/" in name_or_path or name_or_path.startswith("."):
        if not path.exists():
            raise NotFoundError(f"{name_or_path}: no such folder",
                                hint="give a bundle folder, or run `agentenv run` to list known bundles")
        return path.resolve(), None
    matches = [b for b in known_bundles() if b.name == name_or_path]
    if not matches:
        names = ", ".join(b.name for b in known_bundles()) or "none"
        raise NotFoundError(f"no bundle or folder named {name_or_path!r}",
                            hint=f"known bundles: {names}; or give a path to a bundle folder")
    return matches[0].path, matches[0].package.split(" ")[0]
