"""Read-only views that join sequences without copying them.

An agent's request is its instructions, the view of the conversation it
was given and the messages its turns added; a swarm agent's view is the
whole history.  Copying all of that into a tuple on every model call made
each call cost as much as the history is long; a view costs as many parts
as it joins.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import chain
from typing import Any, TypeVar, final, overload


T = TypeVar("T")


@final
class Joined(Sequence[T]):
    """The concatenation of *parts*, read in place."""

    __slots__ = ("_len", "_parts")

    def __init__(self, *parts: Sequence[T]) -> None:
        kept = tuple(p for p in parts if len(p))
        self._parts = kept
        self._len = sum(map(len, kept))

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[T]:
        return chain.from_iterable(self._parts)

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[T]: ...

    def __getitem__(self, index: int | slice) -> T | Sequence[T]:
        if isinstance(index, slice):
            return tuple(self)[index]
        if index < 0:
            index += self._len
        if not 0 <= index < self._len:
            msg = "Joined index out of range"
            raise IndexError(msg)
        for part in self._parts:
            if index < len(part):
                return part[index]
            index -= len(part)
        raise AssertionError("unreachable")  # pragma: no cover

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
            return NotImplemented
        return len(other) == self._len and all(
            a == b for a, b in zip(self, other, strict=True)
        )

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"Joined({list(self)!r})"


def joined(*parts: Sequence[Any]) -> Sequence[Any]:
    """*parts* as one sequence: the only part itself, else a :class:`Joined`
    (built here, without its constructor looking for empty parts again:
    an agent joins one per model call)."""
    nonempty = tuple(filter(len, parts))
    if len(nonempty) == 1:
        return nonempty[0]
    out: Joined[Any] = _new(Joined)
    _set_parts(out, nonempty)
    _set_len(out, sum(map(len, nonempty)))
    return out


_new = object.__new__
_set_parts = Joined.__dict__["_parts"].__set__
_set_len = Joined.__dict__["_len"].__set__
