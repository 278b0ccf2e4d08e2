"""``pipeline.interrupt`` in the tools of agents and inside nested folds
(issue 16, item 1): an agent node's tool, a swarm agent's tool, a
subgraph's node, an agent used as a tool."""

from __future__ import annotations

import attrs
import pytest

from pyrsistent import PVector, pvector
from returns.result import Result, Success

from pipeline import (
    Agent,
    Context,
    Graph,
    Message,
    Role,
    Tool,
    graph,
    handler,
    interrupt,
    map_reduce,
    swarm,
    tool,
)
from pipeline.agents import AgentRun, as_tool
from pipeline.errors import InvalidAnswer
from pipeline.fold import Status
from pipeline.graph import END
from pipeline.models import ModelRequest, ModelResponse
from pipeline.testing import Reply, ScriptedModel
from tests.servers import StoreFactory


@attrs.frozen
class Refund:
    """What the human answers about a refund."""

    approved: bool
    amount: int = 0


def refunder(paid: list[int], asked: list[int]) -> Tool:
    """A tool that asks before paying: each payment is one entry."""

    @tool
    async def refund(amount: int) -> str:
        """Refund the customer."""
        asked.append(amount)
        answer = await interrupt(
            f"refund {amount} EUR?", Refund, payload={"amount": amount}
        )
        if not answer.approved:
            return "the refund was declined"
        paid.append(answer.amount or amount)
        return f"refunded {answer.amount or amount}"

    return refund


def refund_then_answer(req: ModelRequest) -> ModelResponse:
    """Asks for a refund of 40 until a tool result is there, then says
    what the tool answered."""
    results = [m for m in req.messages if m.role is Role.TOOL]
    if not results:
        return Reply.tool_call("refund", {"amount": 40}, call_id="c1")
    return Reply.text(f"done: {results[-1].content}")


@attrs.frozen
class Desk:
    """Graph state for the agent node."""

    messages: PVector[Message] = attrs.field(factory=pvector)


def desk_graph(agent: Agent) -> Graph[Desk, object]:
    def see(d: Desk) -> PVector[Message]:
        return d.messages

    def keep(d: Desk, run: AgentRun) -> Desk:
        return attrs.evolve(d, messages=d.messages.extend(run.messages))

    return (
        graph.builder(Desk)
        .agent("desk", agent, messages=see, update=keep)
        .entry("desk")
        .edge("desk", END)
        .build()
    )


async def test_a_tool_of_an_agent_node_asks_and_gets_the_typed_answer(
    make_store: StoreFactory,
) -> None:
    """The tool's question pauses the graph; the answer (approved with an
    edited amount) reaches the tool, which pays once."""
    paid: list[int] = []
    asked: list[int] = []
    model = ScriptedModel(refund_then_answer, cycle=True)
    g = desk_graph(Agent("desk", model, tools=[refunder(paid, asked)]))
    async with make_store() as store:
        paused = (
            await g.run(
                Desk(pvector([Message.user("refund me")])),
                store=store,
                thread_id="t",
            )
        ).unwrap()
        assert paused.status is Status.INTERRUPTED
        assert paused.pending is not None
        assert paused.pending.question == "refund 40 EUR?"
        assert paused.pending.payload == {"amount": 40}
        assert paid == []
        done = (
            await g.resume(
                store,
                "t",
                answer=Refund(approved=True, amount=35),
                question=paused.question_id,
            )
        ).unwrap()
        assert done.status is Status.DONE
        assert paid == [35]
        assert done.state.messages[-1].content == "done: refunded 35"
    # The turn in flight asked its model again (its reply is not a record).
    assert asked == [40, 40]


