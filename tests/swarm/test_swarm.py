"""Swarms: the seed's behaviour, the allow-list, exact limits, gates,
checkpoints, composition, drawing and validation."""

from __future__ import annotations

import logging

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import anyio
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
    Swarm,
    ToolCall,
    fold,
    graph,
    handler,
    stores,
    swarm,
    tool,
)
from pipeline.agents import as_tool
from pipeline.errors import GraphDefect, SwarmDefects
from pipeline.events import (
    Handoff,
    MessageComplete,
)
from pipeline.failures import (
    CheckpointDecodeError,
    ConcurrentModification,
    HistoryBudgetExceeded,
    IncompatibleGraph,
    ModelError,
    RunPaused,
    RunStopped,
)
from pipeline.fold import (
    Continue,
    Decision,
    Edit,
    Interrupt,
    Status,
    Stop,
    Transition,
)
from pipeline.graph import END
from pipeline.history import token_budget, window
from pipeline.middleware import log, retry
from pipeline.models import ModelRequest, ModelResponse
from pipeline.stores import Lease, Record
from pipeline.swarm import SwarmState
from pipeline.testing import Reply, ScriptedModel
from tests.stores import CommitResult, DelegatingStore
from tests.swarm.helpers import (
    PREFIX,
    Mission,
    Step,
    ask,
    contents,
    handoffs,
    offered,
    refused,
    streamed,
    transfer,
    transfers_offered,
)


T = TypeVar("T")

SPECIALIST = "I'm the specialist. Here's your answer."


def pair(dispatcher: ScriptedModel, specialist: ScriptedModel) -> Swarm[None]:
    """dispatcher (may hand off to specialist) and specialist."""
    return (
        swarm.builder()
        .agent(
            "dispatcher",
            Agent("dispatcher", dispatcher),
            handoffs=["specialist"],
        )
        .agent("specialist", Agent("specialist", specialist))
        .entry("dispatcher")
        .build()
    )


def trio_of_agents(
    a: ScriptedModel, b: ScriptedModel, c: ScriptedModel
) -> Swarm[None]:
    """a may hand off to b only; b to c only; c to nobody."""
    return (
        swarm.builder()
        .agent("a", Agent("a", a), handoffs=["b"])
        .agent("b", Agent("b", b), handoffs=["c"])
        .agent("c", Agent("c", c))
        .entry("a")
        .build()
    )


# -- the seed's tests, ported -------------------------------------------------


async def test_no_transfer_returns_the_entry_agents_text() -> None:
    """An entry agent that answers without transferring gives the answer."""
    entry = ScriptedModel(Reply.text("handled it"))
    other = ScriptedModel()
    team = pair(entry, other)
    out = (await team(ask("hi"))).unwrap()
    assert contents(out.messages) == ["hi", "handled it"]
    assert out.messages[-1].name == "dispatcher"
    assert other.requests == []
    entry.assert_consumed()


async def test_single_transfer_the_specialists_answer_ends_the_run() -> None:
    """After an accepted transfer the dispatcher is not asked again: the
    specialist's answer is the last message and no fallback text appears."""
    dispatcher = ScriptedModel(
        transfer("specialist"), Reply.text("fallback"), strict=False
    )
    specialist = ScriptedModel(Reply.text("specialist here"))
    out = (await pair(dispatcher, specialist)(ask("help"))).unwrap()
    assert out.messages[-1].content == "specialist here"
    assert "fallback" not in contents(out.messages)
    assert len(dispatcher.requests) == 1
    assert dispatcher.remaining == 1
    assert [m.role for m in out.messages] == [
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
        Role.ASSISTANT,
    ]
    assert out.messages[2].content == "Transferring to specialist..."


async def test_ping_pong_stops_after_exactly_max_handoffs() -> None:
    """a and b always transfer; with max_handoffs=2 exactly two handoffs
    happen and a, holding the conversation again, answers."""
    a = ScriptedModel(transfer("b"), Reply.text("a-done"))
    b = ScriptedModel(transfer("a"))
    team = (
        swarm.builder()
        .agent("a", Agent("a", a), handoffs=["b"])
        .agent("b", Agent("b", b), handoffs=["a"])
        .entry("a")
        .limits(swarm.SwarmLimits(max_handoffs=2))
        .build()
    )
    events, result = await streamed(team, ask("go"))
    out = result.unwrap()
    assert out.messages[-1].content == "a-done"
    assert handoffs(events) == [Handoff("a", "b", 1), Handoff("b", "a", 2)]
    assert transfers_offered(a.requests[0]) == ["transfer_to_b"]
    assert transfers_offered(a.requests[1]) == []
    a.assert_consumed()
    b.assert_consumed()


async def test_write_state_sets_the_typed_state() -> None:
    """write_state inside a swarm agent changes the swarm's typed state."""
    model = ScriptedModel(
        Reply.tool_call("write_state", {"mission": "accomplished"}),
        Reply.text("done"),
    )
    team = (
        swarm.builder(state=Mission())
        .agent("solo", Agent("solo", model), writable=["mission"])
        .entry("solo")
        .build()
    )
    snap = (await team.run(ask("go"))).unwrap()
    assert snap.state.state == Mission("accomplished")
    assert snap.state.messages[2].content == "state updated: mission"
    assert team.initial == Mission()  # the builder's state is untouched


async def test_write_state_after_a_handoff_is_kept() -> None:
    """The agent taking over writes the same typed state the first one saw."""
    first = ScriptedModel(
        Reply.tool_call("write_state", {"mission": "half"}),
        transfer("second"),
    )
    second = ScriptedModel(
        Reply.tool_call("read_state", {"field": "mission"}),
        Reply.tool_call("write_state", {"mission": "all"}),
        Reply.text("finished"),
    )
    team = (
        swarm.builder(state=Mission())
        .agent(
            "first",
            Agent("first", first),
            handoffs=["second"],
            writable=["mission"],
        )
        .agent("second", Agent("second", second), writable=["mission"])
        .entry("first")
        .build()
    )
    snap = (await team.run(ask("go"))).unwrap()
    assert snap.state.state == Mission("all")
    assert second.requests[1].messages[-1].content == '"half"'


async def test_run_state_overrides_the_builders_state() -> None:
    """run(state=...) starts from that state instead of the builder's."""
    model = ScriptedModel(
        Reply.tool_call("read_state", {"field": "mission"}), Reply.text("ok")
    )
    team = (
        swarm.builder(state=Mission("default"))
        .agent("solo", Agent("solo", model))
        .entry("solo")
        .build()
    )
    snap = (await team.run(ask("go"), state=Mission("given"))).unwrap()
    assert model.requests[1].messages[-1].content == '"given"'
    assert snap.state.state == Mission("given")


async def test_without_a_policy_the_agent_receives_exactly_the_input() -> None:
    """No history policy: the entry agent sees its instructions as a system
    message, then exactly the input messages."""
    model = ScriptedModel(Reply.text("ok"))
    team = (
        swarm.builder()
        .agent("solo", Agent("solo", model, instructions="Route."))
        .entry("solo")
        .build()
    )
    history = (
        Message.user("one"),
        Message.assistant("two"),
        Message.user("three"),
    )
    await team(Context.of(*history))
    assert tuple(model.requests[0].messages) == (
        Message.system("Route."),
        *history,
    )


async def test_window_2_on_the_specialist_shows_two_user_messages() -> None:
    """window(2) on the specialist: it receives exactly two user messages
    (the last two turns, with the transfer that reached it)."""
    dispatcher = ScriptedModel(transfer("specialist"))
    specialist = ScriptedModel(Reply.text("ok"))
    team = (
        swarm.builder()
        .agent(
            "dispatcher",
            Agent("dispatcher", dispatcher),
            handoffs=["specialist"],
        )
        .agent(
            "specialist", Agent("specialist", specialist), history=window(2)
        )
        .entry("dispatcher")
        .build()
    )
    history = (
        Message.user("u1"),
        Message.assistant("a1"),
        Message.user("u2"),
        Message.assistant("a2"),
        Message.user("u3"),
    )
    out = (await team(Context.of(*history))).unwrap()
    seen = tuple(specialist.requests[0].messages)
    users = [m.content for m in seen if m.role is Role.USER]
    assert users == ["u2", "u3"]
    assert contents(seen[:3]) == ["u2", "a2", "u3"]
    assert seen[-1].content == "Transferring to specialist..."
    # The policy selects a view; the full history is kept.
    assert contents(out.messages[:5]) == ["u1", "a1", "u2", "a2", "u3"]
    # The dispatcher had no policy: it saw everything.
    assert tuple(dispatcher.requests[0].messages) == history


