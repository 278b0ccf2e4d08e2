"""Whether a JSON request body fits an SDK's request types (its TypedDicts):
required keys present, no key the type does not name, each value of its
declared type, all the way down.  Stricter than pydantic, which validates
``Iterable`` fields lazily and lets extra keys through."""

from __future__ import annotations

import collections.abc as cabc
import functools
import types
import typing

from typing import Any

import typing_extensions


def _is_typeddict(tp: Any) -> bool:
    return typing_extensions.is_typeddict(tp)


@functools.cache
def _hints(tp: Any) -> dict[str, Any]:
    return typing_extensions.get_type_hints(tp, include_extras=True)


@functools.cache
def _required(tp: Any) -> frozenset[str]:
    """The keys a TypedDict requires, read from its resolved hints (the
    SDKs' string annotations hide ``Required`` from ``__required_keys__``)."""
    total = getattr(tp, "__total__", True)
    out = set()
    for key, hint in _hints(tp).items():
        origin = typing_extensions.get_origin(hint)
        if origin is typing_extensions.Annotated:
            origin = typing_extensions.get_origin(
                typing_extensions.get_args(hint)[0]
            )
        if origin is typing_extensions.Required or (
            total and origin is not typing_extensions.NotRequired
        ):
            out.add(key)
    return frozenset(out)


def _strip(tp: Any) -> Any:
    """Without Required/NotRequired/Annotated wrappers."""
    while True:
        origin = typing_extensions.get_origin(tp)
        if origin in (
            typing_extensions.Required,
            typing_extensions.NotRequired,
            typing_extensions.Annotated,
            typing_extensions.ReadOnly,
        ):
            tp = typing_extensions.get_args(tp)[0]
        else:
            return tp


_SCALARS: dict[Any, tuple[tuple[type, ...], str]] = {
    str: ((str,), "a string"),
    bool: ((bool,), "a bool"),
    int: ((int,), "an int"),
    float: ((int, float), "a number"),
}
_LISTS = (cabc.Iterable, cabc.Sequence, cabc.Collection, list)
_MAPS = (dict, cabc.Mapping)


def _union(value: Any, args: tuple[Any, ...], at: str) -> str | None:
    reasons = [mismatch(value, a, at) for a in args]
    if any(r is None for r in reasons):
        return None
    shown = "; ".join(r or "" for r in reasons[:6])
    return f"{at}: fits no member of the union ({shown})"


def _typeddict(value: Any, tp: Any, at: str) -> str | None:
    if not isinstance(value, dict):
        return f"{at}: expected an object for {tp.__name__}"
    hints = _hints(tp)
    extra = set(value) - set(hints)
    if extra:
        return f"{at}: {tp.__name__} has no keys {sorted(extra)}"
    missing = _required(tp) - set(value)
    if missing:
        return f"{at}: {tp.__name__} needs keys {sorted(missing)}"
    for key, item in value.items():
        why = mismatch(item, hints[key], f"{at}.{key}")
        if why:
            return why
    return None


def _items(value: Any, item: Any, at: str) -> str | None:
    if not isinstance(value, list):
        return f"{at}: expected a list"
    for i, v in enumerate(value):
        why = mismatch(v, item, f"{at}[{i}]")
        if why:
            return why
    return None


def _literal(value: Any, args: tuple[Any, ...], at: str) -> str | None:
    kinds = {type(a) for a in args}
    if value in args and type(value) in kinds:
        return None
    return f"{at}: {value!r} not in {args}"


def mismatch(value: Any, tp: Any, at: str = "$") -> str | None:
    """Why *value* does not fit *tp*, or None when it does."""
    tp = _strip(tp)
    origin = typing_extensions.get_origin(tp)
    args = typing_extensions.get_args(tp)
    if tp is Any or tp is object:
        why = None
    elif tp is None or tp is type(None):
        why = None if value is None else f"{at}: expected null"
    elif origin in (typing.Union, types.UnionType):
        why = _union(value, args, at)
    elif origin is typing.Literal:
        why = _literal(value, args, at)
    elif _is_typeddict(tp):
        why = _typeddict(value, tp, at)
    elif origin in _LISTS:
        why = _items(value, args[0] if args else Any, at)
    elif origin in _MAPS:
        why = None if isinstance(value, dict) else f"{at}: expected an object"
    elif tp in _SCALARS:
        kinds, name = _SCALARS[tp]
        ok = type(value) in kinds if tp is not str else isinstance(value, str)
        why = None if ok else f"{at}: expected {name}"
    elif isinstance(tp, type):
        # A class the SDK accepts besides JSON (a file object, say): JSON
        # never holds one.
        why = f"{at}: expected a {tp.__name__}"
    else:
        why = None  # a construct this checker does not model
    return why


def check(value: Any, tp: Any) -> None:
    """Assert that *value* fits *tp*, saying where it does not."""
    why = mismatch(value, tp)
    assert why is None, why
