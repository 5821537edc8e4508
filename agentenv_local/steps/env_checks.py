"""The env release gate's checks, pure (no I/O): an Environment Card, tool input schemas, the gate roll-up,
and the comparison of two data-plane exports. The steps in `env_gates.py` and `universe_checks.py` fetch
what these look at and record the rows they return.

A row is a verification row like every verifier's: `{"criterion", "result", "score", "justification"}`,
plus `"tool"` where one tool is at fault.
"""

from __future__ import annotations

import json
from typing import Any

# The gates the reference requires before an env may be published (`validation_gate_aggregator`'s default).
DEFAULT_REQUIRED_GATES = ("mcp_tool_schema", "mcp_tool_correctness")
# The reference's keys under metadata.verifications, one per gate step.
GATE_CARD = "environment_card"
GATE_CORE = "env_core_protocol"
GATE_SCHEMA = "mcp_tool_schema"
GATE_SPEC = "spec_conformance"
GATE_CORRECTNESS = "mcp_tool_correctness"
GATE_UNIVERSE = "universe_compatibility"

JSON_TYPES = frozenset({"string", "number", "integer", "boolean", "object", "array", "null"})


def row(criterion: str, ok: bool, justification: str, **extra: Any) -> dict:
    return {"criterion": criterion, "result": bool(ok), "score": 1 if ok else 0, "justification": justification,
            "skipped": False, **extra}


# --- the Environment Card -------------------------------------------------------------------------------

def card_rows(card: Any) -> list[dict]:
    """Is the card well-formed: a name, capabilities, tools with names, extensions with URIs, named children."""
    if not isinstance(card, dict):
        return [row("card is a JSON object", False, f"the card is {type(card).__name__}, not an object")]
    rows = []
    name = card.get("name")
    rows.append(row("card has a name", isinstance(name, str) and bool(name.strip()),
                    f"name = {name!r}"))
    caps = card.get("capabilities")
    rows.append(row("card has capabilities", isinstance(caps, dict),
                    "capabilities is an object" if isinstance(caps, dict) else f"capabilities = {caps!r}"))
    caps = caps if isinstance(caps, dict) else {}
    children = card.get("children_environments")
    if children is not None and not isinstance(children, list):
        rows.append(row("children_environments is a list", False, f"children_environments = {children!r}"))
        children = []
    for i, child in enumerate(children or []):
        cname = child.get("name") if isinstance(child, dict) else None
        rows.append(row(f"child {i} has a name", isinstance(cname, str) and bool(cname),
                        f"children_environments[{i}].name = {cname!r}"))
    tools = caps.get("tools")
    if tools is not None:
        bad = [i for i, t in enumerate(tools if isinstance(tools, list) else [None])
               if not (isinstance(t, dict) and isinstance(t.get("name"), str) and t["name"])]
        rows.append(row("every tool on the card has a name", not bad,
                        f"{len(tools)} tool(s) named" if not bad else f"tools without a name at {bad}"))
    elif not children:
        rows.append(row("card lists tools or children", False, "a leaf env's card lists no capabilities.tools",
                        ))
    extensions = caps.get("extensions")
    if extensions is not None:
        bad = [i for i, e in enumerate(extensions if isinstance(extensions, list) else [None])
               if not (isinstance(e, dict) and isinstance(e.get("uri"), str) and ":" in e["uri"])]
        rows.append(row("every extension has a URI", not bad,
                        f"{len(extensions)} extension(s)" if not bad else f"extensions without a URI at {bad}"))
    return rows


# --- tool input schemas ---------------------------------------------------------------------------------