@attrs.frozen
class Tail:
    """A history policy keeping the last *n* messages."""

    n: int

    async def select(
        self, messages: Sequence[Message], /
    ) -> Result[tuple[Message, ...], ModelError]:
        return Success(tuple(messages)[-self.n :])


async def test_tail_policy_gives_a_suffix_of_at_most_n_messages() -> None:
    """A tail(2) policy on the specialist: it receives the dispatcher's
    transfer call and its result, nothing older."""
    dispatcher = ScriptedModel(transfer("specialist"))
    specialist = ScriptedModel(Reply.text("ok"))
    team = (
        swarm.builder()
        .agent(
            "dispatcher",
            Agent("dispatcher", dispatcher),
            handoffs=["specialist"],
        )
        .agent("specialist", Agent("specialist", specialist), history=Tail(2))
        .entry("dispatcher")
        .build()
    )
    out = (await team(ask("a", "b", "c"))).unwrap()
    seen = tuple(specialist.requests[0].messages)
    assert seen == tuple(out.messages[3:5])
    assert seen[0].tool_calls[0].name == "transfer_to_specialist"


async def test_the_entry_agents_policy_applies_on_its_first_turn() -> None:
    """A history policy on the entry agent selects its view from the start."""
    model = ScriptedModel(Reply.text("ok"))
    team = (
        swarm.builder()
        .agent("solo", Agent("solo", model), history=window(1))
        .entry("solo")
        .build()
    )
    out = (await team(ask("u1", "u2", "u3"))).unwrap()
    assert contents(model.requests[0].messages) == ["u3"]
    assert contents(out.messages) == ["u1", "u2", "u3", "ok"]


async def test_the_agents_own_policy_unless_the_builder_gives_one() -> None:
    """An agent's own history policy is used in a swarm; a policy given to
    the builder replaces it."""
    own = ScriptedModel(Reply.text("ok"))
    team = (
        swarm.builder()
        .agent("solo", Agent("solo", own, history=window(1)))
        .entry("solo")
        .build()
    )
    await team(ask("u1", "u2", "u3"))
    assert contents(own.requests[0].messages) == ["u3"]
    replaced = ScriptedModel(Reply.text("ok"))
    team = (
        swarm.builder()
        .agent(
            "solo", Agent("solo", replaced, history=window(1)), history=Tail(2)
        )
        .entry("solo")
        .build()
    )
    await team(ask("u1", "u2", "u3"))
    assert contents(replaced.requests[0].messages) == ["u2", "u3"]


async def test_after_a_transfer_the_specialist_sees_the_call_and_result() -> (
    None
):
    """The specialist's last received messages are the dispatcher's reply
    (its text and transfer call) and the transfer's result."""
    call = ToolCall("x1", "transfer_to_specialist", "{}")
    dispatcher = ScriptedModel(
        ModelResponse(
            Message.assistant("dispatching now", tool_calls=[call]),
            "tool_calls",
        )
    )
    specialist = ScriptedModel(Reply.text("specialist done"))
    await pair(dispatcher, specialist)(ask("help"))
    last_two = tuple(specialist.requests[0].messages)[-2:]
    assert last_two[0].role is Role.ASSISTANT
    assert last_two[0].name == "dispatcher"
    assert last_two[0].content == "dispatching now"
    assert last_two[0].tool_calls == (call,)
    assert last_two[1] == Message.tool(
        "Transferring to specialist...",
        tool_call_id="x1",
        name="transfer_to_specialist",
        agent="dispatcher",
    )


async def test_example_new_swarm() -> None:
    """The seed's ExampleNewSwarm: the handler routes, the specialist
    answers "I'm the specialist. Here's your answer."."""
    handler_agent = Agent(
        "handler",
        ScriptedModel(Reply.tool_call("transfer_to_specialist")),
        description="Routes requests to the right specialist.",
    )
    specialist = Agent(
        "specialist",
        ScriptedModel(Reply.text(SPECIALIST)),
        description="Handles specialized queries.",
    )
    team = (
        swarm.builder()
        .agent("handler", handler_agent, handoffs=["specialist"])
        .agent("specialist", specialist)
        .entry("handler")
        .limits(swarm.SwarmLimits(max_handoffs=4))
        .build()
    )
    out = (await team(Context.of(Message.user("help me")))).unwrap()
    assert out.messages[-1].content == SPECIALIST


async def test_transfer_tool_description_comes_from_the_target() -> None:
    """Each transfer tool is described by its target's description, or by
    the default sentence when it has none."""
    model = ScriptedModel(Reply.text("ok"))
    team = (
        swarm.builder()
        .agent("a", Agent("a", model), handoffs=["b", "c"])
        .agent("b", Agent("b", ScriptedModel(), description="Billing."))
        .agent("c", Agent("c", ScriptedModel()), description="Tech help.")
        .entry("a")
        .build()
    )
    await team(ask("x"))
    tools = {t.name: t.description for t in model.requests[0].tools}
    assert tools == {
        "transfer_to_b": "Billing.",
        "transfer_to_c": "Tech help.",
    }


async def test_tools_offered_in_order_own_tools_override() -> None:
    """Transfer tools for the allow-list, then read_state/write_state, then
    the agent's own tools; an own tool replaces a same-named one."""

    @tool(name="read_state")
    async def mine(field: str) -> str:
        """My own reader."""
        return f"mine:{field}"

    @tool
    async def lookup(key: str) -> str:
        """Look up."""
        return key

    model = ScriptedModel(
        Reply.tool_call("read_state", {"field": "mission"}), Reply.text("ok")
    )
    team = (
        swarm.builder(state=Mission())
        .agent(
            "a",
            Agent("a", model, tools=[mine, lookup]),
            handoffs=["c", "b"],
            writable=["mission"],
        )
        .agent("b", Agent("b", ScriptedModel()))
        .agent("c", Agent("c", ScriptedModel()))
        .entry("a")
        .build()
    )
    await team(ask("x"))
    assert offered(model.requests[0]) == [
        "transfer_to_c",
        "transfer_to_b",
        "read_state",
        "write_state",
        "lookup",
    ]
    assert model.requests[1].messages[-1].content == "mine:mission"


# -- the allow-list -----------------------------------------------------------

BAD_TRANSFERS = [
    pytest.param("transfer_to_c", id="outside-the-list"),
    pytest.param("transfer_to_a", id="itself"),
    pytest.param("transfer_to_zed", id="unknown"),
    pytest.param("transfer_to_", id="empty-name"),
    pytest.param("transfer_to_bad name!", id="bad-characters"),
    pytest.param("transfer_to_" + "b" * 60, id="too-long"),
    pytest.param("transfer_to_B", id="wrong-case"),
    pytest.param("transfer_to_b\n", id="trailing-newline"),
]


@pytest.mark.parametrize("bad", BAD_TRANSFERS)
async def test_refused_transfer_is_an_error_and_the_agent_answers(
    bad: str,
) -> None:
    """A transfer outside the allow-list gets an error result the model
    sees; nothing is handed off and the agent answers itself."""
    a = ScriptedModel(Reply.tool_call(bad), Reply.text("a answers"))
    b, c = ScriptedModel(), ScriptedModel()
    events, result = await streamed(trio_of_agents(a, b, c), ask("go"))
    out = result.unwrap()
    assert handoffs(events) == []
    assert [m.role for m in out.messages] == [
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
        Role.ASSISTANT,
    ]
    assert refused(out.messages[2])
    assert out.messages[2].name == bad
    assert out.messages[-1].content == "a answers"
    # The model saw the refusal on its next call.
    assert a.requests[1].messages[-1] == out.messages[2]
    assert b.requests == []
    assert c.requests == []


