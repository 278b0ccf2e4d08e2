"""Swarms and graphs as nodes over another state: ``as_node`` hands
``update`` their typed final state, and ``update`` may fail."""

from __future__ import annotations

from pathlib import Path
from typing import Never

import attrs
import pytest

from returns.result import Failure, Result, Success

from pipeline import (
    Agent,
    Context,
    Graph,
    Message,
    Swarm,
    Tool,
    graph,
    handler,
    stores,
    swarm,
    tool,
)
from pipeline.failures import ModelError
from pipeline.fold import Continue, Decision, Interrupt, Status, Transition
from pipeline.graph import END, GraphFailure
from pipeline.models import ModelRequest, ModelResponse
from pipeline.swarm import SwarmFailure, SwarmState
from pipeline.testing import Reply, ScriptedModel


class Crash(BaseException):
    """The process dies here: nothing catches it."""


@attrs.frozen
class Refund:
    """The swarm's typed state: what its agents decided."""

    cap: int = 0
    amount: int = 0


@attrs.frozen
class Case:
    """The outer graph's state."""

    question: str
    cap: int = 50
    refunded: int = 0
    answer: str = ""


@attrs.frozen
class NoRefund:
    """The swarm ended without deciding an amount."""

    agent: str


def ask(case: Case) -> Context:
    return Context.of(Message.user(case.question))


def cap(case: Case) -> Refund:
    return Refund(cap=case.cap)


def settle_refund(
    case: Case, end: SwarmState[Refund]
) -> Result[Case, NoRefund]:
    """The decided amount into the case, or a typed failure."""
    if end.state.amount == 0:
        return Failure(NoRefund(end.active))
    return Success(
        attrs.evolve(
            case,
            refunded=end.state.amount,
            answer=end.conversation.messages[-1].content,
        )
    )


def cashier_team(model: ScriptedModel, *tools: Tool) -> Swarm[Refund]:
    cashier = Agent("cashier", model, tools=tools)
    return (
        swarm.builder(state=Refund())
        .agent("cashier", cashier, writable=["amount"])
        .entry("cashier")
        .build(name="refunds")
    )


def desk(team: Swarm[Refund]) -> Graph[Case, SwarmFailure | NoRefund]:
    return (
        graph.builder(Case)
        .node(
            "refunds",
            team.as_node(context=ask, state=cap, update=settle_refund),
        )
        .entry("refunds")
        .edge("refunds", END)
        .build()
    )


async def test_update_gets_the_swarms_typed_final_state() -> None:
    """The swarm starts from state=(outer); update sees its final state:
    the shared state its agents wrote, the conversation, who answered."""
    model = ScriptedModel(
        Reply.tool_call("read_state", {"field": "cap"}),
        Reply.tool_call("write_state", {"amount": 40}),
        Reply.text("refunded 40"),
    )
    done = (await desk(cashier_team(model)).run(Case("refund me"))).unwrap()
    assert done.state == Case("refund me", refunded=40, answer="refunded 40")
    assert model.requests[1].messages[-1].content == "50"  # the outer cap


async def test_a_failed_update_is_the_nodes_typed_failure() -> None:
    """An update's Failure is the graph's, typed; the swarm's own failure
    (a model error) is the node's too."""
    with ScriptedModel(Reply.text("no amount decided")) as model:
        out = await desk(cashier_team(model)).run(Case("refund me"))
    assert out.failure() == NoRefund("cashier")
    with ScriptedModel(Reply.error("down", status=503)) as model:
        down = await desk(cashier_team(model)).run(Case("refund me"))
    assert isinstance(down.failure(), ModelError)


async def test_as_node_is_a_handler_outside_graphs() -> None:
    """The node is a handler from the outer state to itself; without
    state= the swarm starts from its builder's state, and an update may
    return the new state itself."""

    def keep_answer(case: Case, end: SwarmState[Refund]) -> Case:
        return attrs.evolve(case, answer=end.conversation.messages[-1].content)

    with ScriptedModel(
        Reply.tool_call("read_state", {"field": "cap"}), Reply.text("hi")
    ) as model:
        node = cashier_team(model).as_node(context=ask, update=keep_answer)
        out = (await node(Case("hello"))).unwrap()
    assert out.answer == "hi"
    assert model.requests[1].messages[-1].content == "0"  # the builder's cap
    assert node.name == "refunds"


def charging_model(armed: list[bool]) -> ScriptedModel:
    """Decides and charges 30 in one reply, then (once armed) dies before
    answering."""

    def step(req: ModelRequest) -> ModelResponse:
        if not any(m.role.value == "tool" for m in req.messages):
            return Reply.tool_calls(
                ("write_state", {"amount": 30}, "c1"),
                ("charge", {"amount": 30}, "c2"),
            )
        if armed[0]:
            armed[0] = False
            raise Crash
        return Reply.text("refunded 30")

    return ScriptedModel(step, cycle=True)


