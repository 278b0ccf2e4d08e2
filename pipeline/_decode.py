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

import json
import re

from collections.abc import Sequence
from typing import Any, NoReturn, TypeVar, get_args

import attrs

from cattrs.errors import (
    CattrsError,
    ClassValidationError,
    ForbiddenExtraKeysError,
    IterableValidationError,
)
from returns.result import Failure, Result, Success

from ._schema import schema_for
from ._serde import STRUCTURE_ERRORS, make_converter, unicode_safe
from .errors import ConstructionError


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
    "unsendable",
)

DECODE_ERRORS: tuple[type[Exception], ...] = (*STRUCTURE_ERRORS, CattrsError)
"""What structuring untrusted data into a declared type can raise."""

T = TypeVar("T")

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_CONVERTER = make_converter()


MAX_DEPTH = 64
"""JSON nested deeper than this is refused."""


def no_constant(_: str) -> NoReturn:
    """``json.loads``' *parse_constant*: NaN and Infinity are refused."""
    msg = "NaN and Infinity are not JSON"
    raise ValueError(msg)


JSON = json.JSONDecoder(parse_constant=no_constant)
"""A JSON decoder refusing NaN and Infinity (made once: ``json.loads``
with options builds a decoder per call)."""

_SCALARS = frozenset({int, float, bool, type(None)})


def names(keys: Sequence[str]) -> str:
    """Names (keys) untrusted data made up, as far as they are safe to show:
    short identifiers; the others are counted."""
    shown = sorted(k for k in keys if _NAME.fullmatch(k))
    hidden = len(keys) - len(shown)
    return str(shown) + (f" and {hidden} more" if hidden else "")


def unsendable(value: object) -> str | None:
    """Why a decoded JSON value cannot go on (``None`` if it can): nesting
    past :data:`MAX_DEPTH`, or text that is not Unicode (a lone
    surrogate, which no encoder downstream would write)."""
    if type(value) in _SCALARS:
        return None
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
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


def explain(exc: BaseException, annotation: Any, path: str = "$") -> list[str]:
    """What did not fit, and where: paths and expected types, no values
    (cattrs' own texts quote the value: they are not used)."""
    if isinstance(exc, IterableValidationError):
        out: list[str] = []
        with_notes, without = exc.group_exceptions()
        for sub, note in with_notes:
            # Indices are positions; mapping keys are the model's data.
            step = f"[{note.index}]" if isinstance(note.index, int) else "[…]"
            out += explain(sub, note.type, path + step)
        out += [_expected(annotation, path) for _ in without[:1]]
        return out
    if isinstance(exc, ClassValidationError):
        out = []
        by_field, rest = exc.group_exceptions()
        for sub, field in by_field:
            out += explain(sub, field.type, f"{path}.{field.name}")
        for sub in rest:
            out += explain(sub, annotation, path)
        return out
    if isinstance(exc, ForbiddenExtraKeysError):
        extra = names(list(exc.extra_fields))
        return [f"unknown field(s) {extra}{_at(path)}"]
    if isinstance(exc, KeyError):
        return [f"a required field is missing{_at(path)}"]
    return [_expected(annotation, path)]


def _expected(t: Any, path: str) -> str:
    return f"expected {describe(t)}{_at(path)}"


def _at(path: str) -> str:
    return "" if path == "$" else f" at {path}"


def describe(t: Any) -> str:
    """A type in the words of its JSON schema."""
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
    if "anyOf" in schema:
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
        raw = JSON.decode(text)
    except (ValueError, RecursionError):
        return Failure("not valid JSON")
    problem = unsendable(raw)
    if problem is not None:
        return Failure(problem)
    try:
        return Success(_CONVERTER.structure(raw, kind))
    except DECODE_ERRORS as exc:
        return Failure("; ".join(explain(exc, kind)))
