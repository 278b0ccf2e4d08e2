"""Folds inside the steps of checkpointed folds: what a red-team pass found.

Each test is one way a nested fold could lose or repeat committed work, or
let an approval slip past: pauses through tools, unstable inputs, a changed
nested machine, a handoff on an agent's last turn.
"""

from __future__ import annotations

import itertools
import uuid

from typing import Any

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
    fold,
    graph,
    handler,
    stores,
    swarm,
    tool,
)
from pipeline.agents import AgentRun, as_tool
from pipeline.errors import ConstructionError
from pipeline.failures import IncompatibleGraph
from pipeline.fold import Continue, Interrupt, Status, Transition
from pipeline.graph import END
from pipeline.history import summarizing, window
from pipeline.models import ModelRequest, ModelResponse
from pipeline.swarm import SwarmState
from pipeline.testing import Reply, ScriptedModel


class Crash(BaseException):
    """The process dies here: nothing catches it."""


class Opaque:
    """A type no converter knows."""


@attrs.frozen
class Bad:
    """A state with a field of that type."""

    thing: Opaque


def charger(charges: list[int]) -> Tool:
    """A tool with an external side effect: each call is one charge."""

    @tool
    async def charge(amount: int) -> str:
        """Charge the card."""
        charges.append(amount)
        return "charged"

    return charge


def charge_then_answer(armed: list[bool]) -> Any:
    """A model that charges once, then (once armed) dies before answering."""

    def step(req: ModelRequest) -> ModelResponse:
        if not any(m.role.value == "tool" for m in req.messages):
            return Reply.tool_call("charge", {"amount": 100}, call_id="c1")
        if armed[0]:
            armed[0] = False
            raise Crash
        return Reply.text("charged you 100")

    return step


async def test_a_pause_inside_a_tool_pauses_the_enclosing_run() -> None:
    """A swarm used as an agent's tool that interrupts for approval pauses
    the checkpointed run around the agent; the answer resumes it, and the
    payment happens once, after approval."""
    paid: list[int] = []

    async def approve(t: Transition[SwarmState[None]]) -> fold.Decision:
        return Continue() if t.answer == "yes" else Interrupt("refund 500?")

    def refunds() -> Swarm[None]:
        desk = Agent(
            "desk", ScriptedModel(Reply.tool_call("transfer_to_payer"))
        )
        payer = Agent(
            "payer",
            ScriptedModel(
                Reply.tool_call("charge", {"amount": 500}), Reply.text("paid")
            ),
            tools=[charger(paid)],
        )
        return (
            swarm.builder()
            .agent("desk", desk, handoffs=["payer"])
            .agent("payer", payer)
            .entry("desk")
            .before_handoff(approve)
            .build(name="refunds")
        )

    def front(*replies: ModelResponse) -> Swarm[None]:
        agent = Agent(
            "front", ScriptedModel(*replies), tools=[as_tool(refunds())]
        )
        return swarm.builder().agent("front", agent).entry("front").build()

    store = stores.MemoryStore()
    ask = Reply.tool_call("refunds", {"prompt": "refund 500"}, call_id="r1")
    first = front(ask)
    paused = (
        await first.run(
            Context.of(Message.user("refund me")), store=store, thread_id="t"
        )
    ).unwrap()
    assert paused.status is Status.INTERRUPTED
    assert paused.pending is not None
    assert paused.pending.question == "refund 500?"
    assert paid == []
    # The turn in flight (the one whose tool paused) asks its model again.
    again = front(ask, Reply.text("Your refund is done."))
    done = (await again.resume(store, "t", answer="yes")).unwrap()
    assert done.done
    assert paid == [500]
    assert done.state.messages[-1].content == "Your refund is done."


async def test_a_pause_inside_a_tool_outside_checkpoints_is_an_error_result() -> (
    None
):
    """Outside any checkpointed run there is nowhere to wait: the tool's
    pause is an error result the calling model sees."""

    async def ask(_: Transition[SwarmState[None]]) -> fold.Decision:
        return Interrupt("ok?")

    inner = (
        swarm.builder()
        .agent(
            "a",
            Agent("a", ScriptedModel(Reply.tool_call("transfer_to_b"))),
            handoffs=["b"],
        )
        .agent("b", Agent("b", ScriptedModel()))
        .entry("a")
        .before_handoff(ask)
        .build(name="inner")
    )
    model = ScriptedModel(
        Reply.tool_call("inner", {"prompt": "go"}), Reply.text("gave up")
    )
    out = (
        await Agent("outer", model, tools=[as_tool(inner)]).run(
            [Message.user("hi")]
        )
    ).unwrap()
    assert out.text == "gave up"
    assert model.requests[1].messages[-1].content.startswith("error:")


