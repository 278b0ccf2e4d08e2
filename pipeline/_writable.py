"""A frozen attrs class's writable twin, for building instances on a hot
path.

A frozen class refuses every attribute store: attrs' own ``__init__``
goes around that with one slot setter called per field, which costs more
than the rest of a trivial step.  The twin is a subclass adding no slot,
whose ``__setattr__`` and ``__delattr__`` are ``object``'s: an instance
is filled by plain stores (which the interpreter specializes to direct
slot writes), then becomes the frozen class itself by assigning
``__class__`` (allowed: the same layout).  Nothing may see the instance
before that, so the public type, fields and frozenness are exactly the
constructor's.

>>> import attrs
>>> @attrs.frozen
... class Point:
...     x: int
>>> p = writable_twin(Point).__new__(writable_twin(Point))
>>> p.x = 1
>>> p.__class__ = Point
>>> p
Point(x=1)
"""

from __future__ import annotations

from typing import Any


__all__ = ("writable_twin",)


def writable_twin(frozen: type[Any]) -> type[Any]:
    """A subclass of the frozen (slotted) attrs class *frozen* whose slots
    take plain stores; turn an instance back with ``__class__ = frozen``."""
    return type(
        f"_Writable{frozen.__name__}",
        (frozen,),
        {
            "__slots__": (),
            "__setattr__": object.__setattr__,
            "__delattr__": object.__delattr__,
        },
    )
