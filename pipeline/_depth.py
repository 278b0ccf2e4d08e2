"""How deep JSON read from outside may nest: one limit, checked by counting.

Answers, ``--input``, stored records, metadata and a model's tool
arguments are JSON from outside the program.  Each is measured here
*before* it is parsed, so no parser recurses past the limit and nothing
relies on :class:`RecursionError` (Python 3.13's decoder takes 5,000
levels that 3.11's refused; the value then failed further on, in words
that blamed the store).

>>> check_depth('{"a": [1, [2]]}', "--input")
>>> check_depth("[" * 65 + "]" * 65, "--input")
Traceback (most recent call last):
...
pipeline.errors.NestedTooDeeply: --input nests deeper than 64 levels
"""

from __future__ import annotations

import re

from typing import Any, Final

from .errors import NestedTooDeeply


__all__ = ("MAX_DEPTH", "RECORD_DEPTH", "check_depth", "depth_of", "loads")

MAX_DEPTH: Final = 64
"""JSON nested deeper than this is refused, wherever it is read: arrays
and objects count a level each (``[]`` is 1, ``[[]]`` is 2)."""

RECORD_DEPTH: Final = 4 * MAX_DEPTH
"""A checkpoint record's limit: what it holds (an answer, input, state
made of them) sits inside its envelope, and folds nested in a step nest
their documents in it.  A record deeper than this is neither written
(the commit is an ``InvalidState`` naming the field) nor read."""

_BRACKETS = bytes.maketrans(b"{}", b"[]")
_NOT_MARKS = bytes(set(range(256)) - set(b'[]{}"'))
_STRING = re.compile(rb'"[^"]*"')
"""A string among quotes and brackets only (escapes are gone by then)."""


def depth_of(data: str | bytes | bytearray, cap: int | None = None) -> int:
    """How deep *data* (JSON text) nests: its deepest point's count of open
    arrays and objects (0 for a scalar); counting stops past *cap*.
    Malformed text gets a number too (an unclosed bracket counts); the
    parser refuses it afterwards.

    C loops only (byte replacements and splits, one per level): linear in
    the text's length for a given depth, and cheap next to parsing it."""
    raw = (
        data.encode("utf-8", "surrogatepass")
        if isinstance(data, str)
        else bytes(data)
    )
    # Escapes first (an escaped backslash, then an escaped quote), then
    # everything but quotes and brackets; two quotes in a row toggle
    # nothing (an empty string, or one string ending as the next starts),
    # and the strings still left hold brackets that are only text.
    raw = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    marks = raw.translate(_BRACKETS, _NOT_MARKS).replace(b'""', b"")
    if b'"' in marks:
        marks = _STRING.sub(b"", marks)
    brackets = marks
    depth = 0
    while brackets and (cap is None or depth <= cap):
        # Each pass removes the innermost pairs: one level.
        inner = brackets.replace(b"[]", b"")
        if len(inner) == len(brackets):  # unbalanced: what is left is open
            opened = inner.find(b"]")
            return depth + (len(inner) if opened < 0 else opened)
        brackets = inner
        depth += 1
    return depth


def check_depth(
    data: str | bytes | bytearray, where: str, limit: int = MAX_DEPTH
) -> None:
    """Refuse *data* (JSON text) if it nests past *limit* levels.

    Raises:
        NestedTooDeeply: naming *where* (never the value).
    """
    if isinstance(data, str):
        brackets = data.count("[") + data.count("{")
    else:
        brackets = data.count(b"[") + data.count(b"{")
    if brackets > limit and depth_of(data, limit) > limit:
        raise NestedTooDeeply(where, limit)


def loads(
    data: str | bytes | bytearray,
    where: str,
    limit: int = MAX_DEPTH,
    **options: Any,
) -> Any:
    """:func:`json.loads` of JSON from outside, its depth checked first.

    Raises:
        NestedTooDeeply: *data* nests past *limit* levels.
        ValueError: it is not JSON (or an option's hook refused it).
    """
    import json  # noqa: PLC0415  # the standard library's, loaded on use

    check_depth(data, where, limit)
    return json.loads(data, **options)
