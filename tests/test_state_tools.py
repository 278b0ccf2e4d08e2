"""State tools are safe by default (issue 10, item 4).

Writable fields are an explicit allow-list with a JSON schema each; a
context's metadata is read and written by key, its ``run_id`` and messages
never; concurrent ``write_state`` calls in one turn lose nothing; an
agent's own tool named like a state tool overrides it, in graphs and
swarms alike.
"""

from __future__ import annotations

import enum
import json
import sys

from collections.abc import Iterator
from typing import Any, Literal

import attrs
import pytest

from pyrsistent import PVector, pvector

from pipeline import Agent, Context, Graph, Message, Role, graph, swarm, tool
from pipeline.agents import AgentRun
from pipeline.errors import ConstructionError
from pipeline.graph import END, state_tools
from pipeline.models import ModelRequest
from pipeline.testing import Reply, ScriptedModel


class Level(enum.Enum):
    """How urgent."""

    LOW = "low"
    HIGH = "high"


@attrs.frozen
class Ticket:
    """A typed graph state."""

    messages: PVector[Message] = attrs.field(factory=pvector)
    topic: str = ""
    priority: int = 0
    level: Level = Level.LOW
    queue: Literal["front", "back"] = "front"
    owner: str = "nobody"


def see(t: Ticket) -> PVector[Message]:
    return t.messages


def keep(t: Ticket, run: AgentRun) -> Ticket:
    return attrs.evolve(t, messages=t.messages.extend(run.messages))


def desk(model: ScriptedModel, **options: Any) -> Graph[Ticket, object]:
    return (
        graph.builder(Ticket)
        .agent(
            "desk", Agent("desk", model), messages=see, update=keep, **options
        )
        .entry("desk")
        .edge("desk", END)
        .build()
    )


def tool_results(messages: PVector[Message]) -> list[str]:
    return [m.content for m in messages if m.role is Role.TOOL]


def offered(request: ModelRequest) -> dict[str, Any]:
    return {t.name: t.parameters for t in request.tools}


async def test_nothing_is_writable_unless_listed() -> None:
    """Without writable= the agent may read but not write: no write_state
    tool is offered, and a call to one is an unknown tool."""
    model = ScriptedModel(
        Reply.tool_call("write_state", {"owner": "mallory"}), Reply.text("ok")
    )
    out = (await desk(model).run(Ticket())).unwrap()
    assert out.state.owner == "nobody"
    assert set(offered(model.requests[0])) == {"read_state"}
    assert tool_results(out.state.messages)[0].startswith(
        "error: unknown tool; available: ['read_state']"
    )


async def test_each_writable_field_has_its_schema() -> None:
    """write_state lists only the writable fields, each with its JSON
    schema: types stated, enums listed."""
    model = ScriptedModel(Reply.text("ok"))
    await desk(model, writable=["priority", "level", "queue"]).run(Ticket())
    schema = offered(model.requests[0])["write_state"]
    props = schema["properties"]
    assert set(props) == {"priority", "level", "queue"}
    assert props["priority"]["type"] == "integer"
    assert props["level"]["enum"] == ["low", "high"]
    assert props["queue"]["enum"] == ["front", "back"]
    assert schema["additionalProperties"] is False
    assert schema["minProperties"] == 1
    read = offered(model.requests[0])["read_state"]
    assert read["properties"]["field"]["enum"] == [
        "topic",
        "priority",
        "level",
        "queue",
        "owner",
    ]


async def test_writes_are_typed_and_all_or_nothing() -> None:
    """Several fields in one write land together; one that does not fit
    leaves every field as it was and is named without its value."""
    model = ScriptedModel(
        Reply.tool_call("write_state", {"priority": 3, "level": "SECRET"}),
        Reply.tool_call("write_state", {"priority": 2, "level": "high"}),
        Reply.tool_call("write_state", {"owner": "mallory"}),
        Reply.tool_call("write_state", {}),
        Reply.text("ok"),
    )
    out = await desk(model, writable=["priority", "level"]).run(Ticket())
    state = out.unwrap().state
    assert (state.priority, state.level, state.owner) == (
        2,
        Level.HIGH,
        "nobody",
    )
    bad, good, owner, empty = tool_results(state.messages)
    assert "argument 'level': expected one of" in bad
    assert "SECRET" not in bad
    assert good == "state updated: priority, level"
    assert owner.startswith("error: unknown argument(s) ['owner']")
    assert empty == "error: name at least one field to write"