@pytest.mark.parametrize("bad", BAD_TRANSFERS)
async def test_after_a_refusal_a_correct_transfer_goes_through(
    bad: str,
) -> None:
    """A refused transfer leaves the agent in charge; its next, allowed
    transfer hands off once."""
    a = ScriptedModel(Reply.tool_call(bad), transfer("b"))
    b = ScriptedModel(Reply.text("b answers"))
    c = ScriptedModel()
    team = trio_of_agents(a, b, c)
    events, result = await streamed(team, ask("go"))
    assert result.unwrap().messages[-1].content == "b answers"
    assert handoffs(events) == [Handoff("a", "b", 1)]
    snap = (
        await trio_of_agents(
            ScriptedModel(Reply.tool_call(bad), transfer("b")),
            ScriptedModel(Reply.text("b answers")),
            ScriptedModel(),
        ).run(ask("go"))
    ).unwrap()
    assert (snap.state.active, snap.state.handoffs) == ("b", 1)
    assert refused(snap.state.messages[2])
    assert c.requests == []


@pytest.mark.parametrize(
    "targets",
    [("b", "c"), ("b", "b"), ("b", "zed"), ("b", "b", "c")],
    ids=["two-allowed", "same-twice", "allowed-and-unknown", "three"],
)
async def test_several_transfers_in_one_reply_are_all_refused(
    targets: tuple[str, ...],
) -> None:
    """Several transfer calls in one reply: every one is refused, no
    handoff; the agent's next single transfer is accepted."""
    calls = [(PREFIX + t, None, f"x{i}") for i, t in enumerate(targets)]
    a = ScriptedModel(Reply.tool_calls(*calls), transfer("c"))
    c = ScriptedModel(Reply.text("c answers"))
    team = (
        swarm.builder()
        .agent("a", Agent("a", a), handoffs=["b", "c"])
        .agent("b", Agent("b", ScriptedModel()))
        .agent("c", Agent("c", c))
        .entry("a")
        .build()
    )
    events, result = await streamed(team, ask("go"))
    out = result.unwrap()
    results = out.messages[2 : 2 + len(targets)]
    assert all(refused(m) for m in results)
    assert [m.tool_call_id for m in results] == [
        f"x{i}" for i in range(len(targets))
    ]
    assert tuple(a.requests[1].messages)[-len(targets) :] == tuple(results)
    assert handoffs(events) == [Handoff("a", "c", 1)]
    assert out.messages[-1].content == "c answers"


async def test_accepted_transfer_runs_the_replys_other_tools_first() -> None:
    """An accepted transfer in a reply with other tool calls: those run,
    results keep call order, and the turn ends with the handoff."""
    ran: list[str] = []

    @tool
    async def lookup(key: str) -> str:
        """Look up."""
        ran.append(key)
        return key.upper()

    a = ScriptedModel(
        Reply.tool_calls(
            ("lookup", {"key": "k"}, "c1"), ("transfer_to_b", None, "c2")
        )
    )
    b = ScriptedModel(Reply.text("b answers"))
    team = (
        swarm.builder()
        .agent("a", Agent("a", a, tools=[lookup]), handoffs=["b"])
        .agent("b", Agent("b", b))
        .entry("a")
        .build()
    )
    out = (await team(ask("go"))).unwrap()
    assert ran == ["k"]
    assert contents(out.messages[2:4]) == ["K", "Transferring to b..."]
    assert out.messages[-1].content == "b answers"
    assert len(a.requests) == 1


@pytest.mark.parametrize("name", ["transfer_to_b", "transfer_to_zed"])
async def test_own_tool_named_like_a_transfer_is_just_a_tool(
    name: str,
) -> None:
    """An agent's own tool named transfer_to_x runs as a tool and hands
    nothing off."""
    ran: list[str] = []

    @tool(name=name)
    async def mine() -> str:
        """My own tool."""
        ran.append(name)
        return "my own tool ran"

    a = ScriptedModel(Reply.tool_call(name), Reply.text("a answers"))
    b = ScriptedModel()
    team = (
        swarm.builder()
        .agent("a", Agent("a", a, tools=[mine]), handoffs=["b"])
        .agent("b", Agent("b", b))
        .entry("a")
        .build()
    )
    events, result = await streamed(team, ask("go"))
    out = result.unwrap()
    assert ran == [name]
    assert out.messages[2].content == "my own tool ran"
    assert out.messages[-1].content == "a answers"
    assert handoffs(events) == []
    assert b.requests == []
    assert offered(a.requests[0]).count(name) == 1


async def test_own_transfer_named_tool_beside_a_swarm_transfer() -> None:
    """An own tool named like a transfer does not count as a second
    transfer: next to one swarm transfer, both go through."""
    ran: list[str] = []

    @tool(name="transfer_to_zed")
    async def mine() -> str:
        """My own tool."""
        ran.append("zed")
        return "zed ran"

    a = ScriptedModel(
        Reply.tool_calls(
            ("transfer_to_zed", None, "c1"), ("transfer_to_b", None, "c2")
        )
    )
    b = ScriptedModel(Reply.text("b answers"))
    team = (
        swarm.builder()
        .agent("a", Agent("a", a, tools=[mine]), handoffs=["b"])
        .agent("b", Agent("b", b))
        .entry("a")
        .build()
    )
    events, result = await streamed(team, ask("go"))
    out = result.unwrap()
    assert ran == ["zed"]
    assert contents(out.messages[2:4]) == ["zed ran", "Transferring to b..."]
    assert handoffs(events) == [Handoff("a", "b", 1)]
    assert out.messages[-1].content == "b answers"


async def test_refusal_does_not_echo_what_the_model_wrote() -> None:
    """A refusal of a malformed transfer never repeats the model's text."""
    bad = "transfer_to_<script>alert(1)</script>"
    a = ScriptedModel(Reply.tool_call(bad), Reply.text("ok"))
    team = trio_of_agents(a, ScriptedModel(), ScriptedModel())
    out = (await team(ask("go"))).unwrap()
    assert refused(out.messages[2])
    assert "script" not in out.messages[2].content


# -- max_handoffs, exactly ----------------------------------------------------

RING = ("a", "b", "c")


def ring_step(me: str, attempts: list[str]) -> Step:
    """Always transfer to the next agent of the ring: while offered the
    tool, and once more after it is withdrawn; answer after a refusal."""
    nxt = RING[(RING.index(me) + 1) % len(RING)]

    def step(request: ModelRequest) -> ModelResponse:
        last = tuple(request.messages)[-1]
        if PREFIX + nxt not in offered(request) and refused(last):
            return Reply.text(f"{me} answers")
        attempts.append(me)
        return transfer(nxt, call_id=f"{me}{len(attempts)}")

    return step


def ring(
    limit: int | None,
    attempts: list[str],
    observers: list[Transition[SwarmState[None]]] | None = None,
) -> tuple[Swarm[None], dict[str, ScriptedModel]]:
    """Three agents a -> b -> c -> a, each always trying to transfer."""
    models = {
        n: ScriptedModel(ring_step(n, attempts), cycle=True) for n in RING
    }
    b = swarm.builder()
    for i, n in enumerate(RING):
        b = b.agent(n, Agent(n, models[n]), handoffs=[RING[(i + 1) % 3]])
    b = b.entry("a")
    if limit is not None:
        b = b.limits(swarm.SwarmLimits(max_handoffs=limit))
    if observers is not None:
        seen = observers

        async def observe(t: Transition[SwarmState[None]]) -> None:
            seen.append(t)

        b = b.after_handoff(observe)
    return b.build(), models


@pytest.mark.parametrize("limit", [0, 1, 2, 3, 4])
async def test_max_handoffs_is_exact(limit: int) -> None:
    """Exactly max_handoffs handoffs; then the last agent is offered no
    transfer tool, a transfer it tries anyway is refused, and it answers."""
    attempts: list[str] = []
    team, models = ring(limit, attempts)
    events, result = await streamed(team, ask("go"))
    out = result.unwrap()
    last = RING[limit % 3]
    assert handoffs(events) == [
        Handoff(RING[i % 3], RING[(i + 1) % 3], i + 1) for i in range(limit)
    ]
    assert out.messages[-1].content == f"{last} answers"
    final_requests = models[last].requests[-2:]
    assert [transfers_offered(r) for r in final_requests] == [[], []]
    refusal = out.messages[-2]
    assert refused(refusal)
    assert "limit" in refusal.content
    assert len(attempts) == limit + 1  # every handoff, then the refused one
    snap = (await ring(limit, [])[0].run(ask("go"))).unwrap()
    assert snap.status is Status.DONE
    assert (snap.state.handoffs, snap.state.active) == (limit, last)