async def test_summarising_policy_does_not_repeat_committed_tool_calls() -> (
    None
):
    """A summary worded differently after a crash is not another input:
    the agent's committed turns are kept and its charge is not repeated."""
    charges: list[int] = []
    armed = [True]
    n = itertools.count()
    summariser = ScriptedModel(
        lambda _: Reply.text(f"summary #{next(n)}"), cycle=True
    )
    cashier = Agent(
        "cashier",
        ScriptedModel(charge_then_answer(armed), cycle=True),
        tools=[charger(charges)],
    )
    team = (
        swarm.builder()
        .agent(
            "cashier", cashier, history=summarizing(summariser, keep=window(1))
        )
        .entry("cashier")
        .build()
    )
    store = stores.MemoryStore()
    ctx = Context.of(
        Message.user("hello"), Message.assistant("hi"), Message.user("charge")
    )
    with pytest.raises(Crash):
        await team.run(ctx, store=store, thread_id="t")
    done = (await team.resume(store, "t")).unwrap()
    assert done.done
    assert charges == [100]


async def test_a_context_made_anew_on_each_attempt_is_the_same_input() -> None:
    """A node that builds a fresh context (a new run id each time) for a
    swarm still finds what the swarm committed before the crash."""
    charges: list[int] = []
    armed = [True]
    cashier = Agent(
        "cashier",
        ScriptedModel(charge_then_answer(armed), cycle=True),
        tools=[charger(charges)],
    )
    team = swarm.builder().agent("cashier", cashier).entry("cashier").build()

    @attrs.frozen
    class Order:
        receipt: str = ""

    @handler
    async def checkout(o: Order) -> Result[Order, Any]:
        ctx = Context.of(Message.user("charge me"), run_id=uuid.uuid4().hex)
        out = await team(ctx)
        if not isinstance(out, Success):
            return Failure(out.failure())
        return Success(Order(out.unwrap().messages[-1].content))

    g = (
        graph.builder(Order)
        .node("checkout", checkout)
        .entry("checkout")
        .edge("checkout", END)
        .build()
    )
    store = stores.MemoryStore()
    with pytest.raises(Crash):
        await g.run(Order(), store=store, thread_id="t")
    done = (await g.resume(store, "t")).unwrap()
    assert done.state.receipt == "charged you 100"
    assert charges == [100]


async def test_a_changed_nested_swarm_is_refused_on_resume() -> None:
    """A nested swarm whose version changed between a crash and the resume
    is IncompatibleGraph, not a fresh start that charges again."""
    charges: list[int] = []

    def outer(version: str, armed: list[bool]) -> Graph[Context, Any]:
        cashier = Agent(
            "cashier",
            ScriptedModel(charge_then_answer(armed), cycle=True),
            tools=[charger(charges)],
        )
        team = (
            swarm.builder()
            .agent("cashier", cashier)
            .entry("cashier")
            .build(name="team", version=version)
        )
        return (
            graph.builder(Context)
            .node("team", team)
            .entry("team")
            .edge("team", END)
            .build()
        )

    store = stores.MemoryStore()
    with pytest.raises(Crash):
        await outer("1", [True]).run(
            Context.of(Message.user("x")), store=store, thread_id="t"
        )
    out = await outer("2", [False]).resume(store, "t")
    assert isinstance(out, Failure)
    assert isinstance(out.failure(), IncompatibleGraph)
    assert charges == [100]


async def test_a_router_hands_off_on_its_only_turn() -> None:
    """An accepted transfer needs no further model call: a router with
    max_turns=1 hands over instead of hitting the turn limit."""
    router = Agent(
        "router",
        ScriptedModel(Reply.tool_call("transfer_to_billing")),
        max_turns=1,
    )
    billing = Agent("billing", ScriptedModel(Reply.text("billing here")))
    team = (
        swarm.builder()
        .agent("router", router, handoffs=["billing"])
        .agent("billing", billing)
        .entry("router")
        .build()
    )
    out = (await team(Context.of(Message.user("charged twice")))).unwrap()
    assert out.messages[-1].content == "billing here"


async def test_a_handler_agent_node_reports_its_usage_and_turns() -> None:
    """A swarm as a graph agent node: the run handed to *update* counts its
    model calls and sums their usage."""
    seen: list[AgentRun] = []
    a = Agent("a", ScriptedModel(Reply.tool_call("transfer_to_b")))
    b = Agent("b", ScriptedModel(Reply.text("done")))
    team = (
        swarm.builder()
        .agent("a", a, handoffs=["b"])
        .agent("b", b)
        .entry("a")
        .build()
    )

    def keep(c: Context, run: AgentRun) -> Context:
        seen.append(run)
        return c.append(*run.messages)

    g = (
        graph.builder(Context)
        .agent("team", team, messages=lambda c: c.messages, update=keep)
        .entry("team")
        .edge("team", END)
        .build()
    )
    await g(Context.of(Message.user("hi")))
    (run,) = seen
    assert run.turns == 2
    assert run.usage.total_tokens > 0


async def test_a_state_type_without_a_converter_fails_at_build() -> None:
    """A state field no converter knows is a ConstructionError at build(),
    naming the types, not a raw cattrs error."""

    @handler
    async def noop(s: Bad) -> Result[Bad, str]:
        return Success(s)

    with pytest.raises(ConstructionError, match=r"Bad.*Opaque"):
        graph.builder(Bad).node("n", noop).entry("n").edge("n", END).build()
