"""``ambient()`` reads every ambient value in one go (without the
readers' frames, on the path every run takes): the same values the
readers give one by one, in a scope, a stream's step and a step made on
first use (a ``map_reduce`` item's)."""

from __future__ import annotations

from typing import Any

import anyio

from returns.result import Success

from pipeline import Context, Message, handler, stream
from pipeline._offload import current_offload
from pipeline._step import STEP, Later
from pipeline.events import current_gate, current_sink
from pipeline.fold import Ambient, ambient, current_boundary
from pipeline.runs import current, scope
from pipeline.secrets import current_resolver


def one_by_one() -> tuple[Any, ...]:
    return (
        current(),
        current_sink(),
        current_gate(),
        current_resolver(),
        current_offload(),
        current_boundary(),
    )


def read(env: Ambient) -> tuple[Any, ...]:
    return (
        env.scope,
        env.sink,
        env.gate,
        env.resolver,
        env.offload,
        env.boundary,
    )


async def test_ambient_equals_the_readers() -> None:
    """Outside everything, in a scope, in a stream: the readers' values."""
    assert type(ambient()) is Ambient
    assert read(ambient()) == one_by_one()
    with scope(name="s"):
        assert ambient().scope is current() is not None
        assert read(ambient()) == one_by_one()
    seen: list[tuple[Any, ...]] = []

    @handler
    async def look(ctx: Context) -> Any:
        seen.append(read(ambient()))
        seen.append(one_by_one())
        return Success(ctx)

    async with stream(look, Context.of(Message.user("x"))) as events:
        async for _ in events:
            pass
    assert seen[0] == seen[1]
    assert seen[0][1] is not None  # the stream's sink


async def test_a_step_made_on_first_use_is_made_and_read() -> None:
    """A step made on first use (a map_reduce item's) is made once, when
    ambient() is read, and is the boundary current_boundary() gives."""
    made: list[object] = []

    def make() -> Any:
        made.append(object())
        return made[-1]

    token = STEP.set(Later(make))
    try:
        env = ambient()
        assert len(made) == 1
        assert env.boundary is made[0]
        assert current_boundary() is made[0]
        assert len(made) == 1
    finally:
        STEP.reset(token)
    assert ambient().boundary is None
    await anyio.lowlevel.checkpoint()
