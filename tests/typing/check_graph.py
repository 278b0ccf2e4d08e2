"""Type-level contract of graphs and map_reduce. Checked, never executed."""

# pyright: reportUnnecessaryTypeIgnoreComment=error

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any, Literal, Never, assert_type

import attrs

from returns.result import Failure, Result, Success
from typing_extensions import TypeForm

import pipeline

from pipeline import (
    Agent,
    Graph,
    Handler,
    Message,
    fold,
    graph,
    handler,
    map_reduce,
    stores,
)
from pipeline.agents import AgentError, AgentRun
from pipeline.failures import FanOutLimitExceeded
from pipeline.graph import agent_node
from pipeline.testing import ScriptedModel


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
assert_type(b0, graph.GraphBuilder[State, Never])
b1 = b0.node("bump", bump)
assert_type(b1, graph.GraphBuilder[State, Boom])
b2 = (
    b1.node("other", other)
    .entry("bump")
    .edge("bump", "other")
    .edge("other", graph.END)
)
assert_type(b2, graph.GraphBuilder[State, Boom | KeyError])
g = b2.build()
assert_type(g, Graph[State, Boom | KeyError])


async def use() -> None:
    out = await g.run(State())
    assert_type(
        out,
        Result[fold.Snapshot[State], Boom | KeyError | graph.GraphFailure],
    )
    await g.run(1)  # type: ignore[arg-type]  # the state type is checked
    # A question's id binds an answer to it (a string, when one waits).
    snap = out.unwrap()
    assert_type(snap.question_id, str | None)
    store = stores.MemoryStore()
    again = await g.resume(store, "t", answer="yes", question="7-abc")
    assert_type(
        again,
        Result[fold.Snapshot[State], Boom | KeyError | graph.GraphFailure],
    )
    await g.resume(store, "t", answer="yes", question=7)  # type: ignore[arg-type]  # an id is a string
    # Several questions (fan-out branches, map_reduce items): by id.
    assert_type(snap.questions, Mapping[str, fold.Pending])
    for qid, asked in snap.questions.items():
        assert_type(qid, str)
        assert_type(asked.scope, str)
        assert_type(asked.waiting, tuple[fold.Pending, ...])
        await g.resume(store, "t", answer=1, question=qid)
    snap.questions["x"] = snap.pending  # type: ignore[index]  # read-only


# Drawings: SVG and DOT text; a highlight is a node's name.
assert_type(g.draw(), str)
assert_type(g.draw(highlight="bump"), str)
assert_type(g.dot(highlight=None), str)
assert_type(g._repr_svg_(), str | None)
g.draw(highlight=1)  # type: ignore[arg-type]  # a node's name
g.draw("bump")  # type: ignore[call-arg]  # highlight is keyword-only


async def gated(t: fold.Transition[State]) -> fold.Decision:
    return fold.Continue()


assert_type(
    b2.gate(gated, before="other"), graph.GraphBuilder[State, Boom | KeyError]
)
assert_type(
    b2.gate(gated, before=["bump", "other"]),
    graph.GraphBuilder[State, Boom | KeyError],
)
b2.gate(gated, before=3)  # type: ignore[arg-type]  # node names


b0.node("text", to_text)  # type: ignore[arg-type]  # a node maps State to State
b0.route("bump", lambda s: s.name, to=["x"])  # type: ignore[attr-defined]  # routers see State


def literal_router(s: State) -> Literal["bump", "__end__"]:
    return "bump" if s.n < 3 else "__end__"


# A router typed with the Literal of its targets needs no to=.
assert_type(b1.route("bump", literal_router), graph.GraphBuilder[State, Boom])


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


# -- map_reduce: async split and reduce, a split that may fail ------------------


async def items_later(s: State) -> list[int]:
    return list(range(s.n))


def items_or_not(s: State) -> Result[list[int], ValueError]:
    return Success(list(range(s.n))) if s.n >= 0 else Failure(ValueError())


async def total_later(
    s: State, results: tuple[Result[int, Boom], ...]
) -> Result[State, KeyError]:
    return total(s, results)


assert_type(
    map_reduce(items_later, square, total_later),
    Handler[State, State, Boom | KeyError | FanOutLimitExceeded],
)
assert_type(
    map_reduce(items_or_not, square, total),
    Handler[State, State, Boom | KeyError | ValueError | FanOutLimitExceeded],
)


def not_items(s: State) -> int:
    return s.n


map_reduce(not_items, square, total)  # type: ignore[arg-type]  # split gives no items


# -- map_reduce: a lazy split (a generator, an async generator) -----------------


def items_lazily(s: State) -> Iterator[int]:
    yield from range(s.n)


async def items_streamed(s: State) -> AsyncIterator[int]:
    for i in range(s.n):
        yield i


assert_type(
    map_reduce(items_lazily, square, total),
    Handler[State, State, Boom | KeyError | FanOutLimitExceeded],
)
assert_type(
    map_reduce(items_streamed, square, total),
    Handler[State, State, Boom | KeyError | FanOutLimitExceeded],
)


def strings_lazily(s: State) -> Iterator[str]:
    yield str(s.n)


map_reduce(strings_lazily, square, total)  # type: ignore[arg-type]  # square takes ints


# -- per-node caching ----------------------------------------------------------

