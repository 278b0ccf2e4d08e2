"""Field types the default converter does not know: refused at build(),
naming the class and the field; a converter hook makes them checkpoint."""

from __future__ import annotations

from pathlib import Path

import attrs
import cattrs
import pytest

from returns.result import Result, Success

from pipeline import (
    Context,
    Graph,
    Handler,
    Message,
    Usage,
    graph,
    handler,
    stores,
)
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


@handler
async def reply_badly(ctx: Context) -> Result[Context, str]:
    """A reply whose usage counts are bools (``attrs.evolve`` lets them
    through): the check refuses them."""
    return Success(
        ctx.append(attrs.evolve(Message.assistant("x"), usage=Usage(True, 0)))
    )


@handler
async def reply(ctx: Context) -> Result[Context, str]:
    return Success(ctx.append(Message.assistant("x")))


def talk(
    node: Handler[Context, Context, str],
    converter: cattrs.Converter | None = None,
) -> Graph[Context, str]:
    return (
        graph.builder(Context)
        .node("talk", node)
        .entry("talk")
        .edge("talk", graph.END)
        .build(converter=converter)
    )


async def test_messages_that_do_not_read_back_are_caught_at_commit() -> None:
    """Plain messages are compared where they are stored (no message built),
    but a message that would not read back equal is still refused: a bool
    where a count is, or a converter's own message hook that loses
    information."""
    store = stores.MemoryStore()
    out = await talk(reply_badly).run(
        Context.of(Message.user("hi")), store=store, thread_id="t"
    )
    failure = out.failure()
    assert isinstance(failure, InvalidState)
    assert failure.field.startswith("messages[")
    conv = make_converter()
    conv.register_structure_hook(
        Message, lambda v, _: Message.assistant("not what was written")
    )
    out = await talk(reply, conv).run(
        Context.of(Message.user("hi")), store=store, thread_id="u"
    )
    assert isinstance(out.failure(), InvalidState)
    assert await store.head("u") is None
    fine = await talk(reply).run(
        Context.of(Message.user("hi")), store=store, thread_id="v"
    )
    assert fine.unwrap().state.messages[-1] == Message.assistant("x")
