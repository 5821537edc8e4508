"""Binding wire arguments to a handler's parameters: a pydantic model built from the signature.

Shared by tools (MCP `arguments`) and extensions (a JSON body or a query string). The model gives the
advertised JSON Schema (with `Annotated[..., Field(description=...)]` descriptions, titles as mcp's own
server generates them) and validates/coerces what arrives. A parameter annotated `ToolContext` (or
`Optional[ToolContext]`, any name) is injected and never part of the schema.
"""

from __future__ import annotations

import inspect
import json
import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from .context import ToolContext


class ArgumentsError(ValueError):
    """The arguments do not fit the handler's parameters; the message names each bad field."""


def _unwrap(annotation: Any) -> list[Any]:
    origin = get_origin(annotation)
    if origin is Annotated:
        return _unwrap(get_args(annotation)[0])
    if origin is Union or origin is types.UnionType:
        return [t for arg in get_args(annotation) if arg is not type(None) for t in _unwrap(arg)]
    return [annotation]


def is_tool_context(annotation: Any) -> bool:
    if isinstance(annotation, str):  # an annotation that could not be resolved: read its spelling
        spelled = annotation.strip("'\" ")
        return re.fullmatch(r"(Optional\[)?([\w.]*\.)?ToolContext(\])?(\s*\|\s*None)?", spelled) is not None
    return any(t is ToolContext for t in _unwrap(annotation))


def _is_stringish(annotation: Any) -> bool:
    kinds = _unwrap(annotation)
    return any(k is str or k is Any or k is inspect.Parameter.empty for k in kinds)


def _callable_name(fn: Callable) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


@dataclass
class Binding:
    """How one handler takes its arguments."""

    fn_name: str
    model: type[BaseModel]
    fields: dict[str, str]                 # model field name -> handler parameter name
    context_param: str | None = None
    accepts_extra: bool = False
    json_fields: frozenset[str] = frozenset()   # fields whose string value may be JSON to pre-parse
    schema: dict = field(default_factory=dict)

    def bind(self, arguments: Any, context: ToolContext | None = None) -> dict[str, Any]:
        """Validate `arguments` (a mapping) and return the keyword arguments for the handler."""
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise ArgumentsError(f"arguments must be a JSON object, got {type(arguments).__name__}")
        data = dict(arguments)
        for key in self.json_fields:
            value = data.get(key)
            if isinstance(value, str) and value[:1] in ("[", "{"):
                try:
                    data[key] = json.loads(value)
                except ValueError:
                    pass
        try:
            instance = self.model.model_validate(data)
        except ValidationError as e:
            raise ArgumentsError(describe_validation_error(e)) from None
        kwargs = {param: getattr(instance, name) for name, param in self.fields.items()}
        if self.accepts_extra and instance.model_extra:
            kwargs.update(instance.model_extra)
        if self.context_param is not None:
            kwargs[self.context_param] = context if context is not None else ToolContext.current()
        return kwargs


def describe_validation_error(e: ValidationError) -> str:
    problems = []
    for err in e.errors(include_url=False):
        loc = ".".join(str(p) for p in err.get("loc", ())) or "arguments"
        problems.append(f"{loc}: {err.get('msg', 'invalid')}")
    return "; ".join(problems) or str(e)


def resolved_hints(fn: Callable) -> dict[str, Any]:
    """`fn`'s annotations, resolved (raises NameError while a forward reference cannot be resolved yet)."""
    return typing.get_type_hints(fn, include_extras=True)


def build_binding(fn: Callable, *, model_name: str, skip_first: bool = True,
                  hints: dict[str, Any] | None = None) -> Binding:
    """The binding for `fn` (a function defined in a class body: its first parameter is `self`)."""
    sig = inspect.signature(fn)
    if hints is None:
        hints = resolved_hints(fn)
    fields: dict[str, Any] = {}
    names: dict[str, str] = {}
    json_fields: set[str] = set()
    context_param: str | None = None
    accepts_extra = False
    params = list(sig.parameters.values())
    if skip_first:
        if not params or params[0].kind not in (inspect.Parameter.POSITIONAL_ONLY,
                                                inspect.Parameter.POSITIONAL_OR_KEYWORD):
            raise TypeError(f"{_callable_name(fn)} must be a method taking self first")
        params = params[1:]
    for p in params:
        if p.kind is inspect.Parameter.VAR_POSITIONAL:
            raise TypeError(f"{_callable_name(fn)}: *{p.name} cannot be filled from named arguments; remove it")
        if p.kind is inspect.Parameter.VAR_KEYWORD:
            accepts_extra = True
            continue
        annotation = hints.get(p.name, p.annotation)
        if is_tool_context(annotation):
            if context_param is not None:
                raise TypeError(f"{_callable_name(fn)} declares more than one ToolContext parameter: "
                                f"{context_param!r} and {p.name!r}")
            if p.kind is inspect.Parameter.POSITIONAL_ONLY:
                raise TypeError(f"{_callable_name(fn)}: ToolContext parameter {p.name!r} must not be positional-only")
            context_param = p.name
            continue
        if p.kind is inspect.Parameter.POSITIONAL_ONLY:
            raise TypeError(f"{_callable_name(fn)}: parameter {p.name!r} is positional-only; arguments arrive by name")
        if annotation is inspect.Parameter.empty:
            annotation = Any
        default = ... if p.default is inspect.Parameter.empty else p.default
        internal = p.name
        if p.name.startswith("_") or hasattr(BaseModel, p.name):
            internal = f"arg_{p.name.lstrip('_')}_"
            annotation = Annotated[annotation, Field(alias=p.name)]
        fields[internal] = (annotation, default)
        names[internal] = p.name
        if not _is_stringish(annotation):
            json_fields.add(p.name)
    config = ConfigDict(arbitrary_types_allowed=True, extra="allow" if accepts_extra else "ignore",
                        populate_by_name=False)
    try:
        model = create_model(model_name, __config__=config, **fields)
    except Exception as e:
        raise TypeError(f"{_callable_name(fn)}: cannot build an argument model from its signature: {e}") from e
    try:
        schema = model.model_json_schema(by_alias=True)
    except Exception as e:
        raise TypeError(f"{_callable_name(fn)}: a parameter type has no JSON Schema ({e}); use JSON-friendly types "
                        "(str, int, float, bool, list, dict, Literal, enums, pydantic models)") from e
    return Binding(fn_name=getattr(fn, "__name__", model_name), model=model, fields=names,
                   context_param=context_param, accepts_extra=accepts_extra, json_fields=frozenset(json_fields),
                   schema=schema)