async def test_a_crash_inside_the_nested_swarm_resumes_where_it_was(
    tmp_path: Path,
) -> None:
    """Checkpointed (SQLite): the process dies after the swarm's agent
    charged and wrote its state; the resumed run charges once, and update
    sees the state written before the crash."""
    charges: list[int] = []

    @tool
    async def charge(amount: int) -> str:
        """Charge the card."""
        charges.append(amount)
        return "charged"

    armed = [True]
    g = desk(cashier_team(charging_model(armed), charge))
    async with stores.SQLiteStore(tmp_path / "runs.db") as store:
        with pytest.raises(Crash):
            await g.run(Case("refund me"), store=store, thread_id="t")
        assert charges == [30]
        done = (await g.resume(store, "t")).unwrap()
    assert done.state.refunded == 30
    assert done.state.answer == "refunded 30"
    assert charges == [30]


# -- a graph over another state as a node --------------------------------------


@attrs.frozen
class Draft:
    """The subgraph's state."""

    text: str
    reviewed: int = 0


@attrs.frozen
class Rejected:
    """The subgraph's result is not fit to publish."""

    text: str


def reviewer(runs: list[str], crash_at: list[str]) -> Graph[Draft, Never]:
    """Two review passes; the one named in *crash_at* dies (once)."""

    @handler
    async def review(d: Draft) -> Result[Draft, Never]:
        name = f"review {d.reviewed}"
        runs.append(name)
        if name in crash_at:
            crash_at.remove(name)
            raise Crash
        return Success(Draft(d.text.upper(), d.reviewed + 1))

    return (
        graph.builder(Draft)
        .node("first", review)
        .node("second", review)
        .entry("first")
        .edge("first", "second")
        .edge("second", END)
        .build(name="review")
    )


@attrs.frozen
class Post:
    """The outer graph's state."""

    title: str
    body: str = ""


def draft_of(post: Post) -> Draft:
    return Draft(post.title)


def publish(post: Post, end: Draft) -> Result[Post, Rejected]:
    if end.reviewed < 2:
        return Failure(Rejected(end.text))
    return Success(attrs.evolve(post, body=end.text))


def newsroom(
    sub: Graph[Draft, Never],
) -> Graph[Post, GraphFailure | Rejected]:
    return (
        graph.builder(Post)
        .node("review", sub.as_node(state=draft_of, update=publish))
        .entry("review")
        .edge("review", END)
        .build()
    )


async def test_update_gets_the_subgraphs_typed_final_state() -> None:
    """A graph over Draft as a node of a graph over Post: update reads the
    final Draft; a Failure it returns is the outer run's."""
    runs: list[str] = []
    done = (await newsroom(reviewer(runs, [])).run(Post("hello"))).unwrap()
    assert done.state == Post("hello", body="HELLO")
    assert runs == ["review 0", "review 1"]

    def too_strict(post: Post, end: Draft) -> Result[Post, Rejected]:
        return Failure(Rejected(end.text))

    node = reviewer([], []).as_node(state=draft_of, update=too_strict)
    assert (await node(Post("x"))).failure() == Rejected("X")


async def test_a_crash_inside_the_subgraph_resumes_at_its_node(
    tmp_path: Path,
) -> None:
    """Checkpointed (SQLite): the process dies in the subgraph's second
    node; the resumed run does not run its first node again."""
    runs: list[str] = []
    g = newsroom(reviewer(runs, ["review 1"]))
    async with stores.SQLiteStore(tmp_path / "runs.db") as store:
        with pytest.raises(Crash):
            await g.run(Post("hello"), store=store, thread_id="t")
        done = (await g.resume(store, "t")).unwrap()
    assert done.state.body == "HELLO"
    assert runs == ["review 0", "review 1", "review 1"]


async def test_a_question_inside_the_nested_swarm_pauses_the_graph(
    tmp_path: Path,
) -> None:
    """A handoff gate of the nested swarm asks a question: the checkpointed
    graph pauses; the answer resumes it inside the swarm, and update gets
    the state the agent after the handoff wrote."""

    async def approve(t: Transition[SwarmState[Refund]]) -> Decision:
        return Continue() if t.answer == "yes" else Interrupt("refund?")

    def team() -> Swarm[Refund]:
        desk_agent = Agent(
            "desk", ScriptedModel(Reply.tool_call("transfer_to_payer"))
        )
        payer = Agent(
            "payer",
            ScriptedModel(
                Reply.tool_call("write_state", {"amount": 25}),
                Reply.text("paid 25"),
            ),
        )
        return (
            swarm.builder(state=Refund())
            .agent("desk", desk_agent, handoffs=["payer"])
            .agent("payer", payer, writable=["amount"])
            .entry("desk")
            .before_handoff(approve)
            .build(name="refunds")
        )

    async with stores.SQLiteStore(tmp_path / "runs.db") as store:
        paused = (
            await desk(team()).run(Case("refund"), store=store, thread_id="t")
        ).unwrap()
        assert paused.status is Status.INTERRUPTED
        assert paused.pending is not None
        assert paused.pending.question == "refund?"
        done = (await desk(team()).resume(store, "t", answer="yes")).unwrap()
    assert done.state == Case("refund", refunded=25, answer="paid 25")
