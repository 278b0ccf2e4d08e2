"""A persistent vector in a field that is not a log (``PVector[T] | None``,
``PVector[T] | int``): written whole, read back as its declared type.

A field declared ``PVector[T]`` (or ``Any``) is stored as a log, item by
item; a reader takes a log for no other field.  A vector in an optional
field was written as a log all the same: the run's records were
committed, then no load, history or resume could read them.
"""

from __future__ import annotations

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
