"""Mappings keyed by something else than strings, inside a union or a
container (``dict[Color, int] | None``, ``list[dict[Color, int]] | int``,
a log of them, a state that is one), are written by the declared type.

A plain ``dict[Color, int]`` field was written by its declared type's hook
already; in a union or a container the value was written by its own
class's hook (``dict``, ``list``), which kept the keys as they were: the
first commit failed (``InvalidState``), though ``build()`` accepted the
field.  Threads main wrote before (keys it could write: integers) read
back, and are written the same, byte for byte.
"""

from __future__ import annotations

import enum
import json

from collections.abc import Iterator
from typing import Any

import attrs
import pytest

from hypothesis import given, settings
from hypothesis import strategies as st
from pyrsistent import PMap, PVector, pmap, pvector
from returns.result import Result, Success

from pipeline import Graph, graph, handler, stores
from pipeline.fold import make_converter
from pipeline.fold._codec import CLOCK
from pipeline.graph import END
from pipeline.stores import Record, record_checksum
from tests.servers import StoreFactory


class Color(enum.Enum):
    """Keys that are not strings."""

    RED = "red"
    ONE = 1


@attrs.frozen
class Inner:
    """An attrs class's field is written by its declared type."""

    d: dict[Color, int] | None = None


@attrs.frozen
class Keyed:
    """Non-str keys in unions and containers, at any depth."""

    maybe: dict[Color, int] | None = None
    either: dict[Color, int] | list[int] = attrs.field(factory=list)
    spots: dict[tuple[int, int], int] | str = ""
    many: list[dict[Color, int]] | int = 0
    pair: tuple[dict[Color, int], int] = ({}, 0)
    log: PVector[dict[Color, int]] = pvector()
    nested: dict[str, dict[Color, int] | None] = attrs.field(factory=dict)
    by_name: PMap[str, dict[Color, int]] = pmap()
    inner: Inner = Inner()
    n: int = 0


def _step(s: Keyed) -> Keyed:
    n = s.n + 1
    color = Color.RED if n % 2 else Color.ONE
    return Keyed(
        maybe=None if n == 2 else {color: n},
        either=[n] if n == 2 else {color: n},
        spots={(n, -n): n} if n % 2 else str(n),
        many=n if n == 2 else [{color: n}, {}],
        pair=({color: n}, n),
        log=s.log.append({color: n}),
        nested={"a": {color: n}, "b": None},
        by_name=pmap({"a": {color: n}}),
        inner=Inner({color: n}),
        n=n,
    )


@handler(name="turn")
async def turn(s: Keyed) -> Result[Keyed, object]:
    return Success(_step(s))


def _turning(upto: int = 3) -> Graph[Keyed, object]:
    return (
        graph.builder(Keyed)
        .node("turn", turn)
        .entry("turn")
        .route(
            "turn",
            lambda s: "turn" if s.n < upto else END,
            to=["turn", END],
        )
        .build()
    )


async def test_keyed_mappings_in_unions_and_containers_round_trip(
    make_store: StoreFactory,
) -> None:
    """Every record reads back (load, history, a resume from any
    version), keys of their own types."""
    g = _turning()
    expected = [Keyed()]
    for _ in range(3):
        expected.append(_step(expected[-1]))
    async with make_store() as store:
        done = (await g.run(Keyed(), store=store, thread_id="t")).unwrap()
        assert done.state == expected[-1]
        assert (await g.load(store, "t")).unwrap().state == done.state
        states = [s.state for s in (await g.history(store, "t")).unwrap()]
        assert states == expected
        spots = states[1].spots
        assert isinstance(spots, dict)
        assert all(type(k) is tuple for k in spots)
        for version in range(len(states)):
            again = (await g.resume(store, "t", version=version)).unwrap()
            assert again.state == done.state


@handler(name="same")
async def same(
    s: list[dict[Color, int]],
) -> Result[list[dict[Color, int]], object]:
    return Success([*s, {Color.ONE: len(s)}])


async def test_a_state_stored_whole_holding_keyed_mappings_round_trips(
    make_store: StoreFactory,
) -> None:
    """A state that is not an attrs class (stored whole) is written by its
    declared type too."""
    g = (
        graph.builder(list[dict[Color, int]])
        .node("s", same)
        .entry("s")
        .edge("s", END)
        .build()
    )
    async with make_store() as store:
        done = (
            await g.run([{Color.RED: 2}], store=store, thread_id="t")
        ).unwrap()
        assert done.state == [{Color.RED: 2}, {Color.ONE: 1}]
        assert (await g.load(store, "t")).unwrap().state == done.state


_KEYS = st.one_of(
    st.sampled_from(Color), st.tuples(st.integers(), st.integers())
)
_VALUES = st.dictionaries(st.sampled_from(Color), st.integers(), max_size=3)