policy = graph.CachePolicy[State](ttl=60, key=lambda s: s.n)
assert_type(policy, graph.CachePolicy[State])
cached_builder = graph.builder(State).node("bump", bump, cache=policy)
assert_type(cached_builder, graph.GraphBuilder[State, Boom])
assert_type(
    graph.builder(State).node(
        "bump", bump, cache=graph.CachePolicy(store=stores.MemoryCache())
    ),
    graph.GraphBuilder[State, Boom],
)
graph.CachePolicy[State](key=lambda s: s.missing)  # type: ignore[attr-defined]  # the key reads the state
graph.CachePolicy[State](ttl="60")  # type: ignore[arg-type]  # seconds
graph.builder(State).node("bump", bump, cache=graph.CachePolicy[int]())  # type: ignore[arg-type]  # a policy over another state
stores.MemoryCache(clock=1.0)  # type: ignore[arg-type]  # a clock is a function


async def _cache_in_file(store: stores.SQLiteStore) -> None:
    """Node outputs kept in the checkpoint store's file."""
    policy = graph.CachePolicy[State](ttl=60, store=stores.StoreCache(store))
    assert_type(policy, graph.CachePolicy[State])
    assert_type(await stores.StoreCache(store).get("k"), bytes | None)
    stores.StoreCache(store, clock=1.0)  # type: ignore[arg-type]  # a clock is a function
    stores.StoreCache(store, lambda: 1.0)  # type: ignore[call-arg]  # clock is keyword-only
    graph.CachePolicy[State](store=store)  # type: ignore[arg-type]  # a checkpoint store is not a cache


# -- pipeline.interrupt: the answer has the declared type ------------------


@attrs.frozen
class Approval:
    approved: bool
    note: str = ""


async def asks(s: State) -> State:
    answer = await pipeline.interrupt("ship?", Approval, payload=s)
    assert_type(answer, Approval)
    count = await pipeline.interrupt("how many?", int)
    assert_type(count, int)
    maybe = await pipeline.interrupt("how many, if any?", int | None)
    assert_type(maybe, int | None)
    pick = await pipeline.interrupt("which?", Literal["a", "b"])
    assert_type(pick, Literal["a", "b"])
    await pipeline.interrupt("ship?", 3)  # type: ignore[arg-type]  # a type, not a value
    await pipeline.interrupt(3, bool)  # type: ignore[arg-type]  # a question is text
    await pipeline.interrupt("ship?")  # type: ignore[call-arg]  # the answer's type is required
    await pipeline.interrupt("ship?", bool, True)  # type: ignore[call-arg]  # payload is keyword-only
    wrong: str = await pipeline.interrupt("ship?", Approval)  # type: ignore[arg-type]  # an Approval, not a str
    return State(count if answer.approved else s.n) if wrong else s


# -- a gate's Interrupt: the answer's declared type reaches apply ----------


def approved(s: State, a: Approval) -> State:
    return State(s.n + 1) if a.approved else s


async def typed_gate(t: fold.Transition[State]) -> fold.Decision:
    asked = fold.Interrupt("ship?", Approval, apply=approved)
    assert_type(asked, fold.Interrupt[State, Approval])
    assert_type(asked.kind, TypeForm[Approval] | None)
    assert_type(t.answer_as(int | None), int | None)
    assert_type(t.answer_as(Literal["yes", "no"]), Literal["yes", "no"] | None)
    optional = fold.Interrupt("how many, if any?", int | None)
    assert_type(optional, fold.Interrupt[Any, int | None])
    t.answer_as("yes")  # type: ignore[arg-type]  # a type, not a value
    untyped = fold.Interrupt("ship?")
    assert_type(untyped, fold.Interrupt)
    checked = fold.Interrupt("how many?", int)
    assert_type(checked, fold.Interrupt[Any, int])
    fold.Interrupt("ship?", int, apply=approved)  # type: ignore[arg-type]  # apply takes the declared answer type
    fold.Interrupt("ship?", Approval, approved)  # type: ignore[call-overload]  # apply is keyword-only
    fold.Interrupt("ship?", Approval, apply=lambda s: s)  # type: ignore[arg-type,misc]  # apply takes (state, answer)
    wrong: fold.Interrupt[State, str] = fold.Interrupt("ship?", Approval)  # type: ignore[arg-type]  # the declared type is Approval
    del wrong, checked
    return asked if t.answer is None else untyped


graph.builder(State).gate(typed_gate)


# -- agent nodes: update may return a Result ---------------------------------


@attrs.frozen
class Desk:
    note: str = ""


@attrs.frozen
class Unreadable:
    agent: str


def fold_in(d: Desk, run: AgentRun) -> Desk:
    return attrs.evolve(d, note=run.text)


def decode_note(d: Desk, run: AgentRun) -> Result[Desk, Unreadable]:
    if not run.text:
        return Failure(Unreadable(run.agent))
    return Success(attrs.evolve(d, note=run.text))


def see_nothing(_: Desk) -> list[Message]:
    return []


def decode_wrong(_: Desk, run: AgentRun) -> Result[int, Unreadable]:
    return Success(len(run.text))


desk_agent = Agent("desk", ScriptedModel())
plain_node = graph.builder(Desk).agent(
    "desk", desk_agent, messages=see_nothing, update=fold_in
)
assert_type(plain_node, graph.GraphBuilder[Desk, AgentError])
decoding = graph.builder(Desk).agent(
    "desk", desk_agent, messages=see_nothing, update=decode_note
)
assert_type(decoding, graph.GraphBuilder[Desk, AgentError | Unreadable])
assert_type(
    agent_node(desk_agent, messages=see_nothing, update=decode_note),
    Handler[Desk, Desk, AgentError | Unreadable],
)
graph.builder(Desk).agent(
    "desk",
    desk_agent,
    messages=see_nothing,
    update=decode_wrong,  # type: ignore[arg-type]  # not a Desk
)