def _resolve(node: Any, root: dict) -> Any:
    """Follow one local `#/$defs/...` reference (siblings win), as schema generators write them."""
    if isinstance(node, dict) and isinstance(node.get("$ref"), str) and node["$ref"].startswith("#/$defs/"):
        target = (root.get("$defs") or {}).get(node["$ref"][len("#/$defs/"):])
        if isinstance(target, dict):
            return {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def _property_problems(name: str, prop: Any, root: dict) -> list[str]:
    prop = _resolve(prop, root)
    if not isinstance(prop, dict):
        return [f"property {name!r} has no schema object"]
    problems = []
    kind = prop.get("type")
    if isinstance(kind, list):
        problems.append(f"property {name!r} has a type array {kind} (not portable: spell it with anyOf)")
    elif kind is not None and kind not in JSON_TYPES:
        problems.append(f"property {name!r} has an unknown type {kind!r}")
    variants = [_resolve(v, root) for v in prop.get("anyOf") or prop.get("oneOf") or []]
    typed = kind is not None or any(isinstance(v, dict) and ("type" in v or "enum" in v or "const" in v)
                                    for v in variants) or "enum" in prop or "const" in prop
    if not typed:
        problems.append(f"property {name!r} has no type")
    for v in variants:
        if isinstance(v, dict) and isinstance(v.get("type"), list):
            problems.append(f"property {name!r} has a variant with a type array {v['type']}")
    if kind == "array" and "items" not in prop:
        problems.append(f"property {name!r} is an array without items")
    if "enum" in prop and not (isinstance(prop["enum"], list) and prop["enum"]):
        problems.append(f"property {name!r} has an empty enum")
    return problems


def schema_problems(schema: Any) -> list[str]:
    """Why a tool's inputSchema is not a valid, portable JSON Schema for tool arguments ([] when it is)."""
    if not isinstance(schema, dict):
        return [f"inputSchema is {type(schema).__name__}, not an object"]
    problems = []
    if schema.get("type") != "object":
        problems.append(f"the root type is {schema.get('type')!r}, not \"object\"")
    props = schema.get("properties", {})
    if not isinstance(props, dict):
        return problems + [f"properties is {type(props).__name__}, not an object"]
    for name, prop in props.items():
        problems.extend(_property_problems(name, prop, schema))
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        problems.append(f"required is {required!r}, not a list of names")
    else:
        missing = [r for r in required if r not in props]
        if missing:
            problems.append(f"required names {missing} that are not in properties")
    return problems


def tool_schema_rows(tools: list[dict]) -> list[dict]:
    """One row per tool (`name`, `description`, `inputSchema` as tools/list gives them)."""
    rows = []
    for tool in tools:
        name = str(tool.get("name") or "?")
        problems = schema_problems(tool.get("inputSchema"))
        if not str(tool.get("description") or "").strip():
            problems.append("the tool has no description")
        rows.append(row(f"tool {name!r} has a valid, portable input schema", not problems,
                        "; ".join(problems) or "ok", tool=name))
    return rows


# --- the gate roll-up -----------------------------------------------------------------------------------

def gate_verdict(entry: Any) -> str:
    """'passed', 'failed', 'skipped' or 'missing' for one entry of metadata.verifications."""
    if not isinstance(entry, dict):
        return "missing"
    if entry.get("skipped"):
        return "skipped"
    if "passed" in entry:
        return "passed" if entry["passed"] else "failed"
    results = entry.get("results") or []
    return "passed" if results and all(r.get("result") or r.get("skipped") for r in results) else "failed"


def gate_summary(verifications: dict, required_gates: list[str] | tuple[str, ...]) -> dict:
    """The reference's `validation_gate`: a required gate without a verdict fails it; a skipped one does not."""
    verdicts = {g: gate_verdict((verifications or {}).get(g)) for g in required_gates}
    failed = [g for g, v in verdicts.items() if v == "failed"]
    missing = [g for g, v in verdicts.items() if v == "missing"]
    return {"passed": not failed and not missing, "required_gates": list(required_gates), "failed_gates": failed,
            "missing_gates": missing, "skipped_gates": [g for g, v in verdicts.items() if v == "skipped"]}


# --- comparing exports ----------------------------------------------------------------------------------

def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def export_differences(before: Any, after: Any, path: str = "$", limit: int = 20) -> list[str]:
    """Where two exports differ (JSON paths), at most `limit`; [] when equal (dict key order ignored)."""
    out: list[str] = []

    def walk(a: Any, b: Any, where: str) -> None:
        if len(out) >= limit:
            return
        if isinstance(a, dict) and isinstance(b, dict):
            for key in sorted(set(a) | set(b), key=str):
                if key not in b:
                    out.append(f"{where}.{key}: lost")
                elif key not in a:
                    out.append(f"{where}.{key}: appeared")
                else:
                    walk(a[key], b[key], f"{where}.{key}")
        elif isinstance(a, list) and isinstance(b, list):
            if len(a) != len(b):
                out.append(f"{where}: {len(a)} item(s) became {len(b)}")
            for i, (x, y) in enumerate(zip(a, b)):
                walk(x, y, f"{where}[{i}]")
        elif canonical(a) != canonical(b):
            out.append(f"{where}: {canonical(a)[:80]} became {canonical(b)[:80]}")

    walk(before, after, path)
    return out