async def test_an_invalid_answer_to_a_tool_question_asks_again(
    make_store: StoreFactory,
) -> None:
    paid: list[int] = []
    model = ScriptedModel(refund_then_answer, cycle=True)
    g = desk_graph(Agent("desk", model, tools=[refunder(paid, [])]))
    async with make_store() as store:
        await g.run(
            Desk(pvector([Message.user("refund me")])),
            store=store,
            thread_id="t",
        )
        with pytest.raises(InvalidAnswer, match=r"\$\.approved"):
            await g.resume(store, "t", answer={"approved": "maybe"})
        again = (await g.load(store, "t")).unwrap()
        assert again.status is Status.INTERRUPTED
        assert paid == []
        done = (
            await g.resume(store, "t", answer=Refund(approved=False))
        ).unwrap()
        assert done.state.messages[-1].content == (
            "done: the refund was declined"
        )
        assert paid == []


async def test_a_swarm_agents_tool_asks_and_gets_the_typed_answer(
    make_store: StoreFactory,
) -> None:
    paid: list[int] = []
    asked: list[int] = []
    agent = Agent(
        "desk",
        ScriptedModel(refund_then_answer, cycle=True),
        tools=[refunder(paid, asked)],
    )
    team = swarm.builder().agent("desk", agent).entry("desk").build()
    async with make_store() as store:
        paused = (
            await team.run(
                Context.of(Message.user("refund me")),
                store=store,
                thread_id="t",
            )
        ).unwrap()
        assert paused.status is Status.INTERRUPTED
        assert paused.pending is not None
        assert paused.pending.question == "refund 40 EUR?"
        assert paused.pending.payload == {"amount": 40}
        assert paid == []
        done = (
            await team.resume(
                store,
                "t",
                answer={"approved": True},
                question=paused.question_id,
            )
        ).unwrap()
        assert done.done
        assert paid == [40]
        assert done.state.messages[-1].content == "done: refunded 40"


@attrs.frozen
class Count:
    """State of the subgraph test."""

    n: int = 0
    trail: PVector[str] = attrs.field(factory=pvector)


async def test_a_question_in_a_subgraphs_node_pauses_the_outer_graph(
    make_store: StoreFactory,
) -> None:
    """A subgraph (used as a node) asks in one of its nodes: the outer
    graph pauses, the answer reaches the inner node, the inner nodes
    before it are not run again."""
    ran: list[str] = []

    @handler(name="first")
    async def first(c: Count) -> Result[Count, object]:
        ran.append("first")
        return Success(attrs.evolve(c, trail=c.trail.append("first")))

    @handler(name="ask")
    async def ask(c: Count) -> Result[Count, object]:
        ran.append("ask")
        n = await interrupt("how many?", int)
        return Success(attrs.evolve(c, n=n, trail=c.trail.append("ask")))

    inner: Graph[Count, object] = (
        graph.builder(Count)
        .node("first", first)
        .node("ask", ask)
        .entry("first")
        .edge("first", "ask")
        .edge("ask", END)
        .build(name="inner")
    )

    @handler(name="last")
    async def last(c: Count) -> Result[Count, object]:
        ran.append("last")
        return Success(attrs.evolve(c, trail=c.trail.append("last")))

    outer: Graph[Count, object] = (
        graph.builder(Count)
        .node("inner", inner)
        .node("last", last)
        .entry("inner")
        .edge("inner", "last")
        .edge("last", END)
        .build()
    )
    async with make_store() as store:
        paused = (
            await outer.run(Count(), store=store, thread_id="t")
        ).unwrap()
        assert paused.status is Status.INTERRUPTED
        assert paused.pending is not None
        assert paused.pending.question == "how many?"
        assert paused.pending.targets == ("inner",)
        done = (await outer.resume(store, "t", answer=7)).unwrap()
        assert done.status is Status.DONE
        assert done.state.n == 7
        assert list(done.state.trail) == ["first", "ask", "last"]
    assert ran == ["first", "ask", "ask", "last"]


