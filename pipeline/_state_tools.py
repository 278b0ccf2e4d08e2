"""``read_state`` and ``write_state``: tools over a typed state.

Graph agent nodes and swarm agents get them.  Safe by default: the model
reads the state's fields (an attrs state: every field but append-only
logs; a :class:`~pipeline.Context`: its metadata, by key) and writes only
the fields listed as writable, each decoded into its declared type.  A
context's ``run_id`` and messages are never offered.

``write_state`` takes the fields to change as its arguments, each with its
own JSON schema (``{"topic": "billing", "priority": 2}``): every value is
decoded first, and then all are written at once, or none.
"""

from __future__ import annotations

import typing

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, TypeVar

import attrs

from ._context import Context
from ._schema import schema_for
from ._serde import canonical, make_converter
from .errors import ConstructionError, ToolError
from .tools import Param, Tool


T = TypeVar("T")

_CONVERTER = make_converter()

__all__ = ("Ref", "Writable", "state_tools")

Writable = Sequence[str] | Mapping[str, Any]
"""What ``write_state`` may change: field names (an attrs state, whose
class gives their types; or context metadata keys, holding any JSON
value), or context metadata keys with their types."""

READ = "read_state"
WRITE = "write_state"
NAMES = frozenset({READ, WRITE})
"""The state tools' names (an agent's own tool of that name wins)."""


class Ref(Protocol[T]):
    """Where the state lives while an agent works on it."""

    value: T


def state_tools(
    ref: Ref[Any],
    state_type: type[Any],
    fields: Sequence[str] | None = None,
    *,
    writable: Writable = (),
) -> tuple[Tool, ...]:
    """``read_state`` (and ``write_state`` if anything is *writable*) over
    ``ref.value``, an attrs state or a :class:`~pipeline.Context`.

    *fields* are what ``read_state`` may read (default: every field that is
    not an append-only vector; on a context, every metadata key).
    *writable* is the allow-list for ``write_state`` (default: nothing,
    and no ``write_state`` tool).  Each write is decoded into the field's
    type; a value that does not fit is an error result naming the field,
    never echoing the value, and nothing is written.

    Raises:
        ConstructionError: a listed field does not exist, is append-only,
            or is a context's ``run_id`` or messages; or types were given
            for an attrs state (its class has them).

    .. versionadded:: 0.1.0
    """
    if state_type is Context:
        return _context_tools(ref, fields, writable)
    return _attrs_tools(ref, state_type, fields, writable)


def _attrs_tools(
    ref: Ref[Any],
    state_type: type[Any],
    fields: Sequence[str] | None,
    writable: Writable,
) -> tuple[Tool, ...]:
    label = state_type.__name__
    if isinstance(writable, Mapping):
        msg = (
            f"writable fields of {label}: give names, its class has the types"
        )
        raise ConstructionError(msg)
    hints = typing.get_type_hints(state_type)
    declared = {f.name: f for f in attrs.fields(state_type)}
    open_ = tuple(n for n in declared if not _is_log(hints.get(n)))
    readable = open_ if fields is None else tuple(fields)
    _known(label, readable, open_)
    _known(label, tuple(writable), open_)

    async def read_state(field: str) -> str:
        if field not in readable:
            msg = f"no readable state field by that name; fields: {list(readable)}"
            raise ToolError(msg)
        value = getattr(ref.value, field)
        return canonical(_CONVERTER.unstructure(value)).decode()

    async def write_state(**values: Any) -> str:
        if not values:
            raise ToolError(_NOTHING)
        # Decoded already (the tool's arguments are typed); written at
        # once, with no await between reading and replacing the value:
        # concurrent calls in one turn cannot lose each other's writes.
        changes = {declared[k].alias or k: v for k, v in values.items()}
        ref.value = attrs.evolve(ref.value, **changes)
        return f"state updated: {', '.join(values)}"

    read = _reader(
        read_state, "field", readable, "Read a field of the shared state."
    )
    if not writable:
        return (read,)
    types = {name: hints[name] for name in writable}
    return read, _writer(write_state, types, "the shared state's fields")


def _context_tools(
    ref: Ref[Any], fields: Sequence[str] | None, writable: Writable
) -> tuple[Tool, ...]:
    keys = tuple(fields) if fields is not None else None
    types: dict[str, Any] = (
        dict(writable)
        if isinstance(writable, Mapping)
        else dict.fromkeys(writable, Any)
    )
    for key in (*(keys or ()), *types):
        if key in _CONTEXT_FIELDS:
            msg = f"{key!r} is part of the context, not a metadata key"
            raise ConstructionError(msg)

    async def read_state(key: str) -> str:
        ctx: Context = ref.value
        if (keys is not None and key not in keys) or key not in ctx.metadata:
            msg = "no metadata under that key" + (
                f"; keys: {list(keys)}" if keys is not None else ""
            )
            raise ToolError(msg)
        return canonical(_CONVERTER.unstructure(ctx.metadata[key])).decode()

    async def write_state(**values: Any) -> str:
        if not values:
            raise ToolError(_NOTHING)
        ctx: Context = ref.value
        for key, value in values.items():
            ctx = ctx.set(key, _CONVERTER.unstructure(value))
        ref.value = ctx  # no await since reading it: writes never interleave
        return f"metadata updated: {', '.join(values)}"

    read = _reader(
        read_state, "key", keys, "Read a value of the shared metadata by key."
    )
    if not types:
        return (read,)
    return read, _writer(write_state, types, "shared metadata keys")


_CONTEXT_FIELDS = frozenset(f.name for f in attrs.fields(Context))
_NOTHING = "name at least one field to write"


def _reader(
    fn: Any, param: str, names: Sequence[str] | None, description: str
) -> Tool:
    prop: dict[str, Any] = {"type": "string"}
    if names is not None:
        prop["enum"] = list(names)
    return Tool(
        READ,
        description,
        {
            "type": "object",
            "properties": {param: prop},
            "required": [param],
            "additionalProperties": False,
        },
        fn,
        (Param(param, str, True, None),),
    )


def _writer(fn: Any, types: Mapping[str, Any], what: str) -> Tool:
    props = {name: _schema(name, kind) for name, kind in types.items()}
    return Tool(
        WRITE,
        f"Change {what}: give each one to change, with its new value "
        "(all are written, or none if one does not fit).",
        {
            "type": "object",
            "properties": props,
            "minProperties": 1,
            "additionalProperties": False,
        },
        fn,
        tuple(Param(name, kind, False, None) for name, kind in types.items()),
    )


def _schema(name: str, kind: Any) -> dict[str, Any]:
    if kind is Any:
        return {"description": f"The new value of {name!r} (any JSON value)"}
    return {**schema_for(kind), "description": f"The new value of {name!r}"}


def _known(
    label: str, names: tuple[str, ...], allowed: tuple[str, ...]
) -> None:
    unknown = [n for n in names if n not in allowed]
    if unknown:
        msg = f"{label} has no field {unknown[0]!r} a tool may use; fields: {list(allowed)}"
        raise ConstructionError(msg)


def _is_log(t: Any) -> bool:
    return getattr(t, "__origin__", None) is not None and "PVector" in str(t)
