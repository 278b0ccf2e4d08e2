"""Deeply immutable values, and small memos that are only valid for them.

A cache hit in a re-run meets the same objects again: node k+1 is handed
the very state node k's hit returned.  Computing that state's key again
(unstructure, canonical JSON, SHA-256) or decoding the same bytes again
gives the same answer every time, but only if the value cannot change in
between.  :func:`deeply_frozen` says so of a value (once per value, with
what it learns about each type kept per type); :class:`IdentityMemo` and
:class:`ContentMemo` remember an answer for such values only, so a mutable
value is always looked at again.

Assumes the converter's hooks are functions of the value alone (as a
checkpoint's checksum already does): the same value always unstructures,
and the same bytes always structure, to the same thing.
"""

from __future__ import annotations

import enum
import threading
import weakref

from typing import Any, Generic, TypeVar, final

import attrs

from pyrsistent import pmap, pvector


__all__ = ("ContentMemo", "IdentityMemo", "deeply_frozen")

V = TypeVar("V")

_ATOMS: frozenset[type] = frozenset(
    {int, float, str, bytes, bool, complex, type(None)}
)
_SEQUENCES: frozenset[type] = frozenset({tuple, frozenset, type(pvector())})
_PMAP: type = type(pmap())


@attrs.frozen
class _Probe:
    """The setters every frozen attrs class has (compared by identity)."""


_SET, _DEL = _Probe.__setattr__, _Probe.__delattr__

# Per type: the names of its fields if it is a frozen attrs class that
# nothing overrides, else None (a type that can never be deeply frozen).
_FIELDS: dict[type, tuple[str, ...] | None] = {}


def _fields(kind: type) -> tuple[str, ...] | None:
    try:
        return _FIELDS[kind]
    except KeyError:
        pass
    names: tuple[str, ...] | None = None
    if (
        attrs.has(kind)
        and kind.__setattr__ is _SET
        and kind.__delattr__ is _DEL
    ):
        names = tuple(f.name for f in attrs.fields(kind))
    _FIELDS[kind] = names
    return names


def deeply_frozen(value: object) -> bool:
    """Whether *value* can never change: built only of ints, floats,
    strings, bytes, booleans, ``None``, enum members with such values,
    tuples, frozensets, persistent vectors and maps of such values, and
    frozen attrs classes whose fields hold such values.

    Checked on the value itself, not on its annotations (attrs does not
    check that a field annotated ``tuple`` holds no list)."""
    try:
        return _frozen(value)
    except RecursionError:
        return False


def _frozen(value: object) -> bool:
    kind = type(value)
    if kind in _ATOMS:
        return True
    names = _fields(kind)
    if names is not None:
        for name in names:
            field = getattr(value, name)
            if type(field) not in _ATOMS and not _frozen(field):
                return False
        return True
    if kind in _SEQUENCES:
        return all(_frozen(v) for v in value)  # type: ignore[attr-defined]
    if kind is _PMAP:
        return all(
            _frozen(k) and _frozen(v)
            for k, v in value.items()  # type: ignore[attr-defined]
        )
    if isinstance(value, enum.Enum):
        return _frozen(value.value)
    return False


_BOUND = 64


def _make_room(entries: dict[Any, Any], bound: int) -> None:
    """Drop the oldest entries until one more fits in *bound*.  Called
    with the memo's lock held (graphs and models are shared by runs in
    several threads; readers never change a memo, so it is the only
    writer)."""
    while len(entries) >= bound:
        del entries[next(iter(entries))]


@final
class IdentityMemo(Generic[V]):
    """An answer per deeply frozen object, found by the object's identity.

    Holds a weak reference to the object where it can (a frozen attrs
    instance), else the object itself; at most *bound* entries, the
    oldest dropped first.  An answer is kept for any object, but given
    back only once the object is found deeply frozen (checked when it is
    first met again, so an object met once costs no check): a mutable or
    mutated value never gets a stale answer.  An object that died and
    whose identity was reused is never mistaken for it."""

    __slots__ = ("_bound", "_lock", "entries")

    def __init__(self, bound: int = _BOUND) -> None:
        self._bound = bound
        self._lock = threading.Lock()
        #: ``id(object)`` -> (the object or a weak reference to it, answer,
        #: whether the object was found deeply frozen); read inline by hot
        #: paths (see :meth:`get`).
        self.entries: dict[int, tuple[Any, V, bool]] = {}

    def get(self, obj: object) -> V | None:
        """The answer kept for *obj* itself, or ``None``."""
        entry = self.entries.get(id(obj))
        if entry is None:
            return None
        held = entry[0]
        if (held is obj or (type(held) is weakref.ref and held() is obj)) and (
            entry[2] or self.verify(obj, entry)
        ):
            return entry[1]
        return None

    def verify(self, obj: object, entry: tuple[Any, V, bool]) -> bool:
        """Whether *obj*'s *entry* (found by identity) may be given back:
        *obj* is deeply frozen, so nothing it holds has changed since,
        nor can.  If not, the entry is dropped."""
        frozen = deeply_frozen(obj)
        key = id(obj)
        with self._lock:
            entries = self.entries
            if entries.get(key) is entry:  # not dropped or replaced since
                if frozen:
                    entries[key] = (entry[0], entry[1], True)
                else:
                    del entries[key]
        return frozen

    def put(self, obj: object, answer: V) -> None:
        """Keep *answer* for *obj* (given back once *obj* is found deeply
        frozen)."""
        try:
            held: Any = weakref.ref(obj)
        except TypeError:  # a tuple, a string: kept alive while kept here
            held = obj
        with self._lock:
            entries = self.entries
            _make_room(entries, self._bound)
            entries[id(obj)] = (held, answer, False)


@final
class ContentMemo(Generic[V]):
    """An answer per byte string, kept only where the value decoded from
    the bytes is deeply frozen (then every caller may share it).

    At most *bound* entries, the oldest dropped first."""

    __slots__ = ("_bound", "_lock", "entries")

    def __init__(self, bound: int = _BOUND) -> None:
        self._bound = bound
        self._lock = threading.Lock()
        #: bytes -> the answer for them; read inline by hot paths.
        self.entries: dict[bytes, V] = {}

    def put(self, data: bytes, value: object, answer: V) -> None:
        """Keep *answer* for *data* if *value* (what *data* decodes to, that
        *answer* holds) is deeply frozen."""
        if not deeply_frozen(value):
            return
        with self._lock:
            entries = self.entries
            _make_room(entries, self._bound)
            entries[data] = answer
