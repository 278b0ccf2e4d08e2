"""Type-level contract of graphs and map_reduce. Checked, never executed."""

# pyright: reportUnnecessaryTypeIgnoreComment=error

from __future__ import annotations

from typing import Never, assert_type

import attrs

from returns.result import Result, Success

from pipeline import Handler, graph, handler, map_reduce
from pipeline.errors import FanOutLimitExceeded


@attrs.frozen
class State:
    n: int = 0


class Boom: ...


@handler
async def bump(s: State) -> Result[State, Boom]:
    return Success(State(s.n + 1))


@handler
async def other(s: State) -> Result[State, KeyError]:
    return Success(s)


@handler
async def to_text(s: State) -> Result[str, Boom]:
    return Success(str(s.n))


b0 = graph.builder(State)
assert_type(b0, graph.Builder[State, Never])
b1 = b0.node("bump", bump)
assert_type(b1, graph.Builder[State, Boom])
b2 = (
    b1.node("other", other)
    .entry("bump")
    .edge("bump", "other")
    .edge("other", graph.END)
)
assert_type(b2, graph.Builder[State, Boom | KeyError])
g = b2.build()
assert_type(g, graph.Graph[State, Boom | KeyError])


async def use() -> None:
    out = await g.run(State())
    assert_type(
        out,
        Result[graph.Snapshot[State], Boom | KeyError | graph.GraphFailure],
    )
    await g.run(1)  # type: ignore[arg-type]  # the state type is checked


b0.node("text", to_text)  # type: ignore[arg-type]  # a node maps State to State
b0.route("bump", lambda s: s.name, to=["x"])  # type: ignore[attr-defined]  # routers see State


@handler
async def square(x: int) -> Result[int, Boom]:
    return Success(x * x)


def total(
    s: State, results: tuple[Result[int, Boom], ...]
) -> Result[State, KeyError]:
    return Success(State(sum(r.value_or(0) for r in results)))


def items(s: State) -> list[int]:
    return list(range(s.n))


mr = map_reduce(items, square, total)
assert_type(mr, Handler[State, State, Boom | KeyError | FanOutLimitExceeded])


def wrong_total(
    s: State, results: tuple[Result[str, Boom], ...]
) -> Result[State, KeyError]:
    return Success(s)


map_reduce(items, square, wrong_total)  # type: ignore[arg-type]  # reduce sees int results
