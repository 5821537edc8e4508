"""Agent Skills: a folder with a root ``SKILL.md`` whose YAML frontmatter describes the skill.

    my-skill/
      SKILL.md        ---
                      name: my-skill
                      description: What it does and when to use it.
                      license: Apache-2.0                  (optional)
                      compatibility: needs git and network (optional, <= 500 characters)
                      metadata:                            (optional, a map of strings)
                        author: me
                      allowed-tools: Bash(git:*) Read      (optional: a space-separated string or a list)
                      ---
                      # the instructions (Markdown)
      scripts/ ...    any other files of the skill

``name``: 1-64 characters of lowercase letters, digits and hyphens, not starting or ending with a
hyphen, no ``--``. ``description``: required, at most 1024 characters. Other frontmatter keys are refused.

The frontmatter is parsed by a small strict parser (no YAML dependency): ``key: value`` lines with
plain, single- or double-quoted scalars, ``|``/``>`` block scalars, flow lists ``[a, b]``, block lists
(``- item``) and, under ``metadata``, one level of ``key: value``. Anything else is an error naming the
file and the line.

A stored skill is an artifact of type ``skill`` (``put_skill``): its files go to the file bundle
``<id>__files`` (``put_artifact``), and the skill document records the parsed frontmatter and the files.
``skill_payload`` is what skill-config/v1's inline variant delivers: ``{name, description, skill_md}``
(only SKILL.md; the other files of the folder are not sent inline).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentenv_local.artifacts import BUNDLE, files_digest, put_artifact, read_folder
from agentenv_local.errors import NotFoundError, ValidationError

SKILL_TYPE = "skill"
SKILL_FILE = "SKILL.md"
SPEC_VERSION = "0.1"
NAME_RE = re.compile(r"^(?!-)(?!.*--)[a-z0-9-]{1,64}(?<!-)$")
MAX_DESCRIPTION = 1024
MAX_COMPATIBILITY = 500
FIELDS = ("name", "description", "license", "compatibility", "metadata", "allowed-tools")
_KEY = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*)\s*:(?:\s+(.*)|\s*)$")


class SkillError(ValidationError):
    """A skill folder or SKILL.md that is not a valid Agent Skill; the message names the file (and line)."""


@dataclass
class Skill:
    name: str
    description: str
    skill_md: str  # the whole SKILL.md text
    body: str  # SKILL.md after the frontmatter
    license: str | None = None
    compatibility: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    allowed_tools: list[str] | None = None
    files: dict[str, bytes] = field(default_factory=dict)  # every file of the folder, SKILL.md included

    def frontmatter(self) -> dict[str, Any]:
        """The parsed frontmatter in the stored skill document's shape."""
        return {"skill_name": self.name, "description": self.description, "license": self.license,
                "compatibility": self.compatibility, "skill_metadata": dict(self.metadata),
                "allowed_tools": list(self.allowed_tools) if self.allowed_tools is not None else None}


# --- frontmatter ------------------------------------------------------------------------------------------


def _unquote(text: str, where: str) -> str:
    """A scalar: 'single' ('' escapes a quote), "double" (JSON escapes), or plain (a trailing # comment dropped)."""
    text = text.strip()
    if text.startswith("'"):
        if len(text) < 2 or not text.endswith("'"):
            raise SkillError(f"{where}: unterminated single-quoted string")
        inner = text[1:-1]
        if "'" in inner.replace("''", ""):
            raise SkillError(f"{where}: a single quote inside a single-quoted string must be doubled ('')")
        return inner.replace("''", "'")
    if text.startswith('"'):
        if len(text) < 2 or not text.endswith('"'):
            raise SkillError(f"{where}: unterminated double-quoted string")
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            raise SkillError(f"{where}: bad escape in the double-quoted string {text}") from None
        if not isinstance(value, str):
            raise SkillError(f"{where}: not a string: {text}")
        return value
    text = re.split(r"\s+#", text, maxsplit=1)[0].rstrip()
    if text[:1] in ("{", "&", "*", "!", "%", "@", "`", "|", ">"):
        raise SkillError(f"{where}: {text[:1]!r} at the start of a value is not supported here; quote the value")
    return text


