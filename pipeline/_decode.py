"""Untrusted JSON against a declared type: why it does not fit, in words
that name fields and types and never quote a value.

A model's tool arguments and structured answers are untrusted: a value that
does not fit may be a secret, and the explanation goes back into the
conversation, the logs and the checkpoints.  cattrs' own messages quote the
value; these do not.

>>> decode_json('{"n": "SECRET"}', dict[str, int])
<Failure: expected an integer at $[…]>
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import re
import types
import typing

from collections.abc import Iterator, Sequence
from typing import Any, NoReturn, TypeVar, get_args

import attrs
import cattrs

from cattrs.errors import (
    CattrsError,
    ClassValidationError,
    ForbiddenExtraKeysError,
    IterableValidationError,
    StructureHandlerNotFoundError,
)
from returns.result import Failure, Result, Success

from ._depth import MAX_DEPTH, check_depth
from ._schema import schema_for
from ._serde import STRUCTURE_ERRORS, make_converter, unicode_safe
from .errors import ConstructionError, NestedTooDeeply, SecretUnresolved


__all__ = (
    "DECODE_ERRORS",
    "JSON",
    "MAX_DEPTH",
    "decode_json",
    "describe",
    "explain",
    "is_unicode",
    "names",
    "no_constant",
    "readable",
    "strict",
    "unsendable",
)

DECODE_ERRORS: tuple[type[Exception], ...] = (*STRUCTURE_ERRORS, CattrsError)
"""What structuring untrusted data into a declared type can raise."""

T = TypeVar("T")

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_CONVERTER = make_converter()


def no_constant(_: str) -> NoReturn:
    """``json.loads``' *parse_constant*: NaN and Infinity are refused."""
    msg = "NaN and Infinity are not JSON"
    raise ValueError(msg)


JSON = json.JSONDecoder(parse_constant=no_constant)
"""A JSON decoder refusing NaN and Infinity (made once: ``json.loads``
with options builds a decoder per call)."""

_SCALARS = frozenset({int, bool, type(None)})

MAX_PROBLEMS = 5
"""At most this many problems are listed for one value (the rest are
summed up in words, not counted: a count would tell the value's size)."""


def names(keys: Sequence[str]) -> str:
    """Names (keys) untrusted data made up, as far as they are safe to show:
    at most :data:`MAX_PROBLEMS` short identifiers; the others are
    mentioned, not counted (a count would tell the data's size)."""
    safe = sorted(k for k in keys if _NAME.fullmatch(k))
    shown = safe[:MAX_PROBLEMS]
    hidden = len(shown) < len(keys)
    return str(shown) + (" and others" if hidden else "")


def readable(converter: cattrs.Converter, kind: object, who: str) -> None:
    """Refuse, before anything is asked, a *kind* that *converter* cannot
    read any answer as: a name given as a string (``"int"``), ``object``,
    a union whose members take the same kind of JSON value
    (``A | dict[str, int]``: two objects).  *who* names the asking call.

    Raises:
        TypeError: naming *kind*, saying what to ask for instead.
    """
    if isinstance(kind, (str, typing.ForwardRef)):
        msg = (
            f"{who}: the answer's type is given as a string; give the "
            "type itself (int, an attrs class, a Literal, ...)"
        )
        raise TypeError(msg)
    try:
        converter.get_structure_hook(kind)
        # ``T | None`` has cattrs' hook whether or not T has one, at any
        # depth (an item, a field): each such T is asked too.
        for rest in _optionals_of(kind):
            converter.get_structure_hook(rest)
    except StructureHandlerNotFoundError:
        msg = (
            f"{who}: no answer can be read as {kind!r} (the converter has "
            "no structure hook for it: e.g. object, or a union of two "
            "types taking the same kind of JSON value, such as two "
            "objects); ask for an attrs class, a Literal, a union of "
            "kinds JSON tells apart, or register a hook"
        )
        raise TypeError(msg) from None


@attrs.frozen
class _Probe:
    """An attrs class only :func:`strict` reads (no user hook knows it)."""

    n: int


_LENIENT: tuple[tuple[object, Any, str], ...] = (
    (3.7, int, "3.7 as an int"),
    ("12", int, '"12" as an int'),
    (True, int, "true as an int"),
    (True, float, "true as a float"),
    ("1.5", float, '"1.5" as a float'),
    (1, str, "1 as a str"),
    (1, bool, "1 as a bool"),
    ("ab", list[str], "a string as a list of its characters"),
    ({"n": 1, "extra": 2}, _Probe, "an object with an unknown key"),
)
"""Values a strict converter refuses as these types (see
:func:`~pipeline.fold.make_converter`), which a plain
``cattrs.Converter()`` coerces; and what taking each means."""


