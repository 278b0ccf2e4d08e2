"""Views joining sequences without copying them (pipeline._views)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from pyrsistent import pvector

from pipeline._views import Joined, joined


_PARTS = st.lists(
    st.lists(st.integers(), max_size=3).flatmap(
        lambda xs: st.sampled_from([tuple(xs), list(xs), pvector(xs)])
    ),
    max_size=4,
)


@given(parts=_PARTS)
def test_joined_is_the_concatenation_its_constructor_gives(
    parts: list[tuple[int, ...]],
) -> None:
    """``joined`` builds its view without the constructor: the same
    sequence as ``Joined(*parts)`` and as the parts copied one after the
    other (length, items, indexing, equality), or the only non-empty part
    itself."""
    flat = [x for part in parts for x in part]
    view = joined(*parts)
    assert list(view) == flat == list(Joined(*parts))
    assert len(view) == len(flat)
    assert [view[i] for i in range(-len(flat), len(flat))] == flat + flat
    nonempty = [p for p in parts if len(p)]
    if len(nonempty) == 1:
        assert view is nonempty[0]
    else:
        assert type(view) is Joined
        assert view == flat
        assert view == Joined(*parts)
