"""The layering rules of docs/architecture.md, checked on the source (AST: every import, at module level,
inside functions and under TYPE_CHECKING alike):

- the core (`agentenv_local`) never imports the `stores`, `sandboxes` or `tui` packages: it reaches them
  through the plugin registry (entry points), as it would a third party's;
- the subpackages and modules of `agentenv_local` do not import each other in a circle;
- each part imports exactly the parts its row of the map's table lists under "May import" (besides the
  `errors`, `untrusted`, `inputs` and `json_lines` every part may import), so the table says what the code does.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORE = "agentenv_local"
BEHIND_THE_REGISTRY = ("stores", "sandboxes", "tui")
MAP = ROOT / "docs" / "architecture.md"
ANYONE_MAY_IMPORT = {"errors", "untrusted", "inputs", "json_lines"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(path: Path, name: str | None = None) -> Iterator[tuple[int, str]]:
    """(line, module) for every import in the file; `from a import b` yields both `a` and `a.b`.
    `name` is the file's module name (default: from its path under the repository)."""
    name = name or module_name(path)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            yield node.lineno, module
            for alias in node.names:
                yield node.lineno, f"{module}.{alias.name}"


def python_files(top: str) -> list[Path]:
    return sorted(p for p in (ROOT / top).rglob("*.py") if "__pycache__" not in p.parts)


def core_part(module: str) -> str | None:
    """The subpackage or top module of agentenv_local that `module` belongs to (None: outside, or the root)."""
    parts = module.split(".")
    if parts[0] != CORE or len(parts) < 2:
        return None
    candidate = ROOT / CORE / parts[1]
    return parts[1] if candidate.is_dir() or candidate.with_suffix(".py").is_file() else None


def layering_violations(files: list[Path]) -> list[str]:
    out = []
    for path in files:
        for line, module in imported_modules(path):
            if module.split(".")[0] in BEHIND_THE_REGISTRY:
                out.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    return sorted(set(out))


def package_graph(files: list[Path]) -> dict[str, dict[str, set[str]]]:
    """part -> imported part -> the modules that import it."""
    graph: dict[str, dict[str, set[str]]] = {}
    for path in files:
        source = core_part(module_name(path))
        if source is None:
            continue
        for _line, module in imported_modules(path):
            target = core_part(module)
            if target is not None and target != source:
                graph.setdefault(source, {}).setdefault(target, set()).add(module_name(path))
    return graph


def cycles(graph: dict[str, dict[str, set[str]]]) -> list[list[str]]:
    """The strongly connected components with more than one part (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(set(graph) | {w for targets in graph.values() for w in targets}):
        if v not in index:
            visit(v)
    return found


def describe(graph: dict[str, dict[str, set[str]]], component: list[str]) -> str:
    edges = [f"{a} -> {b} ({', '.join(sorted(graph[a][b]))})" for a in component for b in component
             if b in graph.get(a, {})]
    return " | ".join(edges)


def test_the_core_does_not_import_stores_sandboxes_or_tui():
    found = layering_violations(python_files(CORE))
    assert not found, ("the core imports packages it must reach through the plugin registry "
                       "(registry().get(group, name); see docs/architecture.md):\n  " + "\n  ".join(found))


def test_the_core_packages_do_not_import_each_other_in_a_circle():
    graph = package_graph(python_files(CORE))
    found = cycles(graph)
    assert not found, "agentenv_local's packages import each other in a circle:\n  " + "\n  ".join(
        describe(graph, c) for c in found)


def allowed_imports(table: str) -> dict[str, set[str] | None]:
    """part -> the parts its "May import" cell names (None: everything), from the rows of a top-level
    subpackage (`agentenv_local/x/`) or module (`agentenv_local/x.py`) of the map's table."""
    allowed: dict[str, set[str] | None] = {}
    for row in re.findall(r"^\| `agentenv_local/([a-z_]+)(?:/|\.py)` \|.*\| ([^|]*) \|$", table, flags=re.MULTILINE):
        part, cell = row
        allowed[part] = None if cell.startswith("everything in the core") else set(re.findall(r"`([a-z_]+)`", cell))
    return allowed


def undeclared_imports(graph: dict[str, dict[str, set[str]]], allowed: dict[str, set[str] | None]) -> list[str]:
    problems = []
    for part in sorted(set(graph) | set(allowed)):
        may = allowed.get(part, set())
        if may is None:
            continue
        does = set(graph.get(part, {})) - ANYONE_MAY_IMPORT
        for extra in sorted(does - may):
            problems.append(f"{part} imports {extra} ({', '.join(sorted(graph[part][extra]))}): not in its row")
        for stale in sorted(may - does - ANYONE_MAY_IMPORT):
            problems.append(f"{part}'s row lists {stale}, which it no longer imports")
    return problems


def test_the_map_says_what_each_part_imports():
    found = undeclared_imports(package_graph(python_files(CORE)), allowed_imports(MAP.read_text(encoding="utf-8")))
    assert not found, ("docs/architecture.md's \"May import\" column differs from the code: change the code or, "
                       "on purpose, the row:\n  " + "\n  ".join(found))


def test_the_checks_see_function_level_and_relative_imports(tmp_path):
    # The checks themselves: a function-level import of sandboxes and a relative import are both seen,
    # and a three-package circle is found (a tail into it is not part of it).
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from sandboxes.podman import images\n    from ..tasks import model\n")
    lines = list(imported_modules(probe, name="agentenv_local.cli.probe"))
    assert (2, "sandboxes.podman") in lines and (3, "agentenv_local.tasks.model") in lines
    graph = {"a": {"b": {"x"}}, "b": {"c": {"y"}}, "c": {"a": {"z"}}, "d": {"a": {"w"}}}
    assert cycles(graph) == [["a", "b", "c"]]
    table = ("| `agentenv_local/a/` | x | `b` |\n| `agentenv_local/c.py` | y | - |\n"
             "| `agentenv_local/e/` | z | everything in the core |\n")
    assert undeclared_imports({"a": {"b": {"m"}, "c": {"n"}}, "e": {"a": {"o"}}}, allowed_imports(table)) == [
        "a imports c (n): not in its row"]
    assert undeclared_imports({}, allowed_imports(table)) == ["a's row lists b, which it no longer imports"]