async def test_default_limit_is_ten_handoffs() -> None:
    """Without limits a swarm allows exactly 10 handoffs, not unlimited."""
    attempts: list[str] = []
    team, _ = ring(None, attempts)
    assert team.limits == swarm.SwarmLimits(swarm.DEFAULT_MAX_HANDOFFS)
    assert swarm.DEFAULT_MAX_HANDOFFS == 10
    snap = (await team.run(ask("go"))).unwrap()
    assert snap.state.handoffs == 10
    assert snap.state.messages[-1].content == f"{RING[10 % 3]} answers"


def test_negative_limit_is_rejected() -> None:
    """Limits(max_handoffs=-1) is a ValueError."""
    with pytest.raises(ValueError, match="at least 0"):
        swarm.SwarmLimits(max_handoffs=-1)


# -- gates, observers, events -------------------------------------------------


def gate_of(
    seen: list[Transition[SwarmState[T]]],
    decide: Callable[[Transition[SwarmState[T]]], Decision],
) -> fold.Gate[SwarmState[T]]:
    """A gate that records what it sees and answers *decide*."""

    async def gate(t: Transition[SwarmState[T]]) -> Decision:
        seen.append(t)
        return decide(t)

    return gate


async def test_stop_gate_ends_the_run_stopped() -> None:
    """A before-handoff gate's Stop ends the run with status STOPPED; the
    specialist never runs; as a handler it is a RunStopped failure."""
    seen: list[Transition[SwarmState[None]]] = []
    specialist = ScriptedModel()
    team = pair(ScriptedModel(transfer("specialist")), specialist)
    snap = (
        await team.run(ask("go"), gates=[gate_of(seen, lambda t: Stop("no"))])
    ).unwrap()
    assert snap.status is Status.STOPPED
    assert snap.reason == "no"
    assert (snap.state.active, snap.state.handoffs) == ("dispatcher", 0)
    assert specialist.requests == []
    assert [(t.source, t.targets) for t in seen] == [
        ("dispatcher", ("specialist",))
    ]
    built = (
        swarm.builder()
        .agent(
            "dispatcher",
            Agent("dispatcher", ScriptedModel(transfer("specialist"))),
            handoffs=["specialist"],
        )
        .agent("specialist", Agent("specialist", ScriptedModel()))
        .entry("dispatcher")
        .before_handoff(gate_of([], lambda t: Stop("closed")))
        .build()
    )
    failure = (await built(ask("go"))).failure()
    assert isinstance(failure, RunStopped)
    assert failure.reason == "closed"


def approval(
    seen: list[Transition[SwarmState[None]]],
) -> fold.Gate[SwarmState[None]]:
    """Interrupt until answered; continue on "yes", stop otherwise."""

    def decide(t: Transition[SwarmState[None]]) -> Decision:
        if t.answer is None:
            return Interrupt("May I hand over?")
        return Continue() if t.answer == "yes" else Stop(f"answer {t.answer}")

    return gate_of(seen, decide)


def approval_desk(
    seen: list[Transition[SwarmState[None]]],
) -> tuple[Swarm[None], ScriptedModel]:
    """dispatcher -> specialist behind an approval gate."""
    specialist = ScriptedModel(Reply.text(SPECIALIST))
    team = (
        swarm.builder()
        .agent(
            "dispatcher",
            Agent("dispatcher", ScriptedModel(transfer("specialist"))),
            handoffs=["specialist"],
        )
        .agent("specialist", Agent("specialist", specialist))
        .entry("dispatcher")
        .before_handoff(approval(seen))
        .build()
    )
    return team, specialist


async def test_interrupt_then_resume_with_answer_in_memory() -> None:
    """An Interrupt pauses the run (status INTERRUPTED, the question
    pending); resume(answer="yes") lets the gate see the answer and go on."""
    seen: list[Transition[SwarmState[None]]] = []
    team, specialist = approval_desk(seen)
    store = stores.MemoryStore()
    paused = (await team.run(ask("go"), store=store, thread_id="t")).unwrap()
    assert paused.status is Status.INTERRUPTED
    assert paused.pending is not None
    assert paused.pending.question == "May I hand over?"
    assert (paused.pending.source, paused.pending.targets) == (
        "dispatcher",
        ("specialist",),
    )
    assert specialist.requests == []
    done = (await team.resume(store, "t", answer="yes")).unwrap()
    assert done.status is Status.DONE
    assert done.state.messages[-1].content == SPECIALIST
    assert [t.answer for t in seen] == [None, "yes"]
    assert (done.state.active, done.state.handoffs) == ("specialist", 1)


async def test_interrupt_then_resume_on_sqlite_after_restart(
    tmp_path: Path,
) -> None:
    """Interrupt on a SQLite file, close it, reopen it with a fresh swarm
    (a restarted process): resuming with the answer finishes the run."""
    path = tmp_path / "swarm.db"
    async with stores.SQLiteStore(path) as store:
        team, _ = approval_desk([])
        paused = (
            await team.run(ask("go"), store=store, thread_id="t")
        ).unwrap()
        assert paused.status is Status.INTERRUPTED
    seen: list[Transition[SwarmState[None]]] = []
    async with stores.SQLiteStore(path) as store:
        team, specialist = approval_desk(seen)
        done = (await team.resume(store, "t", answer="yes")).unwrap()
        assert done.state.messages[-1].content == SPECIALIST
        assert [t.answer for t in seen] == ["yes"]
        assert len(specialist.requests) == 1
        again = (await team.load(store, "t")).unwrap()
        assert again == done


async def test_interrupt_answered_no_stops() -> None:
    """Resuming an interrupted handoff with "no" lets the gate stop it."""
    team, specialist = approval_desk([])
    store = stores.MemoryStore()
    await team.run(ask("go"), store=store, thread_id="t")
    out = (await team.resume(store, "t", answer="no")).unwrap()
    assert out.status is Status.STOPPED
    assert out.reason == "answer no"
    assert specialist.requests == []


async def test_interrupt_as_a_handler_is_run_paused() -> None:
    """Used as a plain handler, an interrupt is a RunPaused failure."""
    team, _ = approval_desk([])
    failure = (await team(ask("go"))).failure()
    assert isinstance(failure, RunPaused)
    assert failure.question == "May I hand over?"


async def test_gates_never_see_the_first_agents_start() -> None:
    """Gates are asked about handoffs only: a run without one never asks;
    a run with one asks once, about that handoff."""
    seen: list[Transition[SwarmState[None]]] = []
    team = pair(ScriptedModel(Reply.text("alone")), ScriptedModel())
    await team.run(ask("go"), gates=[gate_of(seen, lambda t: Continue())])
    assert seen == []
    team = pair(
        ScriptedModel(transfer("specialist")),
        ScriptedModel(Reply.text("ok")),
    )
    await team.run(ask("go"), gates=[gate_of(seen, lambda t: Continue())])
    assert [(t.source, t.targets, t.state.active) for t in seen] == [
        ("dispatcher", ("specialist",), "dispatcher")
    ]


async def test_builder_gates_run_before_run_gates() -> None:
    """The builder's gates are asked first; a run's own gates after them."""
    order: list[str] = []

    def named(name: str) -> fold.Gate[SwarmState[None]]:
        async def gate(t: Transition[SwarmState[None]]) -> Decision:
            order.append(name)
            return Continue()

        return gate

    team = (
        swarm.builder()
        .agent(
            "dispatcher",
            Agent("dispatcher", ScriptedModel(transfer("specialist"))),
            handoffs=["specialist"],
        )
        .agent(
            "specialist", Agent("specialist", ScriptedModel(Reply.text("k")))
        )
        .entry("dispatcher")
        .before_handoff(named("builder"))
        .build()
    )
    await team.run(ask("go"), gates=[named("run")])
    assert order == ["builder", "run"]


