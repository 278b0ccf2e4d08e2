"""Agent nodes: an agent loop inside a graph, with typed state tools."""

from __future__ import annotations

import json

from pathlib import Path

import attrs

from pyrsistent import PVector, pvector
from returns.result import Failure, Result, Success

from pipeline import Agent, Graph, Message, Role, graph, stores
from pipeline.agents import AgentError, AgentRun
from pipeline.failures import ModelError
from pipeline.graph import END
from pipeline.testing import Reply, ScriptedModel


@attrs.frozen
class Ticket:
    """Graph state for a support ticket."""

    messages: PVector[Message] = attrs.field(factory=pvector)
    topic: str = ""
    priority: int = 0


def see(t: Ticket) -> PVector[Message]:
    return t.messages


def keep(t: Ticket, run: AgentRun) -> Ticket:
    return attrs.evolve(t, messages=t.messages.extend(run.messages))


def desk(model: ScriptedModel) -> Graph[Ticket, object]:
    triage = Agent("triage", model, instructions="Classify the ticket.")
    return (
        graph.builder(Ticket)
        .agent(
            "triage",
            triage,
            messages=see,
            update=keep,
            writable=["topic", "priority"],
        )
        .entry("triage")
        .edge("triage", END)
        .build()
    )


async def test_agent_node_writes_typed_state() -> None:
    """write_state decodes into the field's type; the run is kept."""
    model = ScriptedModel(
        Reply.tool_calls(
            ("write_state", {"topic": "billing"}, "c1"),
            ("write_state", {"priority": 2}, "c2"),
        ),
        Reply.tool_call("read_state", {"field": "topic"}),
        Reply.text("Routed to billing."),
    )
    with model:
        out = (
            await desk(model).run(
                Ticket(pvector([Message.user("I was charged twice")]))
            )
        ).unwrap()
    state = out.state
    assert (state.topic, state.priority) == ("billing", 2)
    assert state.messages[-1].content == "Routed to billing."
    tools = [m.content for m in state.messages if m.role is Role.TOOL]
    assert tools == [
        "state updated: topic",
        "state updated: priority",
        json.dumps("billing"),
    ]
    offered = {t.name for t in model.requests[0].tools}
    assert offered == {"read_state", "write_state"}
    fields = (
        model.requests[0].tools[0].parameters["properties"]["field"]["enum"]
    )
    assert fields == [
        "topic",
        "priority",
    ]  # the message log is not a tool field


async def test_wrong_types_and_unknown_fields_are_error_results() -> None:
    """A bad write names the field and type; the state is left alone."""
    model = ScriptedModel(
        Reply.tool_calls(
            ("write_state", {"priority": "urgent"}, "c1"),
            ("write_state", {"messages": []}, "c2"),
        ),
        Reply.text("ok"),
    )
    out = (await desk(model).run(Ticket())).unwrap()
    assert out.state.priority == 0
    errors = [m.content for m in out.state.messages if m.role is Role.TOOL]
    assert "argument 'priority': expected an integer" in errors[0]
    assert "unknown argument(s) ['messages']" in errors[1]
    assert "urgent" not in errors[0]


async def test_agent_failure_is_the_nodes_failure() -> None:
    """A provider error inside an agent node fails the run, typed."""
    out = await desk(ScriptedModel(Reply.error("down", status=503))).run(
        Ticket()
    )
    assert isinstance(out, Failure)
    err = out.failure()
    assert isinstance(err, ModelError)
    assert err.path[0] == "triage"


async def test_agent_node_checkpoints_and_resumes() -> None:
    """An agent node's output is checkpointed like any node's."""
    model = ScriptedModel(Reply.text("first"), Reply.text("second"))
    g = (
        graph.builder(Ticket)
        .agent("one", Agent("one", model), messages=see, update=keep)
        .agent("two", Agent("two", model), messages=see, update=keep)
        .entry("one")
        .edge("one", "two")
        .edge("two", END)
        .build()
    )
    store = stores.MemoryStore()
    await g.run(
        Ticket(),
        store=store,
        thread_id="t",
        limits=graph.GraphLimits(max_steps=1),
    )
    stop = (await g.load(store, "t")).unwrap()  # the limit's stop record
    done = (await g.resume(store, "t", version=stop.parent)).unwrap()
    assert [m.content for m in done.state.messages] == ["first", "second"]
    assert len(model.requests) == 2  # the first agent did not run again


# -- update may fail: decoding the answer into the state ----------------------


@attrs.frozen
class Unreadable:
    """The agent's answer is not a priority."""

    agent: str


def decode_priority(t: Ticket, run: AgentRun) -> Result[Ticket, Unreadable]:
    """The answer is a number, or the node fails with a typed error."""
    if not run.text.isdigit():
        return Failure(Unreadable(run.agent))
    return Success(attrs.evolve(t, priority=int(run.text)))


def rater(model: ScriptedModel) -> Graph[Ticket, AgentError | Unreadable]:
    return (
        graph.builder(Ticket)
        .agent(
            "rate", Agent("rate", model), messages=see, update=decode_priority
        )
        .entry("rate")
        .edge("rate", END)
        .build()
    )


async def test_update_may_return_a_result() -> None:
    """A Success is the new state; a Failure is the node's failure, typed."""
    ticket = Ticket(pvector([Message.user("how urgent?")]))
    with ScriptedModel(Reply.text("3")) as model:
        done = (await rater(model).run(ticket)).unwrap()
    assert done.state.priority == 3
    with ScriptedModel(Reply.text("very")) as model:
        failed = await rater(model).run(ticket)
    assert failed.failure() == Unreadable("rate")


async def test_a_failed_update_in_a_checkpointed_run(tmp_path: Path) -> None:
    """Checkpointed (SQLite): the update's failure is the run's, typed, and
    a success is the stored final state."""
    ticket = Ticket(pvector([Message.user("how urgent?")]))
    async with stores.SQLiteStore(tmp_path / "runs.db") as store:
        with ScriptedModel(Reply.text("very")) as model:
            failed = await rater(model).run(ticket, store=store, thread_id="t")
        assert failed.failure() == Unreadable("rate")
        with ScriptedModel(Reply.text("2")) as model:
            done = await rater(model).run(ticket, store=store, thread_id="u")
        assert done.unwrap().state.priority == 2
        stored = (await rater(ScriptedModel()).load(store, "u")).unwrap()
        assert stored.state.priority == 2
