"""What a state type tells the fold's codec about its fields.

Records store an attrs state field by field, and persistent-vector fields
as logs (only what was appended since the parent record).  A state type
says more about a field with these attrs *metadata* keys; the codec reads
the keys, never the type:

- :data:`APPEND_ONLY`: only ever appended to, so the last shared item is
  proof enough that a vector extends its parent's;
- :data:`LINEAGE`: the name of an attribute holding vectors this one is
  known to extend (a :class:`~pipeline.Context` records them as it
  appends), so an extension is recognised at once;
- :data:`READ_BACK`: a function that makes the field's value from its
  stored JSON, where its declared type is not what cattrs structures;
- :data:`FORMER_FIELDS` (a class attribute, not a field's): fields an
  older version stored, read into today's.

:func:`extends` is the check every log uses.
"""

from __future__ import annotations

import operator

from collections.abc import Callable, Sequence
from typing import Final


APPEND_ONLY: Final = "pipeline_append_only"
"""attrs field metadata key: the machine that owns this persistent-vector
field only ever appends to it, so a checkpoint may trust its last item."""

LINEAGE: Final = "pipeline_lineage"
"""attrs field metadata key: the attribute (of the state) listing vectors
this field's vector is known to extend."""

FORMER_FIELDS: Final = "__pipeline_former_fields__"
"""Class attribute: ``{old_name: (json) -> {field: json}}``, fields an
older version of the type stored, and today's fields each one's stored
value stands for (so records written before a field was renamed or split
still decode, and Temporal histories still replay)."""

READ_BACK: Final = "pipeline_read_back"
"""attrs field metadata key: ``(json) -> value``, how the field is made from
what a record stores (raising ``TypeError`` or ``ValueError`` if it does
not fit)."""


def extends(
    old: Sequence[object],
    new: Sequence[object],
    lineage: Sequence[Callable[[], object]] = (),
) -> bool:
    """Whether *new* starts with exactly *old*'s items (the same objects).

    *lineage* lists weak references to vectors *new* is known to extend: a
    hit answers at once (*old* is alive, so a reference to it still
    answers it).  Otherwise every item of *old* is compared by identity, in C:
    linear, but never fooled by an edit in the middle (the identity of the
    last item alone would be).
    """
    if new is old:
        return True
    n = len(old)
    if len(new) < n:
        return False
    if n == 0:
        return True
    for known in lineage:
        if known() is old:
            return True
    return all(map(operator.is_, old, new))


def starts_with(old: Sequence[object], new: Sequence[object]) -> bool:
    """Whether *new* starts with *old*'s items: the same objects
    (:func:`extends`), else equal ones (a fan-out branch's output read back
    from its record on a resume holds equal items, not the same)."""
    return extends(old, new) or (
        len(new) >= len(old) and all(map(operator.eq, old, new))
    )