async def test_after_handoff_observer_sees_the_new_agent_and_count() -> None:
    """After-handoff observers see each handoff with the state already
    naming the new agent and counting it."""
    seen: list[Transition[SwarmState[None]]] = []
    team, _ = ring(3, [], seen)
    await team(ask("go"))
    assert [
        (t.source, t.targets, t.state.active, t.state.handoffs) for t in seen
    ] == [
        ("a", ("b",), "b", 1),
        ("b", ("c",), "c", 2),
        ("c", ("a",), "a", 3),
    ]


async def test_handoff_events_stream_in_order() -> None:
    """Handoff events arrive in order, each after the source's last message
    and before the target's first."""
    team, _ = ring(3, [])
    events, _ = await streamed(team, ask("go"))
    assert handoffs(events) == [
        Handoff("a", "b", 1),
        Handoff("b", "c", 2),
        Handoff("c", "a", 3),
    ]
    speakers = [
        e.target if isinstance(e, Handoff) else e.agent
        for e in events
        if isinstance(e, Handoff | MessageComplete)
    ]
    # a speaks, then the handoff to b, then b speaks, ...
    collapsed = [
        s for i, s in enumerate(speakers) if i == 0 or s != speakers[i - 1]
    ]
    assert collapsed == ["a", "b", "c", "a"]


# -- checkpoints --------------------------------------------------------------


def own_turns(request: ModelRequest, name: str) -> int:
    """How many replies agent *name* gave before this request."""
    return sum(
        1
        for m in request.messages
        if m.role is Role.ASSISTANT and m.name == name
    )


def desk(
    notes: list[str] | None = None,
    crash: Callable[[ModelRequest], None] | None = None,
) -> Swarm[Mission]:
    """dispatcher: a note, then transfer; specialist: a state write, then
    the answer.  Replies depend on the request only, so any number of runs
    (forks, resumes) replay the same conversation."""
    ran = notes if notes is not None else []

    @tool
    async def note(text: str) -> str:
        """Take a note."""
        ran.append(text)
        return f"noted {text}"

    def dispatcher(request: ModelRequest) -> ModelResponse:
        if own_turns(request, "dispatcher") == 0:
            return Reply.tool_call("note", {"text": "n1"}, call_id="d1")
        return transfer("specialist", call_id="d2")

    def specialist(request: ModelRequest) -> ModelResponse:
        if crash is not None:
            crash(request)
        if own_turns(request, "specialist") == 0:
            return Reply.tool_call(
                "write_state",
                {"mission": "ok"},
                call_id="s1",
            )
        return Reply.text(SPECIALIST)

    return (
        swarm.builder(state=Mission())
        .agent(
            "dispatcher",
            Agent(
                "dispatcher",
                ScriptedModel(dispatcher, cycle=True),
                tools=[note],
            ),
            handoffs=["specialist"],
        )
        .agent(
            "specialist",
            Agent("specialist", ScriptedModel(specialist, cycle=True)),
            writable=["mission"],
        )
        .entry("dispatcher")
        .build()
    )


CTX = Context.of(Message.user("help"), run_id="fixed")


async def test_every_boundary_is_a_record() -> None:
    """Admission, every agent turn (as progress) and every activation is a
    record; versions and parents form one chain."""
    team = desk()
    store = stores.MemoryStore()
    done = (await team.run(CTX, store=store, thread_id="t")).unwrap()
    hist = (await team.history(store, "t")).unwrap()
    assert [s.version for s in hist] == list(range(len(hist)))
    assert [s.parent for s in hist] == [None, *range(len(hist) - 1)]
    assert hist[0].node is None
    assert hist[0].next == ("dispatcher",)
    assert hist[0].state.messages == CTX.messages
    assert hist[-1] == done
    assert done.status is Status.DONE
    with_progress = [s for s in hist if s.progress]
    # two turns of each agent
    assert len(with_progress) == 4
    activations = [s for s in hist[1:] if not s.progress]
    assert [(s.node, s.next) for s in activations] == [
        ("dispatcher", ("specialist",)),
        ("specialist", ()),
    ]
    # a progress record carries the state tools' writes of its turns
    assert hist[-2].state.state == Mission("ok")
    assert [s.state.active for s in hist] == [
        "dispatcher",
        "dispatcher",
        "dispatcher",
        "dispatcher",
        "specialist",
        "specialist",
        "specialist",
    ]


async def test_uninterrupted_run_matches_the_checkpointed_one() -> None:
    """A run with a store ends where the same run without one ends."""
    plain = (await desk().run(CTX)).unwrap()
    store = stores.MemoryStore()
    stored = (await desk().run(CTX, store=store, thread_id="t")).unwrap()
    assert stored.state == plain.state


async def test_fork_leaves_the_original_untouched() -> None:
    """Forking any version and running the fork to its end changes no
    record (and no snapshot) of the original thread."""
    team = desk()
    store = stores.MemoryStore()
    await team.run(CTX, store=store, thread_id="t")
    before = list(await store.records("t"))
    history = (await team.history(store, "t")).unwrap()
    for v in range(len(before)):
        forked = (
            await team.fork(store, "t", version=v, new_thread_id=f"f{v}")
        ).unwrap()
        assert (forked.thread_id, forked.version, forked.parent) == (
            f"f{v}",
            0,
            None,
        )
        assert forked.state == history[v].state
        assert forked.progress == history[v].progress
        await desk().resume(store, f"f{v}")
        assert list(await store.records("t")) == before
    assert (await team.history(store, "t")).unwrap() == history


async def test_resume_from_every_version_ends_where_the_run_ended() -> None:
    """A fork of any version, resumed, ends with the uninterrupted run's
    state: the same conversation, typed state, agent and handoff count."""
    team = desk()
    store = stores.MemoryStore()
    done = (await team.run(CTX, store=store, thread_id="t")).unwrap()
    ends = {}
    for v in range(len(await store.records("t"))):
        await team.fork(store, "t", version=v, new_thread_id=f"f{v}")
        out = (await desk().resume(store, f"f{v}")).unwrap()
        ends[v] = (out.status, out.state.active, out.state.handoffs)
        assert out.state == done.state, f"fork of version {v}"
    assert set(ends.values()) == {(Status.DONE, "specialist", 1)}


async def test_resume_from_an_older_version_grows_a_branch() -> None:
    """Resuming a finished thread from an older version appends a branch
    (parent: that version) and ends where the run ended; old records stay."""
    team = desk()
    store = stores.MemoryStore()
    done = (await team.run(CTX, store=store, thread_id="t")).unwrap()
    before = list(await store.records("t"))
    out = (await desk().resume(store, "t", version=3)).unwrap()
    after = list(await store.records("t"))
    assert after[: len(before)] == before
    assert after[len(before)].parent == 3
    assert out.state == done.state


async def test_time_travel_from_every_version_ends_the_same() -> None:
    """Resuming the thread itself from each of its versions grows a branch
    in that thread which ends where the run ended."""
    team = desk()
    store = stores.MemoryStore()
    done = (await team.run(CTX, store=store, thread_id="t")).unwrap()
    versions = [r.version for r in await store.records("t")]
    for v in versions:
        before = list(await store.records("t"))
        out = (await desk().resume(store, "t", version=v)).unwrap()
        assert out.state == done.state, f"from version {v}"
        assert list(await store.records("t"))[: len(before)] == before


async def test_a_failing_history_policy_fails_the_swarm() -> None:
    """A policy that cannot select a view (a budget too small for the last
    turn) makes the swarm fail with that policy's failure."""
    specialist = ScriptedModel()
    team = (
        swarm.builder()
        .agent(
            "dispatcher",
            Agent("dispatcher", ScriptedModel(transfer("specialist"))),
            handoffs=["specialist"],
        )
        .agent(
            "specialist",
            Agent("specialist", specialist),
            history=token_budget(1),
        )
        .entry("dispatcher")
        .build()
    )
    failure = (await team(ask("a long question for a tiny budget"))).failure()
    assert isinstance(failure, HistoryBudgetExceeded)
    assert failure.budget == 1
    assert specialist.requests == []


