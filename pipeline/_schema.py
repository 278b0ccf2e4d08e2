"""JSON schemas of Python types: what a model is told a value looks like.

>>> schema_for(list[int])
{'type': 'array', 'items': {'type': 'integer'}}
"""

from __future__ import annotations

import enum
import inspect
import types
import typing

from collections.abc import Mapping, Sequence
from typing import Any, Literal, get_args, get_origin

import attrs

from pyrsistent import PVector

from .errors import ConstructionError
from .secrets import is_secret_type


__all__ = ("schema_for",)


def schema_for(t: Any) -> dict[str, Any]:
    """JSON schema of a Python type: scalars, containers, Literal, Enum,
    unions, attrs classes.

    Raises:
        ConstructionError: *t* (or a type inside it) has no JSON schema;
            an attrs class that holds itself (a tree) is one.
    """
    return _schema(t, ())


def _schema(t: Any, within: tuple[type, ...]) -> dict[str, Any]:
    """:func:`schema_for`, inside the attrs classes *within*."""
    if t is Any or t is object:
        return {}
    if is_secret_type(t):  # the model sends the value itself
        inner = get_args(t)
        return _schema(inner[0] if inner else Any, within)
    if t is type(None) or t is None:
        return {"type": "null"}
    if t is bool:
        return {"type": "boolean"}
    if t is int:
        return {"type": "integer"}
    if t is float:
        return {"type": "number"}
    if t is str:
        return {"type": "string"}
    origin = get_origin(t)
    args = get_args(t)
    if origin is Literal:
        return {"enum": list(args)}
    if origin in (typing.Union, types.UnionType):
        return {"anyOf": [_schema(a, within) for a in args]}
    if origin in (
        list,
        tuple,
        set,
        frozenset,
        Sequence,
        typing.Sequence,
        PVector,
    ) or t in (list, tuple, PVector):
        if origin is tuple and args and args[-1] is not Ellipsis:
            return {
                "type": "array",
                "prefixItems": [_schema(a, within) for a in args],
                "minItems": len(args),
                "maxItems": len(args),
            }
        item = args[0] if args else Any
        return {"type": "array", "items": _schema(item, within)}
    if origin in (dict, Mapping, typing.Mapping) or t is dict:
        value = args[1] if len(args) == 2 else Any
        return {
            "type": "object",
            "additionalProperties": _schema(value, within),
        }
    if isinstance(t, type) and issubclass(t, enum.Enum):
        return {"enum": [m.value for m in t]}
    if isinstance(t, type) and attrs.has(t):
        if t in within:
            msg = (
                f"{t.__name__} holds itself (a recursive type, directly or "
                "through its fields): it has no JSON schema to give a model"
            )
            raise ConstructionError(msg)
        hints = typing.get_type_hints(t)
        props: dict[str, Any] = {}
        required: list[str] = []
        for f in attrs.fields(t):
            props[f.name] = _schema(hints.get(f.name, Any), (*within, t))
            if f.default is attrs.NOTHING:
                required.append(f.name)
        out: dict[str, Any] = {
            "type": "object",
            "properties": props,
            "required": required,
            "additionalProperties": False,
        }
        doc = inspect.getdoc(t)
        if doc and not doc.startswith(f"{t.__name__}("):
            out["description"] = doc.split("\n\n")[0]
        return out
    msg = f"no JSON schema for type {t!r}"
    raise ConstructionError(msg)