async def test_a_question_in_an_agent_used_as_a_tool_pauses_the_caller(
    make_store: StoreFactory,
) -> None:
    """An agent used as a tool (by a swarm agent) whose own tool asks:
    the whole run pauses; the answer reaches the inner tool."""
    paid: list[int] = []
    clerk = Agent(
        "clerk",
        ScriptedModel(refund_then_answer, cycle=True),
        tools=[refunder(paid, [])],
    )

    def front_model(req: ModelRequest) -> ModelResponse:
        results = [m for m in req.messages if m.role is Role.TOOL]
        if not results:
            return Reply.tool_call(
                "clerk", {"prompt": "refund 40"}, call_id="k1"
            )
        return Reply.text(f"front: {results[-1].content}")

    front = Agent(
        "front", ScriptedModel(front_model, cycle=True), tools=[as_tool(clerk)]
    )
    team = swarm.builder().agent("front", front).entry("front").build()
    async with make_store() as store:
        paused = (
            await team.run(
                Context.of(Message.user("refund me")),
                store=store,
                thread_id="t",
            )
        ).unwrap()
        assert paused.status is Status.INTERRUPTED
        assert paused.pending is not None
        assert paused.pending.question == "refund 40 EUR?"
        assert paid == []
        done = (
            await team.resume(store, "t", answer=Refund(approved=True))
        ).unwrap()
        assert done.done
        assert paid == [40]
        assert done.state.messages[-1].content == ("front: done: refunded 40")


async def test_parallel_tool_calls_that_ask_are_asked_one_by_one(
    make_store: StoreFactory,
) -> None:
    """One reply, two refund calls: one question pending at a time, each
    answer reaches its own call, each approved refund is paid once (a
    call that got its answer keeps its result while the other asks)."""
    paid: list[int] = []

    def two_refunds(req: ModelRequest) -> ModelResponse:
        results = [m for m in req.messages if m.role is Role.TOOL]
        if not results:
            return Reply.tool_calls(
                ("refund", {"amount": 40}, "c1"),
                ("refund", {"amount": 7}, "c2"),
            )
        return Reply.text(" / ".join(m.content for m in results))

    agent = Agent(
        "desk",
        ScriptedModel(two_refunds, cycle=True),
        tools=[refunder(paid, [])],
    )
    team = swarm.builder().agent("desk", agent).entry("desk").build()
    answers = {
        "refund 40 EUR?": Refund(approved=True),
        "refund 7 EUR?": Refund(approved=False),
    }
    async with make_store() as store:
        first = (
            await team.run(
                Context.of(Message.user("refund both")),
                store=store,
                thread_id="t",
            )
        ).unwrap()
        assert first.pending is not None
        asked = [first.pending.question]
        second = (
            await team.resume(store, "t", answer=answers[asked[0]])
        ).unwrap()
        assert second.pending is not None
        asked.append(second.pending.question)
        assert sorted(asked) == sorted(answers)
        # The call answered first ran (its result is kept); the other waits.
        assert paid == ([40] if asked[0] == "refund 40 EUR?" else [])
        done = (
            await team.resume(store, "t", answer=answers[asked[1]])
        ).unwrap()
        assert done.done
        assert paid == [40]
        assert done.state.messages[-1].content == (
            "refunded 40 / the refund was declined"
        )


@attrs.frozen
class Batch:
    """State of the map_reduce test."""

    items: tuple[int, ...] = (1, 2, 3)
    total: int = 0


async def test_a_map_reduce_item_asks(make_store: StoreFactory) -> None:
    """An item of a map_reduce node asks: the run pauses; the answer
    reaches that item.  (The other items' outputs are kept: see
    tests/test_interrupt_fanout.py.)"""

    @handler(name="worth")
    async def worth(i: int) -> Result[int, object]:
        if i == 2:
            return Success(await interrupt(f"worth of item {i}?", int))
        return Success(i)

    def total(
        b: Batch, results: tuple[Result[int, object], ...]
    ) -> Result[Batch, object]:
        return Success(attrs.evolve(b, total=sum(r.unwrap() for r in results)))

    node = map_reduce(lambda b: b.items, worth, total)
    g: Graph[Batch, object] = (
        graph.builder(Batch)
        .node("sum", node)
        .entry("sum")
        .edge("sum", END)
        .build()
    )
    async with make_store() as store:
        paused = (await g.run(Batch(), store=store, thread_id="t")).unwrap()
        assert paused.pending is not None
        assert paused.pending.question == "worth of item 2?"
        done = (await g.resume(store, "t", answer=20)).unwrap()
        assert done.state.total == 24