def strict(converter: cattrs.Converter, who: str) -> None:
    """Refuse a *converter* that reads leniently (``3.7`` as the ``int``
    3, ``"12"`` as 12, unknown keys dropped): answers and checkpoints are
    read with it, and the docs promise they are read strictly.  A
    converter from :func:`~pipeline.fold.make_converter`, with the user's
    own hooks registered on it, reads strictly.  *who* names the
    parameter (``"build(converter=...)"``).

    Raises:
        TypeError: naming *who* and the probe it took (our values, never
            the user's), saying how to make a strict converter.
    """
    for value, kind, taken in _LENIENT:
        try:
            converter.structure(value, kind)
        except DECODE_ERRORS:
            continue
        msg = (
            f"{who}: the converter reads leniently (it takes {taken}, as a "
            "plain cattrs.Converter() does), and answers and checkpoints "
            "are read strictly: start from pipeline.fold.make_converter() "
            "and register your hooks on it"
        )
        raise TypeError(msg)


def _optionals_of(kind: object) -> tuple[Any, ...]:
    """:func:`_optionals`, remembered per type (a gate's ``answer_as`` asks
    at every transition)."""
    try:
        return _remembered_optionals(kind)
    except TypeError:  # an unhashable type form: not remembered
        return tuple(_optionals(kind))


@functools.lru_cache(maxsize=256)
def _remembered_optionals(kind: object) -> tuple[Any, ...]:
    return tuple(_optionals(kind))


def _optionals(kind: object) -> Iterator[Any]:
    """The ``T`` of every ``T | None`` in *kind* (itself, its arguments,
    an attrs class's fields, at any depth).

    Raises:
        StructureHandlerNotFoundError: a type named by a string inside.
    """
    seen: set[int] = set()
    stack = [kind]
    while stack:
        t = stack.pop()
        if id(t) in seen:
            continue
        seen.add(id(t))
        if isinstance(t, (str, typing.ForwardRef)):
            msg = "a type named by a string"
            raise StructureHandlerNotFoundError(msg, type_=type(t))
        args = typing.get_args(t)
        if _is_union(t) and type(None) in args:
            rest = tuple(m for m in args if m is not type(None))
            yield rest[0] if len(rest) == 1 else typing.Union[rest]  # noqa: UP007  # built at run time
        if typing.get_origin(t) is typing.Annotated:
            args = args[:1]
        elif typing.get_origin(t) is typing.Literal:
            args = ()
        stack.extend(args)
        if isinstance(t, type) and attrs.has(t):
            try:
                hints = typing.get_type_hints(t)
            except (NameError, TypeError):
                continue  # cattrs says, when it makes the class's hook
            stack.extend(hints.values())


def _is_union(t: object) -> bool:
    origin = typing.get_origin(t)
    return origin is typing.Union or origin is types.UnionType


def unsendable(value: object) -> str | None:
    """Why a decoded JSON value cannot go on (``None`` if it can): nesting
    past :data:`MAX_DEPTH`, text that is not Unicode (a lone surrogate,
    which no encoder downstream would write), or a number past the float
    range (``1e400`` reads as infinity, which JSON cannot say)."""
    if type(value) in _SCALARS:
        return None
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if type(item) is float:
            if not math.isfinite(item):
                return "a number past the float range"
        elif isinstance(item, str):
            if not item.isascii() and not is_unicode(item):
                return "text that is not valid Unicode (a lone surrogate)"
        elif isinstance(item, (dict, list)):
            if depth >= MAX_DEPTH:
                return f"nested deeper than {MAX_DEPTH} levels"
            if isinstance(item, dict):
                stack.extend((k, depth + 1) for k in item)
                stack.extend((v, depth + 1) for v in item.values())
            else:
                stack.extend((v, depth + 1) for v in item)
    return None


def is_unicode(text: str) -> bool:
    """Whether *text* has no lone surrogate (any encoder can write it)."""
    return unicode_safe(text) is text


