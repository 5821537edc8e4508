"""The docs as data: find them (inside the installed package, or the checkout's docs/ folder), read every
page, split each page into sections at its headings.

Page ids are paths relative to the docs folder, with `.md`: `environments/virtual-clock.md`. Anchors are the
ones GitHub makes for a heading (lowercase, punctuation dropped, spaces to dashes, `-1`, `-2` for repeats), so
`page#anchor` links in the docs and in search results agree.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

ENV_DOCS_DIR = "AGENTENV_DOCS_DIR"
URI_SCHEME = "agentenv-docs"
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


@dataclass
class Section:
    page: str
    title: str  # the heading's text ("" for a page's text before its first heading)
    level: int  # 1-6; 0 for text before the first heading
    anchor: str
    text: str  # the heading line and the body up to the next heading of any level
    parents: tuple[str, ...] = ()  # the headings above this one, outermost first


@dataclass
class Page:
    page: str  # "environments/rbac.md"
    title: str
    summary: str
    text: str
    sections: list[Section] = field(default_factory=list)

    @property
    def uri(self) -> str:
        return f"{URI_SCHEME}://{self.page}"


def docs_dir() -> Path:
    """The docs folder: $AGENTENV_DOCS_DIR, else the copy shipped in the wheel (agentenv_local/_docs),
    else the checkout's docs/ (an editable install)."""
    override = os.environ.get(ENV_DOCS_DIR)
    if override:
        return Path(override)
    package = Path(__file__).resolve().parents[1]
    shipped = package / "_docs"
    if shipped.is_dir():
        return shipped
    return package.parent / "docs"


def slug(heading: str) -> str:
    """The anchor GitHub makes for a heading."""
    text = heading.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def plain(markdown: str) -> str:
    """Markdown to plain-ish text for snippets and summaries: links keep their text, markup goes."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", markdown)
    text = re.sub(r"<!--.*?-->", " ", text, flags=re.DOTALL)
    text = re.sub(r"[*_]{2}([^*_]+)[*_]{2}", r"\1", text)
    text = text.replace("`", "")
    text = re.sub(r"^\s{0,3}(#{1,6}|>|[-*+]|\d+\.)\s+", "", text, flags=re.MULTILINE)
    text = re.sub(r"^\s*\|?[-:| ]+\|?\s*$", " ", text, flags=re.MULTILINE)  # table rules
    return re.sub(r"\s+", " ", text.replace("|", " ")).strip()


def split_sections(page: str, text: str) -> list[Section]:
    sections: list[Section] = []
    seen: dict[str, int] = {}
    stack: list[tuple[int, str]] = []
    current: Section | None = Section(page, "", 0, "", "", ())
    lines: list[str] = []
    fenced = False

    def close() -> None:
        if current is not None:
            current.text = "\n".join(lines).strip()
            if current.level or current.text:
                sections.append(current)

    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        match = None if fenced else _HEADING.match(line)
        if match:
            close()
            level, title = len(match.group(1)), match.group(2).strip()
            base = slug(title)
            n = seen.get(base, 0)
            seen[base] = n + 1
            anchor = base if n == 0 else f"{base}-{n}"
            while stack and stack[-1][0] >= level:
                stack.pop()
            current = Section(page, title, level, anchor, "", tuple(t for _, t in stack))
            stack.append((level, title))
            lines = [line]
        else:
            lines.append(line)
    close()
    return sections


def _summary(text: str) -> str:
    """The first sentence of the first paragraph after the title, on one line."""
    text = re.sub(r"<!--.*?-->", "", text, flags=re.DOTALL)
    fenced = False
    para: list[str] = []
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            if para:
                break
            continue
        if fenced or _HEADING.match(line) or not line.strip():
            if para:
                break
            continue
        para.append(re.sub(r"^\s{0,3}(>|[-*+]|\d+\.)\s*", "", line.strip()))
    body = plain(" ".join(para))
    first = re.split(r"(?<=[.!?])\s+(?=[A-Z`])", body, maxsplit=1)[0]
    if first.endswith(":"):
        first = first[:-1] + "."
    return first if len(first) <= 200 else first[:197].rsplit(" ", 1)[0].rstrip(",;:") + "..."


def load_page(root: Path, path: Path) -> Page:
    rel = path.relative_to(root).as_posix()
    text = path.read_text(encoding="utf-8")
    sections = split_sections(rel, text)
    h1 = next((s.title for s in sections if s.level == 1), None)
    title = plain(h1) if h1 else Path(rel).stem.replace("-", " ").capitalize()
    return Page(rel, title, _summary(text), text, sections)


@lru_cache(maxsize=4)
def _load(root: str) -> tuple[Page, ...]:
    base = Path(root)
    paths = sorted(base.rglob("*.md"), key=lambda p: (p.relative_to(base).as_posix() != "index.md",
                                                        p.relative_to(base).as_posix()))
    return tuple(load_page(base, p) for p in paths)


def load_pages(root: Path | None = None) -> tuple[Page, ...]:
    """Every page under the docs folder, index.md first, then by path (read once per process)."""
    root = root or docs_dir()
    if not root.is_dir():
        raise FileNotFoundError(f"no docs folder at {root} (set ${ENV_DOCS_DIR} to a folder of .md pages)")
    return _load(str(root.resolve()))


def normalize_page(name: str) -> str:
    """Accept `environments/rbac`, `environments/rbac.md`, `docs/environments/rbac.md`,
    `agentenv-docs://environments/rbac.md`, and a trailing `#anchor` (dropped)."""
    name = name.strip()
    if name.startswith(f"{URI_SCHEME}://"):
        name = name[len(URI_SCHEME) + 3:]
    name = name.split("#", 1)[0].strip("/")
    name = name.removeprefix("docs/")
    if name and not name.endswith(".md"):
        name += ".md"
    return name
