"""Fields written by their declared type where the value's own class
would not do.

A field whose type holds one persistent vector (``PVector[T] | None``,
``PVector[T] | int``) is a log while it holds a vector, item by item, as
a ``PVector[T]`` field is (a reader took a log for no such field: the
run's records were committed, then no load, history or resume could read
them).  A dict
whose keys are not strings (``dict[Color, int]``) is written by its
declared type's hook, keys as JSON texts (the plain dict's hook kept the
keys as they were, and no record could be written).
"""

from __future__ import annotations

import enum

import attrs
import pytest

from pyrsistent import PVector, pvector
from returns.result import Result, Success

from pipeline import Graph, graph, handler
from pipeline.graph import END
from tests.servers import StoreFactory


@attrs.frozen
class Notes:
    """An optional log, and a vector-or-count."""

    seen: PVector[int] | None = None
    either: PVector[str] | int = 0
    n: int = 0


@handler(name="grow")
async def grow(s: Notes) -> Result[Notes, object]:
    seen = (s.seen or pvector()).append(s.n)
    either = pvector(["x"]) if s.n % 2 else s.n
    return Success(attrs.evolve(s, seen=seen, either=either, n=s.n + 1))


def _again(s: Notes) -> str:
    return "grow" if s.n < 4 else END


def _looping() -> Graph[Notes, object]:
    return (
        graph.builder(Notes)
        .node("grow", grow)
        .entry("grow")
        .route("grow", _again, to=["grow", END])
        .build()
    )


@pytest.mark.parametrize("start", [Notes(), Notes(seen=pvector([9]))])
async def test_an_optional_vector_field_round_trips(
    make_store: StoreFactory, start: Notes
) -> None:
    """Every record reads back: the thread loads, its history shows each
    state as it was, and a resume from any version goes on to the same
    end."""
    g = _looping()
    async with make_store() as store:
        done = (await g.run(start, store=store, thread_id="t")).unwrap()
        assert done.state.n == 4
        loaded = (await g.load(store, "t")).unwrap()
        assert loaded.state == done.state
        states = [s.state for s in (await g.history(store, "t")).unwrap()]
        assert states[0] == start
        assert states[-1] == done.state
        for version in range(len(states)):
            again = await g.resume(store, "t", version=version)
            assert again.unwrap().state.seen == done.state.seen


class Color(enum.Enum):
    """Keys that are not strings."""

    RED = "red"
    BLUE = "blue"


@attrs.frozen
class Tally:
    """Counts by color, and by position."""

    by_color: dict[Color, int] = attrs.field(factory=dict)
    by_spot: dict[tuple[int, int], str] = attrs.field(factory=dict)
    n: int = 0


@handler(name="count")
async def count(s: Tally) -> Result[Tally, object]:
    color = Color.RED if s.n % 2 else Color.BLUE
    by_color = {**s.by_color, color: s.by_color.get(color, 0) + 1}
    by_spot = {**s.by_spot, (s.n, -s.n): color.value}
    return Success(Tally(by_color, by_spot, s.n + 1))


def _counting() -> Graph[Tally, object]:
    return (
        graph.builder(Tally)
        .node("count", count)
        .entry("count")
        .route(
            "count", lambda s: "count" if s.n < 3 else END, to=["count", END]
        )
        .build()
    )


async def test_a_dict_keyed_by_enums_or_tuples_round_trips(
    make_store: StoreFactory,
) -> None:
    """Every record reads back, keys of their own types."""
    g = _counting()
    async with make_store() as store:
        done = (await g.run(Tally(), store=store, thread_id="t")).unwrap()
        assert done.state.by_color == {Color.BLUE: 2, Color.RED: 1}
        loaded = (await g.load(store, "t")).unwrap()
        assert loaded.state == done.state
        states = [s.state for s in (await g.history(store, "t")).unwrap()]
        assert states[-1] == done.state
        assert all(type(k) is tuple for k in states[-1].by_spot)


@handler(name="toggle")
async def toggle(s: Notes) -> Result[Notes, object]:
    seen = None if s.n % 3 == 2 else (s.seen or pvector()).append(s.n)
    return Success(attrs.evolve(s, seen=seen, n=s.n + 1))


async def test_an_optional_log_that_goes_none_and_back_round_trips(
    make_store: StoreFactory,
) -> None:
    """An optional log field is a log while it holds a vector (records hold
    only what each step appended), ``None`` in between, then a log that
    starts anew: every version reads back as it was."""
    g = (
        graph.builder(Notes)
        .node("toggle", toggle)
        .entry("toggle")
        .route(
            "toggle",
            lambda s: "toggle" if s.n < 7 else END,
            to=["toggle", END],
        )
        .build()
    )
    async with make_store() as store:
        done = (await g.run(Notes(), store=store, thread_id="t")).unwrap()
        states = [s.state for s in (await g.history(store, "t")).unwrap()]
        expected = [Notes()]
        for _ in range(7):
            expected.append((await toggle(expected[-1])).unwrap())
        assert states == expected
        assert done.state == expected[-1]
