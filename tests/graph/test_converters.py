"""Field types the default converter does not know: refused at build(),
naming the class and the field; a converter hook makes them checkpoint."""

from __future__ import annotations

from pathlib import Path

import attrs
import cattrs
import pytest

from returns.result import Result, Success

from pipeline import Graph, graph, handler, stores
from pipeline.errors import ConstructionError
from pipeline.failures import InvalidState
from pipeline.fold import make_converter


class Money:
    """Not an attrs class: cattrs cannot guess how to write it."""

    def __init__(self, cents: int) -> None:
        self.cents = cents

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Money) and other.cents == self.cents

    def __hash__(self) -> int:
        return hash(self.cents)


@attrs.frozen
class Till:
    total: Money
    sales: int = 0


@handler
async def sell(t: Till) -> Result[Till, str]:
    return Success(Till(Money(t.total.cents + 250), t.sales + 1))


def till(converter: cattrs.Converter | None = None) -> Graph[Till, str]:
    return (
        graph.builder(Till)
        .node("sell", sell)
        .node("again", sell)
        .entry("sell")
        .edge("sell", "again")
        .edge("again", graph.END)
        .build(converter=converter)
    )


def test_an_unknown_field_type_is_refused_at_build() -> None:
    """build() names the class, the field and the type, and says how to
    register a hook."""
    with pytest.raises(ConstructionError) as info:
        till()
    message = str(info.value)
    assert "Till field 'total'" in message
    assert "Money" in message
    assert "build(converter=" in message


def money_converter() -> cattrs.Converter:
    conv = make_converter()

    def structure(value: object, _: type) -> Money:
        if type(value) is not int:
            msg = "cents must be an integer"
            raise TypeError(msg)
        return Money(value)

    conv.register_unstructure_hook(Money, lambda m: m.cents)
    conv.register_structure_hook(Money, structure)
    return conv


async def test_a_registered_hook_checkpoints_the_type(tmp_path: Path) -> None:
    """With hooks for Money, the graph checkpoints to SQLite, resumes from
    any version and loads equal states."""
    g = till(converter=money_converter())
    async with stores.SQLiteStore(tmp_path / "till.db") as store:
        done = (
            await g.run(Till(Money(0)), store=store, thread_id="t")
        ).unwrap()
        assert done.state == Till(Money(500), 2)
        history = (await g.history(store, "t")).unwrap()
        assert [s.state.total.cents for s in history] == [0, 250, 500]
        fork = (await g.fork(store, "t", version=1)).unwrap()
        again = (await g.resume(store, fork.thread_id)).unwrap()
        assert again.state == done.state


async def test_a_hook_that_does_not_round_trip_is_caught_at_commit() -> None:
    """A hook that loses information (writes Money as a string its
    structure hook refuses) is an InvalidState at the boundary: nothing
    committed."""
    conv = make_converter()
    conv.register_unstructure_hook(Money, lambda m: str(m.cents))
    conv.register_structure_hook(Money, lambda v, _: Money(int(v) + 1))
    g = till(converter=conv)
    store = stores.MemoryStore()
    out = await g.run(Till(Money(0)), store=store, thread_id="t")
    failure = out.failure()
    assert isinstance(failure, InvalidState)
    assert await store.head("t") is None
