"""How a state type is stored: one typed plan per field.

Records store an attrs state field by field (and persistent-vector fields
as logs, item by item), so decoding structures each field, and each logged
item, into its declared type, once: a thread's history is rebuilt in time
linear in what its records hold, and a commit is checked against the same
hooks before it is written.
"""

from __future__ import annotations

import types
import typing

from collections.abc import Callable, Mapping
from typing import Any, TypeVar, final, get_args, get_origin

import attrs
import cattrs

from pyrsistent import PVector

from .._fields import FORMER_FIELDS, READ_BACK
from .._message_structure import same_for
from .._serde import holds_keyed


Structure = Callable[[Any], Any]
Same = Callable[[Any, Any], bool]


@final
@attrs.frozen
class FieldPlan:
    """One stored field: its name, how to build it, what it is declared as.

    *item* is set for persistent-vector fields (logs): the hook for one
    item.  *same* and *same_item*, when set, tell whether a stored field
    or item reads back equal to a live one without building it (plain
    messages and usage: see :func:`pipeline._message_structure.same_for`);
    a commit's check asks them first.  *unstructure*, when set, writes the
    field by its declared type, where the hook of the value's own class
    would not do (a dict whose keys are not strings, ``dict[Color, int]``,
    also in a union or a container, ``list[dict[Color, int]] | None``:
    the plain dict's hook would keep its keys as they are);
    *unstructure_item* writes a log's item so.
    """

    name: str
    alias: str
    structure: Structure
    item: Structure | None
    expected: str
    same: Same | None = None
    same_item: Same | None = None
    unstructure: Callable[[Any], Any] | None = None
    unstructure_item: Callable[[Any], Any] | None = None


@final
@attrs.frozen
class Plan:
    """An attrs state type's fields, and how to construct it from them."""

    cls: type[Any]
    fields: tuple[FieldPlan, ...]
    by_name: dict[str, FieldPlan]
    formerly: Mapping[str, Callable[[Any], dict[str, Any]]] = attrs.field(
        factory=dict
    )
    """Fields an older version stored: what each stands for today."""

    def build(self, values: dict[str, Any]) -> Any:
        """The state from every field's typed value (attrs runs its
        converters and validators)."""
        return self.cls(**{f.alias: values[f.name] for f in self.fields})


def type_name(t: object) -> str:
    """A readable name for a type (in errors)."""
    name = getattr(t, "__qualname__", None)
    if isinstance(t, type) and name:
        return str(name)
    return str(t).replace("typing.", "").replace("pyrsistent._pvector.", "")


def plan_for(state_type: Any, converter: cattrs.Converter) -> Plan | None:
    """The plan for an attrs *state_type* (generic ones included), or
    ``None`` for a state stored whole."""
    cls = get_origin(state_type) or state_type
    if not (isinstance(cls, type) and attrs.has(cls)):
        return None
    hints = typing.get_type_hints(cls)
    params = getattr(cls, "__parameters__", ())
    mapping = dict(zip(params, get_args(state_type), strict=False))
    fields: list[FieldPlan] = []
    for f in attrs.fields(cls):
        if not f.init:
            continue
        hint = _substitute(hints.get(f.name, Any), mapping)
        plan = _field(f.name, f.alias or f.name, hint, converter)
        read_back = f.metadata.get(READ_BACK)
        if read_back is not None:  # the type says how it is read back
            plan = attrs.evolve(plan, structure=read_back, same=None)
        fields.append(plan)
    formerly = getattr(cls, FORMER_FIELDS, None) or {}
    return Plan(cls, tuple(fields), {f.name: f for f in fields}, formerly)


def _vector_in(hint: Any) -> Any:
    """The persistent-vector type *hint* is (``PVector[T]``), or holds as
    the one vector of a union (``PVector[T] | None``): such a field is a
    log whenever it holds a vector; else ``None``."""
    if hint is PVector or get_origin(hint) is PVector:
        return hint
    if get_origin(hint) in (typing.Union, types.UnionType):
        vectors = [a for a in get_args(hint) if _vector_in(a) is not None]
        if len(vectors) == 1:
            return vectors[0]
    return None


def _field(
    name: str, alias: str, hint: Any, converter: cattrs.Converter
) -> FieldPlan:
    hook = converter.get_structure_hook(hint)
    # A field holding a persistent vector at run time is stored as a log
    # even where its declared type says less (``Any``): its items then come
    # back as they were stored.
    item: Structure | None = _as_is if hint is Any else None
    same_item = None
    write_item = None
    vector = _vector_in(hint)
    if vector is not None:
        args = get_args(vector)
        item_type = args[0] if args else Any
        item_hook = converter.get_structure_hook(item_type)
        if holds_keyed(item_type):
            write_item = converter.get_unstructure_hook(item_type)

        def one(value: Any, t: Any = item_type) -> Any:
            return item_hook(value, t)

        item = one
        same_item = same_for(item_hook, item_type)

    def structure(value: Any, t: Any = hint) -> Any:
        return hook(value, t)

    return FieldPlan(
        name,
        alias,
        structure,
        item,
        type_name(hint),
        same_for(hook, hint),
        same_item,
        converter.get_unstructure_hook(hint) if holds_keyed(hint) else None,
        write_item,
    )


def _as_is(value: Any) -> Any:
    return value


def _substitute(hint: Any, mapping: dict[Any, Any]) -> Any:
    """*hint* with the type variables of a generic state bound."""
    if isinstance(hint, TypeVar):
        return mapping.get(hint, Any)
    args = get_args(hint)
    if not args or not mapping:
        return hint
    new = tuple(_substitute(a, mapping) for a in args)
    if new == args:
        return hint
    origin = get_origin(hint)
    if isinstance(hint, types.GenericAlias) and origin is not None:
        return types.GenericAlias(origin, new)
    copy_with = getattr(hint, "copy_with", None)
    return copy_with(new) if copy_with is not None else hint