async def test_a_used_thread_id_is_refused_before_any_agent_runs() -> None:
    """run() on a thread that already has records fails with
    ConcurrentModification; no model is called and no record changes."""
    store = stores.MemoryStore()
    await desk().run(CTX, store=store, thread_id="t")
    before = list(await store.records("t"))
    dispatcher = ScriptedModel()
    team = pair(dispatcher, ScriptedModel())
    out = await team.run(ask("again"), store=store, thread_id="t")
    assert isinstance(out.failure(), ConcurrentModification)
    assert dispatcher.requests == []
    assert list(await store.records("t")) == before


async def test_another_shape_does_not_resume_without_a_migration() -> None:
    """A swarm with another allow-list refuses the thread (IncompatibleGraph);
    with a migration it resumes."""
    team = desk()
    store = stores.MemoryStore()
    await team.run(
        CTX,
        store=store,
        thread_id="t",
        gates=[gate_of([], lambda t: Stop("later"))],
    )
    other = (
        swarm.builder(state=Mission())
        .agent(
            "dispatcher",
            Agent("dispatcher", ScriptedModel()),
            handoffs=["specialist"],
        )
        .agent(
            "specialist",
            Agent("specialist", ScriptedModel(Reply.text("other"))),
            handoffs=["dispatcher"],
        )
        .entry("dispatcher")
        .build()
    )
    assert other.fingerprint != team.fingerprint
    refusal = (await other.resume(store, "t")).failure()
    assert refusal == IncompatibleGraph(team.fingerprint, other.fingerprint)
    stop = (await team.load(store, "t")).unwrap()  # the gate's stop record
    migrated = (
        await other.resume(
            store, "t", version=stop.parent, migrate=lambda s: s
        )
    ).unwrap()
    assert migrated.state.messages[-1].content == "other"
    assert migrated.fingerprint == other.fingerprint
    assert desk().fingerprint == team.fingerprint


async def test_a_stop_is_recorded_and_the_thread_goes_on_from_before_it() -> (
    None
):
    """A gate's stop is a record (status stopped, the reason): resuming the
    thread returns it and runs nothing; resuming the version before it
    (without that gate) makes the handoff."""
    team = desk()
    store = stores.MemoryStore()
    stopped = (
        await team.run(
            CTX,
            store=store,
            thread_id="t",
            gates=[gate_of([], lambda t: Stop("later"))],
        )
    ).unwrap()
    assert stopped.status is Status.STOPPED
    head = (await team.load(store, "t")).unwrap()
    assert head == stopped
    assert (head.status, head.reason, head.next) == (
        Status.STOPPED,
        "later",
        ("specialist",),
    )
    assert (await desk().resume(store, "t")).unwrap() == head
    assert (await team.load(store, "t")).unwrap().version == head.version
    assert head.parent is not None
    done = (await desk().resume(store, "t", version=head.parent)).unwrap()
    assert done.state.messages[-1].content == SPECIALIST
    assert (done.state.active, done.state.handoffs) == ("specialist", 1)


async def test_a_stopped_swarm_thread_is_edited_by_patch() -> None:
    """Swarm.update_state patches a stopped swarm thread's typed state: a
    version with its author and reason; the thread stays stopped."""
    team = desk()
    store = stores.MemoryStore()
    stop = (
        await team.run(
            CTX,
            store=store,
            thread_id="t",
            gates=[gate_of([], lambda t: Stop("later"))],
        )
    ).unwrap()
    edited = (
        await team.update_state(
            store,
            "t",
            patch={"state": {"mission": "rescoped"}},
            author="ana",
            reason="new scope",
        )
    ).unwrap()
    assert edited.state.state == Mission("rescoped")
    assert edited.state.messages == stop.state.messages
    assert (edited.status, edited.parent) == (Status.STOPPED, stop.version)
    assert edited.edit == Edit("ana", "new scope")
    assert (await team.load(store, "t")).unwrap() == edited


async def test_one_swarm_serves_concurrent_runs() -> None:
    """Many runs of one swarm at once, on one store, each end on their own
    thread exactly as a lone run does."""
    team = desk()
    expected = (await team.run(CTX)).unwrap().state
    store = stores.MemoryStore()
    ends: dict[str, SwarmState[Mission]] = {}

    async def one(thread: str) -> None:
        snap = (await team.run(CTX, store=store, thread_id=thread)).unwrap()
        ends[thread] = snap.state

    async with anyio.create_task_group() as tg:
        for i in range(8):
            tg.start_soon(one, f"t{i}")
    assert ends == {f"t{i}": expected for i in range(8)}
    assert sorted(await store.threads()) == sorted(ends)


class Crash(BaseException):
    """A crash the fold does not catch (a process dying mid-step)."""


class CrashingStore(DelegatingStore):
    """A MemoryStore that dies (raises Crash) on committing one version."""

    def __init__(self, inner: stores.MemoryStore, version: int) -> None:
        super().__init__(inner)
        self.version = version

    async def commit(
        self,
        record: Record,
        *,
        expected_head: int | None,
        lease: Lease | None = None,
    ) -> CommitResult:
        if record.version == self.version:
            raise Crash
        return await self.inner.commit(
            record, expected_head=expected_head, lease=lease
        )


async def test_crash_after_the_transferring_turn_still_hands_off() -> None:
    """A crash after the transferring turn was committed (as progress) but
    before the activation's own record: resuming still hands off, and the
    specialist answers."""
    store = stores.MemoryStore()
    dispatcher = ScriptedModel(transfer("specialist"))
    team = pair(dispatcher, ScriptedModel())
    with pytest.raises(Crash):
        # v0 admission, v1 the dispatcher's turn (progress), v2 dies
        await team.run(
            ask("help"), store=CrashingStore(store, 2), thread_id="t"
        )
    specialist = ScriptedModel(Reply.text(SPECIALIST), strict=False)
    out = (await pair(ScriptedModel(), specialist).resume(store, "t")).unwrap()
    assert (out.state.active, out.state.handoffs) == ("specialist", 1)
    assert out.state.messages[-1].content == SPECIALIST
    assert len(specialist.requests) == 1


async def test_resume_from_any_version_does_not_rerun_committed_turns() -> (
    None
):
    """Resuming a fork made mid-agent continues its turns: a tool call whose
    result was committed is not run again."""
    team = desk()
    store = stores.MemoryStore()
    await team.run(CTX, store=store, thread_id="t")
    hist = (await team.history(store, "t")).unwrap()
    after_note = next(s for s in hist if s.progress)
    notes: list[str] = []
    await team.fork(store, "t", version=after_note.version, new_thread_id="f")
    out = (await desk(notes).resume(store, "f")).unwrap()
    assert notes == []
    assert out.state.messages[-1].content == SPECIALIST


async def test_history_lists_versions_in_order() -> None:
    """history() lists every version oldest first, each equal to load()."""
    team = desk()
    store = stores.MemoryStore()
    await team.run(CTX, store=store, thread_id="t")
    hist = (await team.history(store, "t")).unwrap()
    records = await store.records("t")
    assert [s.version for s in hist] == [r.version for r in records]
    for snap in hist:
        loaded = (await team.load(store, "t", version=snap.version)).unwrap()
        assert loaded == snap


async def test_resuming_a_finished_thread_returns_it() -> None:
    """Resuming a done thread returns its last snapshot and writes nothing."""
    notes: list[str] = []
    team = desk(notes)
    store = stores.MemoryStore()
    done = (await team.run(CTX, store=store, thread_id="t")).unwrap()
    before = list(await store.records("t"))
    again = (await team.resume(store, "t")).unwrap()
    assert again == done
    assert list(await store.records("t")) == before
    assert notes == ["n1"]


async def test_every_version_decodes() -> None:
    """Every record of a thread decodes into a swarm snapshot; each one,
    re-encoded as a root record, decodes back to itself."""
    team = desk()
    store = stores.MemoryStore()
    await team.run(CTX, store=store, thread_id="t")
    records = await store.records("t")
    for r in records:
        snap = (await team.load(store, "t", version=r.version)).unwrap()
        assert (snap.version, snap.parent) == (r.version, r.parent)
        assert isinstance(snap.state, SwarmState)
        assert isinstance(snap.state.state, Mission)
        root = team.codec.encode(snap, None)
        doc = team.codec.parse(root).unwrap()
        again = team.codec.decode([(root, doc)]).unwrap()
        assert again == snap