def _flow_list(text: str, where: str) -> list[str]:
    inner = text.strip()
    if not inner.endswith("]"):
        raise SkillError(f"{where}: a [list] must end with ] on the same line")
    inner = inner[1:-1].strip()
    if not inner:
        return []
    items, buf, quote = [], "", ""
    for ch in inner:
        if quote:
            buf += ch
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
            buf += ch
        elif ch == ",":
            items.append(buf)
            buf = ""
        elif ch in "[]{}":
            raise SkillError(f"{where}: nested lists or maps are not supported")
        else:
            buf += ch
    if quote:
        raise SkillError(f"{where}: unterminated quoted string in the list")
    items.append(buf)
    out = []
    for item in items:
        if not item.strip():
            raise SkillError(f"{where}: an empty item in the list")
        out.append(_unquote(item, where))
    return out


def parse_frontmatter(text: str, source: str = SKILL_FILE) -> tuple[dict[str, Any], str]:
    """(frontmatter, body) of a SKILL.md text; a SkillError names ``source`` and the line on bad input."""
    lines = text.split("\n")
    if not lines or lines[0].rstrip("\r").strip() != "---":
        raise SkillError(f"{source}: line 1: must start with a '---' line opening the YAML frontmatter",
                         hint="begin SKILL.md with ---, then name: and description:, then ---")
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip("\r").rstrip() == "---"), None)
    if end is None:
        raise SkillError(f"{source}: the frontmatter opened on line 1 is never closed by a '---' line")
    data: dict[str, Any] = {}
    i = 1
    while i < end:
        raw = lines[i].rstrip("\r")
        where = f"{source}: line {i + 1}"
        if not raw.strip() or raw.lstrip().startswith("#"):
            i += 1
            continue
        if "\t" in raw[: len(raw) - len(raw.lstrip())]:
            raise SkillError(f"{where}: tabs are not allowed for indentation")
        if raw[0] == " ":
            raise SkillError(f"{where}: unexpected indentation (a top-level line is 'key: value')")
        match = _KEY.match(raw)
        if not match:
            raise SkillError(f"{where}: expected 'key: value', got {raw.strip()[:60]!r}")
        key, value = match.group(1), (match.group(2) or "").strip()
        if key in data:
            raise SkillError(f"{where}: {key!r} is given twice")
        i += 1
        block: list[tuple[int, str]] = []  # the indented lines that follow
        while i < end:
            nxt = lines[i].rstrip("\r")
            if nxt.strip() and not nxt.startswith((" ", "\t")):
                break
            block.append((i, nxt))
            i += 1
        while block and not block[-1][1].strip():
            block.pop()
        if value[:1] in ("|", ">"):
            if not re.fullmatch(r"[|>][+-]?", value):
                raise SkillError(f"{where}: block scalar indicator {value!r} is not supported (use | or >, "
                                 "optionally with - or +)")
            data[key] = _block_scalar(value, block, where)
            continue
        content = [(n, b) for n, b in block if b.strip() and not b.strip().startswith("#")]
        if value:
            if content:
                n = content[0][0]
                raise SkillError(f"{source}: line {n + 1}: a continuation line is not supported; "
                                 f"put the value of {key!r} on one line or use | / >")
            data[key] = _flow_list(value, where) if value.startswith("[") else _unquote(value, where)
            continue
        if not content:
            data[key] = None
            continue
        if all(b.strip().startswith("- ") or b.strip() == "-" for _, b in content):
            items = []
            for n, b in content:
                item = b.strip()[1:].strip()
                if not item or item.startswith(("[", "- ")):
                    raise SkillError(f"{source}: line {n + 1}: a list item must be a plain or quoted value")
                items.append(_unquote(item, f"{source}: line {n + 1}"))
            data[key] = items
            continue
        mapping: dict[str, str] = {}
        indent = len(content[0][1]) - len(content[0][1].lstrip())
        for n, b in content:
            at = f"{source}: line {n + 1}"
            if len(b) - len(b.lstrip()) != indent:
                raise SkillError(f"{at}: inconsistent indentation under {key!r} (one level of key: value)")
            sub = _KEY.match(b.strip())
            if not sub:
                raise SkillError(f"{at}: expected 'key: value' under {key!r}, got {b.strip()[:60]!r}")
            sub_key, sub_value = sub.group(1), (sub.group(2) or "").strip()
            if not sub_value or sub_value[:1] in ("[", "|", ">"):
                raise SkillError(f"{at}: {key}.{sub_key} must be a one-line string value")
            if sub_key in mapping:
                raise SkillError(f"{at}: {key}.{sub_key} is given twice")
            mapping[sub_key] = _unquote(sub_value, at)
        data[key] = mapping
    body = "\n".join(lines[end + 1:])
    return data, body


