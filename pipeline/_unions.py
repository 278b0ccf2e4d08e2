"""Unions told apart by the kind of JSON value: ``Plan | list[str]``.

cattrs structures a union of scalars, of ``None`` and one type, and of
attrs classes it can tell apart by their fields; it has no way for a
union holding an array or a mapping type (``A | list[int]``,
``list[int] | dict[str, int]``).  Such a union is still unambiguous when
each of its members takes a different kind of JSON value (null, true or
false, a number, a string, an array, an object): the value's kind names
the one member it can be.  Unions whose members share a kind
(``A | dict[str, int]``, two objects) stay without a hook, and a question
asking for one is refused when it is asked (:func:`pipeline.interrupt`).

>>> from pipeline._serde import make_converter
>>> make_converter().structure([1, 2], list[int] | dict[str, int])
[1, 2]
"""

from __future__ import annotations

import enum
import types
import typing

from collections.abc import Callable, Mapping
from typing import Any, get_args, get_origin

import attrs
import cattrs

from cattrs.cols import is_any_set, is_mapping, is_sequence


__all__ = ("is_kind_union", "kind_union_structure")

_ARRAY, _OBJECT = "array", "object"
_VALUE_KINDS: Mapping[type, str] = {
    type(None): "null",
    bool: "bool",
    int: "number",
    float: "number",
    str: "string",
    list: _ARRAY,
    dict: _OBJECT,
}


def _members(t: Any) -> tuple[Any, ...] | None:
    origin = get_origin(t)
    if origin is typing.Union or origin is types.UnionType:
        return get_args(t)
    return None


def _unwrapped(t: Any) -> Any:
    """*t* without ``Annotated`` and ``NewType`` around it."""
    while True:
        if get_origin(t) is typing.Annotated:
            t = get_args(t)[0]
        elif hasattr(t, "__supertype__"):  # a NewType
            t = t.__supertype__
        else:
            return t


def _kinds(t: Any) -> frozenset[str] | None:
    """The kinds of JSON value a *t* is read from (``None``: not known)."""
    t = _unwrapped(t)
    if get_origin(t) is typing.Literal:
        return _values(get_args(t))
    if isinstance(t, type) and issubclass(t, enum.Enum):
        return _values([m.value for m in t])
    members = _members(t)
    if members is not None:
        found = [_kinds(m) for m in members]
        if any(k is None for k in found):
            return None
        return frozenset().union(*(k for k in found if k is not None))
    if t in _VALUE_KINDS and t is not list and t is not dict:
        return frozenset({_VALUE_KINDS[t]})
    if (isinstance(t, type) and attrs.has(t)) or is_mapping(t):
        return frozenset({_OBJECT})
    if is_sequence(t) or is_any_set(t) or get_origin(t) is tuple:
        return frozenset({_ARRAY})
    return None


def _values(values: typing.Iterable[object]) -> frozenset[str] | None:
    found = {_VALUE_KINDS.get(type(v)) for v in values}
    return None if None in found else frozenset(k for k in found if k)


def _split(t: Any) -> list[tuple[frozenset[str], Any]] | None:
    """*t*'s members with their kinds, if no two share one."""
    members = _members(t)
    if members is None:
        return None
    split: list[tuple[frozenset[str], Any]] = []
    seen: set[str] = set()
    for member in members:
        kinds = _kinds(member)
        if kinds is None or kinds & seen:
            return None
        seen |= kinds
        split.append((kinds, member))
    return split


def is_kind_union(t: Any) -> bool:
    """A union cattrs cannot structure (it holds an array or a mapping
    type, not as the one type beside ``None``) whose members each take
    another kind of JSON value."""
    split = _split(t)
    if split is None:
        return False
    if len([m for _, m in split if m is not type(None)]) < 2:
        return False  # T | None: cattrs' own
    return any(
        _ARRAY in kinds or (_OBJECT in kinds and not attrs.has(member))
        for kinds, member in split
    )


class _NoMember(TypeError):
    """A value of a kind no member of the union takes (the message names
    only the kind, never the value)."""


def kind_union_structure(
    conv: cattrs.Converter, t: Any
) -> Callable[[Any, Any], Any]:
    """Structures a value as the one member of *t* taking its kind."""
    split = _split(t)
    assert split is not None  # noqa: S101  # is_kind_union said so
    for kinds, member in split:
        if (
            _OBJECT in kinds
            and attrs.has(member)
            and not _as_object(conv, member)
        ):
            # A hook of the user's may write it as anything (an array,
            # say): its kind is not known, so the union is not split.
            msg = f"{member!r} has a hook of its own: its JSON kind is unknown"
            raise cattrs.errors.StructureHandlerNotFoundError(msg, type_=t)
    by_kind = {kind: member for kinds, member in split for kind in kinds}

    def structure(value: Any, _: Any) -> Any:
        kind = _VALUE_KINDS.get(type(value))
        member = by_kind.get(kind) if kind is not None else None
        if member is None:
            # "expected ...": a message the codec shows as it is (it names
            # the kind, never the value).
            msg = (
                "expected a member of the union, got a value of kind "
                f"{kind or 'none of theirs'}"
            )
            raise _NoMember(msg)
        return conv.structure(value, member)

    return structure


def _as_object(conv: cattrs.Converter, cls: type) -> bool:
    """Whether *conv* reads and writes the attrs class *cls* as an object:
    its hooks are the ones cattrs generates for attrs classes, or ours."""
    return all(
        _generated_or_ours(hook)
        for hook in (
            conv.get_structure_hook(cls),
            conv.get_unstructure_hook(cls),
        )
    )


def _generated_or_ours(hook: object) -> bool:
    code = getattr(hook, "__code__", None)
    if code is not None and code.co_filename.startswith("<cattrs generated"):
        return True
    return str(getattr(hook, "__module__", "")).startswith("pipeline.")