async def test_the_conversation_is_in_one_place() -> None:
    """The final state's conversation holds every message with the input's
    metadata and run id; the deprecated .context gives the same, warning;
    the swarm as a handler returns it."""
    team = desk()
    ctx = CTX.set("ticket", "T-1")
    snap = (await team.run(ctx)).unwrap()
    conversation = snap.state.conversation
    assert conversation.messages == snap.state.messages
    assert len(conversation.messages) > len(ctx.messages)
    assert conversation.messages[: len(ctx.messages)] == ctx.messages
    assert (conversation.metadata, conversation.run_id) == (
        ctx.metadata,
        ctx.run_id,
    )
    with pytest.warns(DeprecationWarning, match="SwarmState.conversation"):
        assert snap.state.context == conversation
    out = (await team(ctx)).unwrap()
    assert (out.messages, out.metadata) == (
        conversation.messages,
        conversation.metadata,
    )


async def test_records_of_the_older_state_form_still_decode() -> None:
    """A record written when SwarmState kept a message-less ``context``
    (metadata and run id) decodes into today's fields; a ``context`` that
    holds messages is refused, naming the field."""
    team = desk()
    ctx = CTX.set("ticket", "T-1")
    store = stores.MemoryStore()
    snap = (await team.run(ctx, store=store, thread_id="t")).unwrap()
    root = team.codec.encode(snap, None)
    doc = team.codec.parse(root).unwrap()
    state = dict(doc["state"])
    old = {
        "messages": [],
        "metadata": state.pop("metadata"),
        "run_id": state.pop("run_id"),
    }
    older = {**doc, "state": {**state, "context": old}}
    again = team.codec.decode([(root, older)]).unwrap()
    assert again == snap
    wrong = {**doc, "state": {**state, "context": {**old, "messages": [1]}}}
    failure = team.codec.decode([(root, wrong)]).failure()
    assert isinstance(failure, CheckpointDecodeError)
    assert failure.location == "$.state.context"


async def test_crash_mid_agent_then_resume_continues() -> None:
    """A crash in the specialist's second model call loses only that turn:
    resuming finishes with the uninterrupted run's state, and the
    dispatcher's committed tool call is not run again."""
    expected = (await desk().run(CTX)).unwrap().state

    def crash(request: ModelRequest) -> None:
        if own_turns(request, "specialist") == 1:
            raise Crash

    store = stores.MemoryStore()
    with pytest.raises(Crash):
        await desk(crash=crash).run(CTX, store=store, thread_id="t")
    last = (await desk().load(store, "t")).unwrap()
    assert last.status is Status.RUNNING
    assert last.progress  # the specialist's first turn was committed
    assert last.state.state == Mission("ok")
    notes: list[str] = []
    out = (await desk(notes).resume(store, "t")).unwrap()
    assert out.state == expected
    assert notes == []


async def test_crash_mid_agent_on_sqlite_resumes_after_restart(
    tmp_path: Path,
) -> None:
    """The same crash on a SQLite file: a fresh store on the same file and
    a fresh swarm (a restarted process) finish the run."""
    expected = (await desk().run(CTX)).unwrap().state

    def crash(request: ModelRequest) -> None:
        if own_turns(request, "specialist") == 1:
            raise Crash

    path = tmp_path / "crash.db"
    async with stores.SQLiteStore(path) as store:
        with pytest.raises(Crash):
            await desk(crash=crash).run(CTX, store=store, thread_id="t")
    notes: list[str] = []
    async with stores.SQLiteStore(path) as store:
        out = (await desk(notes).resume(store, "t")).unwrap()
        history = (await desk().history(store, "t")).unwrap()
    assert out.state == expected
    assert notes == []
    assert [s.version for s in history] == list(range(len(history)))


# -- composition --------------------------------------------------------------


@handler
async def classify(ctx: Context) -> Result[Context, str]:
    """Tag the context."""
    return Success(ctx.set("topic", "billing"))


@handler
async def fallback(ctx: Context) -> Result[Context, str]:
    """Answer when the team cannot."""
    return Success(ctx.append(Message.assistant("fallback answer")))


@handler
async def polish(ctx: Context) -> Result[Context, str]:
    """Rewrite the last answer."""
    last = ctx.messages[-1].content
    return Success(ctx.append(Message.assistant(f"polished: {last}")))


async def test_swarm_composes_with_operators() -> None:
    """classify >> (team | fallback) >> polish: the team's answer is
    polished and the context's metadata survives the swarm."""
    team = pair(
        ScriptedModel(transfer("specialist")),
        ScriptedModel(Reply.text(SPECIALIST)),
    )
    ask_ctx = ask("hi")
    out = (await (classify >> (team | fallback) >> polish)(ask_ctx)).unwrap()
    assert out.messages[-1].content == f"polished: {SPECIALIST}"
    assert out.metadata["topic"] == "billing"
    assert out.run_id == ask_ctx.run_id
    assert contents(out.messages)[0] == "hi"


async def test_failing_swarm_falls_back() -> None:
    """A swarm whose agent fails is a failure: ``|`` runs the fallback."""
    team = pair(ScriptedModel(Reply.error("down")), ScriptedModel())
    out = (await (classify >> (team | fallback) >> polish)(ask("hi"))).unwrap()
    assert contents(out.messages) == [
        "hi",
        "fallback answer",
        "polished: fallback answer",
    ]
    again = pair(ScriptedModel(Reply.error("down")), ScriptedModel())
    alone = (await again(ask("hi"))).failure()
    assert isinstance(alone, ModelError)


@attrs.frozen
class Desk:
    """A graph state holding a conversation."""

    messages: PVector[Message] = attrs.field(factory=pvector)
    topic: str = ""


def see(d: Desk) -> PVector[Message]:
    return d.messages


def keep(d: Desk, run: object) -> Desk:
    added = getattr(run, "messages", ())
    return attrs.evolve(d, messages=d.messages.extend(added))


async def test_swarm_as_a_graph_agent_node() -> None:
    """A swarm is an agent node of a typed graph: its messages are folded
    into the graph's state (and a checkpointed run records its progress)."""
    g = (
        graph.builder(Desk)
        .agent("team", desk(), messages=see, update=keep)
        .entry("team")
        .edge("team", END)
        .build()
    )
    start = Desk(pvector([Message.user("help")]))
    plain = (await g.run(start)).unwrap()
    assert plain.state.messages[-1].content == SPECIALIST
    assert plain.state.messages[0].content == "help"
    store = stores.MemoryStore()
    stored = (await g.run(start, store=store, thread_id="g")).unwrap()
    assert contents(stored.state.messages) == contents(plain.state.messages)
    hist = (await g.history(store, "g")).unwrap()
    assert any(s.progress for s in hist)


async def test_swarm_as_a_plain_node_of_a_context_graph() -> None:
    """On a graph whose state is a Context, a swarm is a plain node."""
    g = (
        graph.builder(Context)
        .node("team", desk())
        .entry("team")
        .edge("team", END)
        .build()
    )
    out = (await g.run(ask("help"))).unwrap()
    assert out.state.messages[-1].content == SPECIALIST
    store = stores.MemoryStore()
    stored = (await g.run(CTX, store=store, thread_id="g")).unwrap()
    assert contents(stored.state.messages) == contents(out.state.messages)


async def test_swarm_interrupt_inside_a_checkpointed_graph() -> None:
    """A swarm node's interrupt pauses the enclosing checkpointed graph;
    resuming the graph with the answer lets the swarm hand off."""
    seen: list[Transition[SwarmState[None]]] = []
    team, specialist = approval_desk(seen)
    g = (
        graph.builder(Context)
        .node("team", team)
        .entry("team")
        .edge("team", END)
        .build()
    )
    store = stores.MemoryStore()
    paused = (await g.run(CTX, store=store, thread_id="g")).unwrap()
    assert paused.status is Status.INTERRUPTED
    assert specialist.requests == []
    done = (await g.resume(store, "g", answer="yes")).unwrap()
    assert done.status is Status.DONE
    assert done.state.messages[-1].content == SPECIALIST
    assert [t.answer for t in seen] == [None, "yes"]


