"""Ranked full-text search over the docs' sections: BM25 with field weights, written here (DuckDB's fts
extension would have to be downloaded, and the docs server must work offline).

Each section is one document. Its terms come from three fields, weighted by repetition (a simple BM25F):
the section's heading (x3), the headings above it and the page title (x2), and the body (x1). Terms are
lowercased words; identifiers such as `sync_env_clock` also yield their parts; a light suffix stemmer folds
`composing`/`composed`/`composes` together; common English words are dropped. A query whose words appear
next to each other in a heading or page title gets a bonus, so "virtual clock" prefers the page called that.

The index is built once per process (`get_index()`), in a few tens of milliseconds; a query then costs well
under a millisecond.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .corpus import Page, Section, load_pages, plain

K1 = 1.2
B = 0.75
HEADING_WEIGHT = 3
CONTEXT_WEIGHT = 2
PHRASE_BONUS = 0.6  # multiplies the score by (1 + bonus) per field where the whole query is a phrase
INDEX_PAGE_WEIGHT = 0.5  # index.md and "See also" sections link pages: they should not outrank them

STOP = frozenset([
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "does", "for", "from", "how", "i", "if", "in",
    "into", "is", "it", "its", "me", "my", "of", "on", "or", "so", "that", "the", "their", "then", "there", "these",
    "this", "to", "use", "using", "was", "what", "when", "where", "which", "who", "why", "will", "with", "you",
    "your", "we", "our", "should", "would", "could", "get"
])

_WORD = re.compile(r"[a-z0-9][a-z0-9_\-]*[a-z0-9]|[a-z0-9]")


def stem(word: str) -> str:
    """A deliberately small suffix stripper: the same word forms land on the same stem."""
    if len(word) <= 3 or not word.isalpha():
        return word
    for suffix, repl in (("sses", "ss"), ("ies", "y"), ("ied", "y")):
        if word.endswith(suffix):
            return word[: -len(suffix)] + repl
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    for suffix in ("ing", "ed"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            if len(word) > 2 and word[-1] == word[-2] and word[-1] not in "lsz":
                word = word[:-1]  # running -> runn -> run
            break
    if word.endswith("e") and len(word) > 4:
        word = word[:-1]
    return word


def tokens(text: str, *, keep_stop: bool = False) -> list[str]:
    out: list[str] = []
    for raw in _WORD.findall(text.lower()):
        parts = re.split(r"[_\-]", raw)
        if len(parts) > 1:
            out.append(raw.replace("-", "_"))  # the identifier as a whole (`sync_env_clock`, `hot_reload`)
        for part in parts:
            if part and (keep_stop or part not in STOP):
                out.append(stem(part))
    return out


@dataclass
class Hit:
    page: str
    page_title: str
    section: str
    anchor: str
    score: float
    snippet: str

    def as_dict(self) -> dict:
        return {"page": self.page, "page_title": self.page_title, "section": self.section,
                "anchor": self.anchor, "score": round(self.score, 3), "snippet": self.snippet}


class DocsIndex:
    def __init__(self, pages: tuple[Page, ...]):
        self.pages = {p.page: p for p in pages}
        self.sections: list[Section] = [s for p in pages for s in p.sections]
        self._heading_text: list[str] = []
        self._context_text: list[str] = []
        self._lengths: list[int] = []
        postings: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for i, s in enumerate(self.sections):
            page = self.pages[s.page]
            heading = s.title or page.title
            context = " ".join([page.title, *s.parents])
            body = s.text.partition("\n")[2] if s.level else s.text
            if not body.strip():  # a heading with nothing under it but subsections: its children are indexed
                self._heading_text.append("")
                self._context_text.append("")
                self._lengths.append(0)
                continue
            tf: Counter[str] = Counter()
            for t in tokens(heading):
                tf[t] += HEADING_WEIGHT
            for t in tokens(context):
                tf[t] += CONTEXT_WEIGHT
            tf.update(tokens(body))
            self._heading_text.append(" ".join(tokens(plain(heading))))
            self._context_text.append(" ".join(tokens(plain(page.title))))
            self._lengths.append(sum(tf.values()))
            for term, n in tf.items():
                postings[term].append((i, n))
        self.postings = dict(postings)
        n = sum(1 for length in self._lengths if length) or 1
        self.avg_length = sum(self._lengths) / n
        self.idf = {t: math.log(1 + (n - len(p) + 0.5) / (len(p) + 0.5)) for t, p in self.postings.items()}

    def search(self, query: str, limit: int = 5) -> list[Hit]:
        terms = tokens(query)
        if not terms:
            return []
        scores: dict[int, float] = defaultdict(float)
        for term in set(terms):
            idf = self.idf.get(term)
            if idf is None:
                continue
            weight = terms.count(term)
            for i, tf in self.postings[term]:
                norm = K1 * (1 - B + B * self._lengths[i] / self.avg_length)
                scores[i] += weight * idf * tf * (K1 + 1) / (tf + norm)
        phrase = " ".join(terms)
        stemmed = [t for t in tokens(query) if "_" not in t]
        hits = []
        for i, score in scores.items():
            if phrase and f" {phrase} " in f" {self._heading_text[i]} ":
                score *= 1 + PHRASE_BONUS
            if len(stemmed) > 1 and phrase and f" {phrase} " in f" {self._context_text[i]} ":
                score *= 1 + PHRASE_BONUS
            section = self.sections[i]
            if section.page == "index.md" or section.title.lower() == "see also":
                score *= INDEX_PAGE_WEIGHT  # lists of links match everything; the pages they link win
            hits.append((score, i))
        hits.sort(key=lambda h: (-h[0], h[1]))
        out = []
        for score, i in hits[: max(limit, 0)]:
            s = self.sections[i]
            page = self.pages[s.page]
            out.append(Hit(s.page, page.title, s.title or page.title, s.anchor, score, snippet(s.text, terms)))
        return out


def snippet(text: str, terms: list[str], width: int = 220) -> str:
    """The stretch of the section's plain text (about `width` characters) with the most query terms."""
    flat = plain(text)
    if len(flat) <= width:
        return flat
    wanted = set(terms)
    words = flat.split(" ")
    marks = [bool(wanted.intersection(tokens(w))) for w in words]
    best, best_start, best_end = -1, 0, 0
    for start in [0] + [max(i - 4, 0) for i, m in enumerate(marks) if m]:
        end, size, hits = start, 0, 0
        while end < len(words) and size + len(words[end]) + 1 <= width:
            size += len(words[end]) + 1
            hits += marks[end]
            end += 1
        if hits > best:
            best, best_start, best_end = hits, start, max(end, start + 1)
    out = " ".join(words[best_start:best_end])
    return ("..." if best_start > 0 else "") + out + ("..." if best_end < len(words) else "")


@lru_cache(maxsize=4)
def _index(root: str | None) -> DocsIndex:
    return DocsIndex(load_pages(Path(root) if root else None))


def get_index(root: Path | None = None) -> DocsIndex:
    """The index of the docs (built on first use, then kept for the process)."""
    return _index(str(root) if root else None)