@pytest.fixture(name="thread_switching")
def _thread_switching() -> Iterator[None]:
    """Switch threads as often as the interpreter allows."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


@pytest.mark.slow
@pytest.mark.usefixtures("thread_switching")
async def test_concurrent_writes_in_one_turn_lose_nothing() -> None:
    """Many write_state calls in one turn, each to its own field, all land
    (they used to race in worker threads and drop each other's writes)."""
    fields = ("topic", "priority", "level", "queue", "owner")
    values: dict[str, object] = {
        "topic": "t",
        "priority": 9,
        "level": "high",
        "queue": "back",
        "owner": "ann",
    }
    for _ in range(20):
        calls = [
            ("write_state", {f: values[f]}, f"c{i}")
            for i, f in enumerate(fields * 4)
        ]
        model = ScriptedModel(Reply.tool_calls(*calls), Reply.text("ok"))
        out = await desk(model, writable=fields).run(Ticket())
        state = out.unwrap().state
        assert (state.topic, state.priority, state.level) == (
            "t",
            9,
            Level.HIGH,
        )
        assert (state.queue, state.owner) == ("back", "ann")


def contexts(model: ScriptedModel, **options: Any) -> Graph[Context, object]:
    def messages(c: Context) -> tuple[Message, ...]:
        return tuple(c.messages)

    def update(c: Context, run: AgentRun) -> Context:
        return c.append(*run.messages)

    return (
        graph.builder(Context)
        .agent(
            "desk",
            Agent("desk", model),
            messages=messages,
            update=update,
            **options,
        )
        .entry("desk")
        .edge("desk", END)
        .build()
    )


async def test_context_metadata_by_key_run_id_never() -> None:
    """On a context, read_state reads a metadata key and write_state writes
    the listed keys, typed; run_id and the messages are never offered."""
    model = ScriptedModel(
        Reply.tool_call("read_state", {"key": "customer"}),
        Reply.tool_calls(
            ("write_state", {"topic": "billing", "attempts": 2}, "w1"),
        ),
        Reply.tool_call("write_state", {"run_id": "forged"}),
        Reply.tool_call("write_state", {"metadata": {}}),
        Reply.tool_call("read_state", {"key": "run_id"}),
        Reply.text("ok"),
    )
    start = Context.of(Message.user("hi"), run_id="r1").set("customer", "ann")
    g = contexts(model, writable={"topic": str, "attempts": int})
    out = (await g.run(start)).unwrap().state
    assert out.run_id == "r1"
    assert dict(out.metadata) == {
        "customer": "ann",
        "topic": "billing",
        "attempts": 2,
    }
    read, wrote, run_id, metadata, read_run_id = tool_results(out.messages)
    assert read == json.dumps("ann")
    assert wrote == "metadata updated: topic, attempts"
    assert run_id.startswith("error: unknown argument(s) ['run_id']")
    assert metadata.startswith("error: unknown argument(s) ['metadata']")
    assert read_run_id == "error: no metadata under that key"
    tools = offered(model.requests[0])
    assert set(tools["write_state"]["properties"]) == {"topic", "attempts"}
    assert tools["write_state"]["properties"]["attempts"]["type"] == "integer"
    assert "run_id" not in json.dumps(tools)


def test_forbidden_or_unknown_fields_are_refused_at_build() -> None:
    """Listing run_id, messages, an unknown field or an append-only log is
    a ConstructionError when the graph or swarm is built, not at run time."""
    model = ScriptedModel()
    for bad in (["run_id"], ["messages"], {"metadata": dict}):
        with pytest.raises(ConstructionError):
            contexts(model, writable=bad)
    for wrong in (["nope"], ["messages"]):
        with pytest.raises(ConstructionError):
            desk(model, writable=wrong)
    with pytest.raises(ConstructionError, match="class has the types"):
        desk(model, writable={"topic": str})
    with pytest.raises(ConstructionError):
        (
            swarm.builder(state=Ticket())
            .agent("a", Agent("a", model), writable=["nope"])
            .entry("a")
            .build()
        )
    with pytest.raises(ConstructionError, match="typed state"):
        (
            swarm.builder()
            .agent("a", Agent("a", model), writable=["topic"])
            .entry("a")
            .build()
        )


@tool(name="write_state")
async def own_writer(note: str) -> str:
    """The agent's own tool, by the same name as a state tool."""
    return f"own:{note}"


async def test_own_tool_named_like_a_state_tool_wins_everywhere() -> None:
    """Build and run agree: an agent's own write_state replaces the state
    tool, in a graph over a typed state, over a context, and in a swarm."""

    def script() -> ScriptedModel:
        return ScriptedModel(
            Reply.tool_call("write_state", {"note": "n"}), Reply.text("ok")
        )

    def agent(model: ScriptedModel) -> Agent:
        return Agent("desk", model, tools=[own_writer])

    typed = script()
    g = (
        graph.builder(Ticket)
        .agent(
            "desk", agent(typed), messages=see, update=keep, writable=["topic"]
        )
        .entry("desk")
        .edge("desk", END)
        .build()
    )
    out = (await g.run(Ticket())).unwrap().state
    assert tool_results(out.messages) == ["own:n"]
    assert offered(typed.requests[0])["write_state"] == own_writer.parameters

    ctx_model = script()
    g2 = (
        graph.builder(Context)
        .agent(
            "desk",
            agent(ctx_model),
            messages=lambda c: tuple(c.messages),
            update=lambda c, r: c.append(*r.messages),
            writable=["topic"],
        )
        .entry("desk")
        .edge("desk", END)
        .build()
    )
    ctx = (await g2.run(Context())).unwrap().state
    assert tool_results(ctx.messages) == ["own:n"]

    swarm_model = script()
    team = (
        swarm.builder(state=Ticket())
        .agent("desk", agent(swarm_model), writable=["topic"])
        .entry("desk")
        .build()
    )
    snap = (await team.run(Context.of(Message.user("x")))).unwrap()
    assert [m.content for m in snap.state.messages if m.role is Role.TOOL] == [
        "own:n"
    ]
    names = [t.name for t in swarm_model.requests[0].tools]
    assert names.count("write_state") == 1


def test_state_tools_direct_use() -> None:
    """state_tools gives read_state alone unless something is writable."""

    @attrs.define
    class Box:
        value: Ticket

    (read,) = state_tools(Box(Ticket()), Ticket)
    assert read.name == "read_state"
    read2, write = state_tools(
        Box(Ticket()), Ticket, ["topic"], writable=["owner"]
    )
    assert read2.parameters["properties"]["field"]["enum"] == ["topic"]
    assert list(write.parameters["properties"]) == ["owner"]