async def test_crash_inside_a_swarm_node_resumes_inside_the_swarm() -> None:
    """A crash in a swarm that is an agent node of a checkpointed graph:
    resuming the graph continues the swarm without redoing its committed
    turns."""

    def crash(request: ModelRequest) -> None:
        if own_turns(request, "specialist") == 1:
            raise Crash

    def desk_graph(team: Swarm[Mission]) -> Graph[Desk, object]:
        return (
            graph.builder(Desk)
            .agent("team", team, messages=see, update=keep)
            .entry("team")
            .edge("team", END)
            .build()
        )

    start = Desk(pvector([Message.user("help")]))
    expected = (await desk_graph(desk()).run(start)).unwrap().state
    store = stores.MemoryStore()
    with pytest.raises(Crash):
        await desk_graph(desk(crash=crash)).run(
            start, store=store, thread_id="g"
        )
    notes: list[str] = []
    out = (await desk_graph(desk(notes)).resume(store, "g")).unwrap()
    assert notes == []
    assert out.state == expected


async def test_swarm_as_a_tool() -> None:
    """as_tool(team): another agent calls the swarm with a prompt and sees
    its final answer as the tool result."""
    team = pair(
        ScriptedModel(transfer("specialist")),
        ScriptedModel(Reply.text(SPECIALIST)),
    )
    team_tool = as_tool(team)
    assert team_tool.name == "swarm"
    boss_model = ScriptedModel(
        Reply.tool_call("swarm", {"prompt": "help me"}),
        Reply.text("boss done"),
    )
    boss = Agent("boss", boss_model, tools=[team_tool])
    out = (await boss(ask("hi"))).unwrap()
    assert boss_model.requests[1].messages[-1].content == SPECIALIST
    assert out.messages[-1].content == "boss done"


async def test_failing_swarm_as_a_tool_is_an_error_result() -> None:
    """A swarm tool whose run fails gives the calling model an error."""
    team = pair(ScriptedModel(Reply.error("down")), ScriptedModel())
    boss_model = ScriptedModel(
        Reply.tool_call("desk", {"prompt": "x"}), Reply.text("sorry")
    )
    boss = Agent("boss", boss_model, tools=[as_tool(team, name="desk")])
    await boss(ask("hi"))
    assert refused(tuple(boss_model.requests[1].messages)[-1])


async def test_middleware_wraps_a_swarm() -> None:
    """team.use(retry(...)) re-runs the whole swarm after a failure."""
    entry = ScriptedModel(Reply.error("flaky"), Reply.text("second time"))
    team = pair(entry, ScriptedModel())
    out = (await team.use(retry(attempts=2))(ask("hi"))).unwrap()
    assert contents(out.messages) == ["hi", "second time"]
    assert len(entry.requests) == 2


async def test_log_middleware_on_a_swarm(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """team.use(log()) logs the swarm's start and finish."""
    team = pair(ScriptedModel(Reply.text("ok")), ScriptedModel())
    with caplog.at_level(logging.DEBUG, logger="pipeline"):
        await team.use(log())(ask("hi"))
    events = [
        getattr(r, "pipeline_event", None)
        for r in caplog.records
        if getattr(r, "pipeline_handler", None) == "swarm"
    ]
    assert events == ["start", "finish"]


# -- drawing and validation ---------------------------------------------------


def test_mermaid_has_every_agent_and_one_arrow_per_handoff() -> None:
    """The drawing names every agent and draws one arrow per allowed
    handoff, plus the start arrow."""
    team = (
        swarm.builder()
        .agent(
            "triage",
            Agent("triage", ScriptedModel()),
            handoffs=["billing", "tech"],
        )
        .agent("billing", Agent("billing", ScriptedModel()), handoffs=["tech"])
        .agent("tech", Agent("tech", ScriptedModel()), handoffs=["triage"])
        .entry("triage")
        .build()
    )
    text = team.mermaid()
    assert text.startswith("flowchart LR\n")
    for name in ("triage", "billing", "tech"):
        assert name in text
    assert text.count("-->|transfer|") == 4
    assert text.count("START -->") == 1
    assert team.agents == ("triage", "billing", "tech")
    assert team.entry == "triage"


def kinds(exc: SwarmDefects) -> list[tuple[str, str]]:
    return [(d.kind, d.node) for d in exc.defects]


def test_build_lists_every_defect_at_once() -> None:
    """Unknown target, handoff to itself, a duplicate agent, a bad name and
    an unreachable agent are all reported by one SwarmDefects."""
    m = ScriptedModel()
    b = (
        swarm.builder()
        .agent("a", Agent("a", m), handoffs=["ghost", "a", "b", "b"])
        .agent("b", Agent("b", m))
        .agent("b", Agent("b", m))
        .agent("bad name!", Agent("x", m))
        .agent("island", Agent("island", m))
        .entry("a")
    )
    with pytest.raises(SwarmDefects) as info:
        b.build()
    found = kinds(info.value)
    assert ("unknown agent", "ghost") in found
    assert ("handoff to itself", "a") in found
    assert ("duplicate handoff", "a") in found
    assert ("duplicate agent", "b") in found
    assert ("bad name", "bad name!") in found
    assert ("unreachable", "island") in found
    assert ("unreachable", "bad name!") in found
    assert len(found) == 7
    assert all(isinstance(d, GraphDefect) for d in info.value.defects)
    assert "7 swarm defect(s)" in str(info.value)


def test_build_without_an_entry_is_a_defect() -> None:
    """A swarm without .entry() does not build."""
    b = swarm.builder().agent("a", Agent("a", ScriptedModel()))
    with pytest.raises(SwarmDefects) as info:
        b.build()
    assert kinds(info.value) == [("missing entry", "")]


def test_build_with_an_unknown_entry_is_a_defect() -> None:
    """An entry that is not an agent does not build."""
    b = (
        swarm.builder()
        .agent("a", Agent("a", ScriptedModel()), handoffs=["ghost"])
        .entry("nobody")
    )
    with pytest.raises(SwarmDefects) as info:
        b.build()
    assert kinds(info.value) == [
        ("unknown agent", "ghost"),
        ("unknown agent", "nobody"),
    ]


def test_build_rejects_a_name_too_long_for_a_tool() -> None:
    """An agent name that cannot make transfer_to_<name> (over 52
    characters) is a bad name."""
    long = "n" * 53
    b = (
        swarm.builder()
        .agent("a", Agent("a", ScriptedModel()), handoffs=[long])
        .agent(long, Agent(long, ScriptedModel()))
        .entry("a")
    )
    with pytest.raises(SwarmDefects) as info:
        b.build()
    assert kinds(info.value) == [("bad name", long)]
    ok = "n" * 52
    built = (
        swarm.builder()
        .agent("a", Agent("a", ScriptedModel()), handoffs=[ok])
        .agent(ok, Agent(ok, ScriptedModel()))
        .entry("a")
        .build()
    )
    assert built.agents == ("a", ok)


def test_build_rejects_a_name_with_a_trailing_newline() -> None:
    """An agent named "b\\n" cannot make a tool name (tool names are
    letters, digits, '_' and '-' only): it is a bad name."""
    b = (
        swarm.builder()
        .agent("a", Agent("a", ScriptedModel()), handoffs=["b\n"])
        .agent("b\n", Agent("b", ScriptedModel()))
        .entry("a")
    )
    with pytest.raises(SwarmDefects) as info:
        b.build()
    assert kinds(info.value) == [("bad name", "b\n")]


def test_builder_is_immutable() -> None:
    """Adding to a builder returns a new builder; the old one is unchanged."""
    base = swarm.builder().agent("a", Agent("a", ScriptedModel()))
    more = base.agent("b", Agent("b", ScriptedModel()))
    assert base.entry("a").build().agents == ("a",)
    with pytest.raises(SwarmDefects):
        more.entry("a").build()  # b is unreachable