def explain(
    exc: BaseException, annotation: Any, path: str = "$", *, keys: bool = True
) -> list[str]:
    """What did not fit, and where: paths and expected types, no values
    (cattrs' own texts quote the value: they are not used).  At most
    :data:`MAX_PROBLEMS` entries, the last saying that there are more, so
    the text is short whatever the value's size, and does not tell it.
    *keys*: unknown keys are named (as far as :func:`names` shows them: a
    model fixes its call by them); else the fields expected are (a
    human's answer, where a key may be anything pasted)."""
    found = list(
        itertools.islice(
            _explain(exc, annotation, path, keys), MAX_PROBLEMS + 1
        )
    )
    if len(found) > MAX_PROBLEMS:
        found[MAX_PROBLEMS - 1 :] = ["and other problems"]
    return found


def _explain(
    exc: BaseException, annotation: Any, path: str, keys: bool
) -> Iterator[str]:
    # A generator: a value with a million problems is not walked past the
    # few that are shown.
    if isinstance(exc, IterableValidationError):
        with_notes, without = exc.group_exceptions()
        for sub, note in with_notes:
            # Indices are positions; mapping keys are the model's data.
            step = f"[{note.index}]" if isinstance(note.index, int) else "[…]"
            yield from _explain(sub, note.type, path + step, keys)
        if without:
            yield _expected(annotation, path)
    elif isinstance(exc, ClassValidationError):
        by_field, rest = exc.group_exceptions()
        for sub, field in by_field:
            yield from _explain(sub, field.type, f"{path}.{field.name}", keys)
        for sub in rest:
            yield from _explain(sub, annotation, path, keys)
    elif isinstance(exc, ForbiddenExtraKeysError):
        yield _unknown(exc, path, keys)
    elif isinstance(exc, KeyError):
        # SecretUnresolved is a KeyError too, but the field is there.
        what = (
            "a secret reference no resolver knows"
            if isinstance(exc, SecretUnresolved)
            else "a required field is missing"
        )
        yield f"{what}{_at(path)}"
    elif isinstance(said := getattr(exc, "explained", None), str):
        yield f"{said}{_at(path)}"  # an error that says what it wants
    else:
        yield _expected(annotation, path)


def _unknown(exc: ForbiddenExtraKeysError, path: str, keys: bool) -> str:
    """Unknown keys: named (see :func:`names`), or the fields expected."""
    if keys:
        return f"unknown field(s) {names(list(exc.extra_fields))}{_at(path)}"
    known = [f.name for f in attrs.fields(exc.cl)] if attrs.has(exc.cl) else []
    return f"unknown field(s){_at(path)}: expected only {known}"


def _expected(t: Any, path: str) -> str:
    return f"expected {describe(t)}{_at(path)}"


def _at(path: str) -> str:
    return "" if path == "$" else f" at {path}"


def describe(t: Any) -> str:
    """A type in the words of its JSON schema."""
    while hasattr(t, "__supertype__"):  # a NewType: what it stands for
        t = t.__supertype__
    try:
        schema = schema_for(t) if t is not None else {}
    except ConstructionError:
        schema = {}
    if "enum" in schema:
        try:
            return f"one of {json.dumps(schema['enum'])}"
        except (TypeError, ValueError):  # a Literal of non-JSON values
            return "one of the allowed values"
    kind = schema.get("type")
    if isinstance(kind, str):
        label = _KINDS.get(kind, kind)
        if kind == "object" and isinstance(t, type) and attrs.has(t):
            return f"{label} ({t.__name__})"
        return label
    if "anyOf" in schema or (not schema and _is_union(t)):
        return " or ".join(describe(a) for a in get_args(t))
    return "a valid value"


_KINDS = {
    "integer": "an integer",
    "number": "a number",
    "string": "a string",
    "boolean": "true or false",
    "null": "null",
    "array": "an array",
    "object": "an object",
}


def decode_json(text: str, kind: type[T]) -> Result[T, str]:
    """*text* (JSON) structured into *kind*, or why it does not fit (see
    :func:`explain`): NaN, nesting past :data:`MAX_DEPTH` and lone
    surrogates are refused too."""
    try:
        check_depth(text, "the value")
        raw = JSON.decode(text)
    except NestedTooDeeply:
        return Failure(f"nested deeper than {MAX_DEPTH} levels")
    except ValueError:
        return Failure("not valid JSON")
    problem = unsendable(raw)
    if problem is not None:
        return Failure(problem)
    try:
        return Success(_CONVERTER.structure(raw, kind))
    except DECODE_ERRORS as exc:
        return Failure("; ".join(explain(exc, kind)))
