"""A record whose state is its parent's (a progress record, say) is written
without a blob sink: it must be the record the general path writes."""

from __future__ import annotations

from typing import Any

import attrs

from hypothesis import given
from hypothesis import strategies as st
from pyrsistent import pvector

from pipeline import fold
from pipeline.fold._codec import CLOCK, Codec
from tests.graph.helpers import Counted
from tests.graph.test_record_times import T0


_CODEC: Codec[Counted] = Codec(Counted)

_DOCS = st.lists(
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=3), max_size=3
).map(tuple)


@given(
    st.integers(0, 5),
    st.lists(st.text(max_size=4), max_size=4),
    st.text(max_size=4),
    st.none()
    | st.dictionaries(st.sampled_from(("a", "b")), _DOCS, max_size=2),
    st.booleans(),
)
def test_an_unchanged_state_writes_what_the_general_path_writes(
    count: int,
    trail: list[str],
    note: str,
    progress: dict[str, tuple[Any, ...]] | None,
    inherit: bool,
) -> None:
    """Property: the state object itself (the fast path) and an equal copy
    of it (the general path, field by field) seal to the same document and
    bytes."""
    first = fold.Snapshot.first(
        "t", Counted(count, pvector(trail), note), ("n",), "f"
    )
    same = first.successor(first.state, "n", ("n",), fingerprint="f")
    copy = attrs.evolve(same, state=attrs.evolve(first.state))
    assert copy.state is not first.state
    token = CLOCK.set(lambda: T0)
    try:
        fast = _CODEC.seal(same, first, progress, inherit=inherit)
        slow = _CODEC.seal(copy, first, progress, inherit=inherit)
    finally:
        CLOCK.reset(token)
    assert isinstance(fast, tuple)
    assert fast == slow
    assert "state" not in fast[0]
    assert "logs" not in fast[0]
    assert "blobs" not in fast[0]
