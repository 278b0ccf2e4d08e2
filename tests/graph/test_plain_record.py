"""A record whose changed values are all written as themselves (ints,
strings: cattrs' ``identity``) is written without a blob sink, and every
value's unstructure hook is called directly: it must be the record the
general path writes, and a hook registered later must still be used."""

from __future__ import annotations

from typing import Any

import attrs
import cattrs

from hypothesis import given
from hypothesis import strategies as st

from pipeline import ImagePart, fold
from pipeline._serde import BLOB_MIN, make_converter
from pipeline.fold._codec import CLOCK, Codec
from tests.graph.test_record_times import T0


@attrs.frozen
class Scalars:
    """A state of scalars, and one field that may hold anything."""

    n: int = 0
    x: float = 0.0
    s: str = ""
    b: bool = False
    o: int | None = None
    anything: Any = None


_FAST: Codec[Scalars] = Codec(Scalars)
_SLOW: Codec[Scalars] = Codec(Scalars)

_BIG = ImagePart(data=b"\x89" * BLOB_MIN, media_type="image/png")

_ANY = (
    st.none()
    | st.integers()
    | st.text(max_size=4)
    | st.just(_BIG)
    | st.lists(st.integers(), max_size=2)
)

_FLOATS = st.floats(allow_nan=False, allow_infinity=False)

_STATES = st.builds(
    Scalars,
    n=st.integers(),
    x=_FLOATS,
    s=st.text(max_size=4),
    b=st.booleans(),
    o=st.none() | st.integers(),
    anything=_ANY,
)

_CHANGES = st.fixed_dictionaries(
    {},
    optional={
        "n": st.integers(),
        "x": _FLOATS,
        "s": st.text(max_size=4),
        "b": st.booleans(),
        "o": st.none() | st.integers(),
        "anything": _ANY,
    },
)

_ITSELF = {int, str, bool, type(None)}  # float: checked finite on the way


def seal_both(
    fast: Codec[Any],
    slow: Codec[Any],
    snap: fold.Snapshot[Any],
    parent: fold.Snapshot[Any] | None,
    inherit: bool,
) -> tuple[object, object]:
    """*snap* sealed by *fast* trying the plain way (no sink) and by
    *slow* never trying it, at the same time."""
    fast._plain = True
    slow._plain = False
    token = CLOCK.set(lambda: T0)
    try:
        one = fast.seal(snap, parent, None, inherit=inherit)
        other = slow.seal(snap, parent, None, inherit=inherit)
    finally:
        CLOCK.reset(token)
    return one, other


def _seal_both(
    snap: fold.Snapshot[Scalars],
    parent: fold.Snapshot[Scalars] | None,
    inherit: bool,
) -> tuple[object, object]:
    return seal_both(_FAST, _SLOW, snap, parent, inherit)


@given(_STATES, _CHANGES, st.booleans())
def test_a_plain_record_is_the_general_one(
    before: Scalars, changes: dict[str, Any], inherit: bool
) -> None:
    """Property: the codec trying the plain way (no sink) and one that
    never does seal the same document and bytes, or refuse alike; the
    plain way holds while every changed value is written as itself, and
    a codec that met another value stops trying."""
    after = attrs.evolve(before, **changes)
    first = fold.Snapshot.first("t", before, ("n",), "f")
    nxt = first.successor(after, "n", ("n",))
    fast, slow = _seal_both(nxt, first, inherit)
    assert fast == slow
    changed = [
        v
        for v, w in zip(
            attrs.astuple(after, recurse=False),
            attrs.astuple(before, recurse=False),
            strict=True,
        )
        if not (v is w or (type(v) is type(w) and v == w))
    ]
    assert _FAST._plain == all(type(v) in _ITSELF for v in changed)
    if isinstance(fast, tuple) and "blobs" in fast[0]:
        assert not _FAST._plain
    root_fast, root_slow = _seal_both(first, None, inherit)
    assert root_fast == root_slow


@attrs.frozen
class Tagged:
    """A state with one int."""

    n: int = 0


def _pair() -> tuple[fold.Snapshot[Tagged], fold.Snapshot[Tagged]]:
    first = fold.Snapshot.first("t", Tagged(1), ("n",), "f")
    return first, first.successor(Tagged(2), "n", ("n",))


def test_a_hook_registered_after_the_codec_is_used() -> None:
    """The codec holds the converter's dispatch, not the hooks it found:
    a hook registered after records were written is used for the next."""
    conv = make_converter()
    codec = Codec(Tagged, conv)
    first, nxt = _pair()
    assert codec.document(nxt, first)["state"] == {"n": 2}
    conv.register_unstructure_hook(int, lambda v: v * 10)
    assert codec.document(nxt, first)["state"] == {"n": 20}


class _Loud(cattrs.Converter):
    """A converter that unstructures in its own way."""

    def unstructure(self, obj: Any, unstructure_as: Any = None) -> Any:
        out = super().unstructure(obj, unstructure_as)
        return out * 10 if type(out) is int else out


def test_a_converter_that_overrides_unstructure_is_asked() -> None:
    """A converter whose ``unstructure`` is its own is called, not
    bypassed through its dispatch."""
    codec = Codec(Tagged, _Loud())
    first, nxt = _pair()
    assert codec.document(nxt, first)["state"] == {"n": 20}