@settings(max_examples=60, deadline=None)
@given(
    value=st.one_of(
        st.none(),
        _VALUES,
        st.lists(_VALUES, max_size=3),
        st.lists(st.integers(), max_size=3),
    )
)
def test_a_keyed_union_reads_back_what_it_wrote(value: Any) -> None:
    """Law: structure(unstructure(v, T), T) == v for a union holding
    non-str-keyed mappings, and what is written is JSON (str keys)."""
    conv = make_converter()
    kind: Any = dict[Color, int] | list[dict[Color, int]] | None
    if isinstance(value, list) and value and not isinstance(value[0], dict):
        kind = dict[Color, int] | list[int] | None
    written = conv.unstructure(value, kind)
    assert json.loads(json.dumps(written)) == written
    assert conv.structure(written, kind) == value


@settings(max_examples=40, deadline=None)
@given(
    st.dictionaries(
        st.tuples(st.integers(), st.integers()), st.integers(), max_size=3
    )
)
def test_in_a_union_keys_are_written_as_the_field_alone_writes_them(
    value: dict[tuple[int, int], int],
) -> None:
    """Keys as JSON texts, in a union, an optional, a list in a union."""
    conv = make_converter()
    kind: Any = dict[tuple[int, int], int]
    alone = conv.unstructure(value, kind)
    assert all(isinstance(k, str) for k in alone)
    assert conv.unstructure(value, kind | None) == alone
    assert conv.unstructure(value, kind | str) == alone
    assert conv.unstructure([value], list[kind] | int) == [alone]


# -- a thread main wrote (before this change) --------------------------------


@attrs.frozen
class Former:
    """Fields main could write already: integer keys in a union and in a
    container, enum keys in a plain field."""

    by_int: dict[int, str] | None = None
    nested: dict[str, dict[int, str]] = attrs.field(factory=dict)
    by_color: dict[Color, int] = attrs.field(factory=dict)
    n: int = 0


@handler(name="former")
async def former(s: Former) -> Result[Former, object]:
    n = s.n + 1
    return Success(
        Former(
            by_int={n: "x"} if n % 2 else None,
            nested={"a": {n: "y", -n: "z"}},
            by_color={Color.RED: n},
            n=n,
        )
    )


def _former() -> Graph[Former, object]:
    return (
        graph.builder(Former)
        .node("former", former)
        .entry("former")
        .route(
            "former",
            lambda s: "former" if s.n < 2 else END,
            to=["former", END],
        )
        .build()
    )


T0 = 1_796_300_000.0

# Thread "t" as main (0c11e50) wrote it, _former() run on Former() at T0,
# byte for byte with its checksums.
MAIN: list[tuple[int | None, str, str]] = [
    (
        None,
        '{"at":1796300000000,"fp":"2fdc8d304ffd0bba/edges=8da39dcf/entry=239fc955/nodes=30474eac/version=391552c0","next":["former"],"state":{"by_color":{},"by_int":null,"n":0,"nested":{}},"step":0,"v":2}',
        "1cad78ff62d4758043217fba2a0e6eac209a8f7d33e76d17c326d4af704ee3df",
    ),
    (
        0,
        '{"at":1796300000000,"next":["former"],"state":{"by_color":{"\\"red\\"":1},"by_int":{"1":"x"},"n":1,"nested":{"a":{"-1":"z","1":"y"}}},"v":2}',
        "dbe0e773be00a0ef9091a71b58b29069a0c57dc29148d4e4ec26a9095611b293",
    ),
    (
        1,
        '{"at":1796300000000,"next":[],"state":{"by_color":{"\\"red\\"":2},"by_int":null,"n":2,"nested":{"a":{"-2":"z","2":"y"}}},"status":"done","v":2}',
        "e6a1dbfe1a98ea011c9fb7a9f692c85984c04c1829c7e6bdc94060465fa8c062",
    ),
]


@pytest.fixture
def at_t0() -> Iterator[None]:
    token = CLOCK.set(lambda: T0)
    yield
    CLOCK.reset(token)


async def test_a_thread_main_wrote_reads_back_and_is_written_the_same(
    make_store: StoreFactory, at_t0: None
) -> None:
    """Main's records load and resume; the same run writes the same
    bytes."""
    del at_t0
    g = _former()
    async with make_store() as store:
        for version, (parent, text, checksum) in enumerate(MAIN):
            data = text.encode()
            assert record_checksum("t", version, parent, data) == checksum
            record = Record("t", version, parent, data, checksum)
            await store.commit(record, expected_head=parent)
        loaded = (await g.load(store, "t")).unwrap()
        assert loaded.done
        assert loaded.state == Former(
            None, {"a": {2: "y", -2: "z"}}, {Color.RED: 2}, 2
        )
        history = [s.state for s in (await g.history(store, "t")).unwrap()]
        assert [s.n for s in history] == [0, 1, 2]
        assert history[1].by_int == {1: "x"}
        again = (await g.resume(store, "t", version=1)).unwrap()
        assert again.state == loaded.state
        fresh = stores.MemoryStore()
        await g.run(Former(), store=fresh, thread_id="t")
        written = [r.data.decode() for r in await fresh.records("t")]
        assert written == [text for _, text, _ in MAIN]