def _block_scalar(indicator: str, block: list[tuple[int, str]], where: str) -> str:
    content = [b for _, b in block]
    indents = [len(b) - len(b.lstrip(" ")) for b in content if b.strip()]
    if not indents:
        return ""
    indent = min(indents)
    rows = [b[indent:] if b.strip() else "" for b in content]
    if indicator[0] == "|":
        text = "\n".join(rows)
    else:  # folded: lines join with spaces, blank lines become newlines
        paragraphs, current = [], []
        for row in rows:
            if row:
                current.append(row.strip())
            else:
                paragraphs.append(" ".join(current))
                current = []
        paragraphs.append(" ".join(current))
        text = "\n".join(paragraphs)
    chomp = indicator[1:]
    if chomp == "-":
        return text.rstrip("\n")
    if chomp == "+":
        return text + "\n"
    return text.rstrip("\n") + "\n"


# --- validation -------------------------------------------------------------------------------------------


def skill_from_text(text: str, source: str = SKILL_FILE, files: dict[str, bytes] | None = None,
                    expected_name: str | None = None) -> Skill:
    """A Skill from SKILL.md text; every problem of the frontmatter is listed at once."""
    data, body = parse_frontmatter(text, source)
    problems = []
    unknown = [k for k in data if k not in FIELDS]
    if unknown:
        problems.append(f"{source}: unknown frontmatter key(s) {', '.join(unknown)}; valid: {', '.join(FIELDS)}")
    name = data.get("name")
    if not isinstance(name, str) or not name:
        problems.append(f"{source}: 'name' is required (lowercase letters, digits and hyphens)")
    elif not NAME_RE.match(name):
        problems.append(f"{source}: name {name!r} is not a valid skill name: 1-64 lowercase letters, digits and "
                        "hyphens, not starting or ending with '-', no '--'")
    elif expected_name is not None and name != expected_name:
        problems.append(f"{source}: frontmatter 'name' {name!r} must be {expected_name!r} (the skill's folder name)")
    description = data.get("description")
    if not isinstance(description, str) or not description.strip():
        problems.append(f"{source}: 'description' is required (what the skill does and when to use it)")
    elif len(description) > MAX_DESCRIPTION:
        problems.append(f"{source}: 'description' is {len(description)} characters; at most {MAX_DESCRIPTION}")
    for key in ("license", "compatibility"):
        if data.get(key) is not None and not isinstance(data[key], str):
            problems.append(f"{source}: {key!r} must be a string")
    if isinstance(data.get("compatibility"), str) and len(data["compatibility"]) > MAX_COMPATIBILITY:
        problems.append(f"{source}: 'compatibility' is longer than {MAX_COMPATIBILITY} characters")
    metadata = data.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        problems.append(f"{source}: 'metadata' must be a map of key: value strings")
    tools = data.get("allowed-tools")
    if isinstance(tools, str):
        tools = tools.split()
    elif tools is not None and not isinstance(tools, list):
        problems.append(f"{source}: 'allowed-tools' must be a space-separated string or a list")
    if problems:
        raise SkillError(problems[0] if len(problems) == 1 else f"{source}: {len(problems)} problem(s)",
                         problems=problems if len(problems) > 1 else None)
    assert isinstance(name, str) and isinstance(description, str)  # checked above
    return Skill(name=name, description=description.strip(), skill_md=text, body=body,
                 license=data.get("license") or None, compatibility=data.get("compatibility") or None,
                 metadata=dict(metadata or {}), allowed_tools=tools, files=dict(files or {}))


