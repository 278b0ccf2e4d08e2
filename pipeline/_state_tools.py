"""``read_state`` and ``write_state``: tools over a typed state.

Graph agent nodes and swarm agents get them when their state is an attrs
class: the model reads and writes fields by name, and writes are decoded
into the field's declared type.
"""

from __future__ import annotations

import typing

from collections.abc import Sequence
from typing import Any, Protocol, TypeVar

import attrs

from ._serde import STRUCTURE_ERRORS, canonical, make_converter
from .errors import ToolError
from .tools import Tool, _Param


T = TypeVar("T")

_CONVERTER = make_converter()

__all__ = ("Ref", "StateToolError", "state_tools")


class Ref(Protocol[T]):
    """Where the state lives while an agent works on it."""

    value: T


class StateToolError(ToolError):
    """A state tool was misused; the model sees the message."""


def state_tools(
    ref: Ref[Any], state_type: type[Any], fields: Sequence[str] | None = None
) -> tuple[Tool, Tool]:
    """``read_state`` and ``write_state`` over ``ref.value``, a typed attrs state.

    Only *fields* (default: every field that is not an append-only vector)
    are visible.  Writes are decoded into the field's declared type; a wrong
    type is an error result naming the field and the type, and the state is
    left as it was.
    """
    hints = typing.get_type_hints(state_type)
    names = tuple(
        f.name
        for f in attrs.fields(state_type)
        if (fields is None and not _is_log(hints.get(f.name)))
        or (fields is not None and f.name in fields)
    )

    def _check(field: str) -> None:
        if field not in names:
            msg = f"no state field {field!r}; fields: {list(names)}"
            raise StateToolError(msg)

    def read_state(field: str) -> str:
        _check(field)
        return canonical(
            _CONVERTER.unstructure(getattr(ref.value, field))
        ).decode()

    def write_state(field: str, value: Any) -> str:
        _check(field)
        kind = hints[field]
        try:
            typed = _CONVERTER.structure(value, kind)
        except STRUCTURE_ERRORS as exc:
            msg = f"state field {field!r} holds {_name(kind)}; the value does not fit ({type(exc).__name__})"
            raise StateToolError(msg) from None
        alias = next(
            f.alias or f.name
            for f in attrs.fields(state_type)
            if f.name == field
        )
        ref.value = attrs.evolve(ref.value, **{alias: typed})
        return f"state[{field!r}] updated"

    field_schema = {
        "type": "string",
        "enum": list(names),
        "description": "The state field",
    }
    read = Tool(
        "read_state",
        "Read a field of the shared graph state.",
        {
            "type": "object",
            "properties": {"field": field_schema},
            "required": ["field"],
            "additionalProperties": False,
        },
        read_state,
        (_Param("field", str, True, None),),
    )
    write = Tool(
        "write_state",
        "Write a field of the shared graph state (the value must fit the field's type).",
        {
            "type": "object",
            "properties": {
                "field": field_schema,
                "value": {"description": "The new value"},
            },
            "required": ["field", "value"],
            "additionalProperties": False,
        },
        write_state,
        (_Param("field", str, True, None), _Param("value", Any, True, None)),
    )
    return read, write


def _is_log(t: Any) -> bool:
    return getattr(t, "__origin__", None) is not None and "PVector" in str(t)


def _name(t: Any) -> str:
    return getattr(t, "__name__", None) or str(t).replace("typing.", "")