def skill_from_files(files: dict[str, bytes], where: str, expected_name: str | None = None) -> Skill:
    """A Skill from a folder's files (relative paths); ``where`` names the folder in errors."""
    if SKILL_FILE not in files:
        nested = [rel for rel in files if rel.endswith("/" + SKILL_FILE)]
        raise SkillError(f"{where}: no {SKILL_FILE} at the skill folder's root"
                         + (f" (found {nested[0]}: a skill's SKILL.md must be at its root)" if nested else ""))
    try:
        text = files[SKILL_FILE].decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SkillError(f"{where}/{SKILL_FILE}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    return skill_from_text(text, f"{where}/{SKILL_FILE}", files, expected_name)


def load_skill_folder(path: str | Path, expected_name: str | None = None) -> Skill:
    """Read and validate a skill folder (SKILL.md at its root; every other file comes along)."""
    folder = Path(path)
    if not folder.is_dir():
        raise SkillError(f"{folder}: not a folder (a skill is a folder with SKILL.md at its root)")
    return skill_from_files(read_folder(folder), str(folder), expected_name)


def skill_digest(files: dict[str, bytes]) -> str:
    return files_digest(files, {"type": SKILL_TYPE})


# --- storing and delivering -------------------------------------------------------------------------------


def put_skill(store, skill_id: str, folder_files: dict[str, bytes], *, digest: str | None = None,
              extra: dict[str, Any] | None = None, if_changed: bool = False) -> dict:
    """Store a skill: its files as the file bundle ``<skill_id>__files``, then the ``skill`` artifact document
    (the next version of ``skill_id``; with ``if_changed``, none when the content is the same as the latest)."""
    last = skill_id.rstrip("/").rsplit("/", 1)[-1]
    skill = skill_from_files(folder_files, f"skill {skill_id!r}")
    if skill.name != last:
        raise SkillError(f"SKILL.md frontmatter 'name' {skill.name!r} must be {last!r} (the last segment of the "
                         f"id {skill_id!r})")
    digest = digest or skill_digest(folder_files)
    if if_changed:
        latest = store.documents.find("artifacts", skill_id)
        if latest is not None and latest.get("digest") == digest:
            return {**latest, "unchanged": True}
    files_id = f"{skill_id}__files"
    files_doc = put_artifact(store, files_id, folder_files, artifact_type=BUNDLE,
                             description=f"files of skill {skill_id}", if_changed=True)
    files_body = files_doc["body"]
    body = {"type": SKILL_TYPE, "agent_skills_spec_version": SPEC_VERSION, **skill.frontmatter(),
            "skill_files_id": files_id, "skill_files_version": files_doc["version"],
            "skill_object_url": files_body["bundle_object_url"], "files": files_body["files"], **(extra or {})}
    return store.documents.put("artifacts", skill_id, body, digest=digest, if_changed=if_changed)


def skill_payload(store, doc: dict) -> dict[str, str]:
    """The inline skill-config/v1 ``add`` body of a stored skill: ``{name, description, skill_md}``."""
    body = doc["body"]
    if body.get("type") != SKILL_TYPE:
        raise ValidationError(f"artifact {doc['id']} v{doc['version']} is a {body.get('type')!r} artifact, "
                              "not a skill", hint="name an artifact put from a skill folder (skills/<name>/)")
    entry = (body.get("files") or {}).get(SKILL_FILE)
    if not isinstance(entry, dict):
        raise NotFoundError(f"skill {doc['id']} v{doc['version']} has no {SKILL_FILE} recorded")
    skill_md = store.objects.get(entry["key"]).decode("utf-8-sig")
    return {"name": body["skill_name"], "description": body["description"], "skill_md": skill_md}
