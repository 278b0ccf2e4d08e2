"""Composed agents keep an audit trail; leaving a stream early costs no
model call (issue 10, item 5)."""

from __future__ import annotations

import attrs

from pyrsistent import PVector, pvector

from pipeline import Agent, Context, Message, Role, graph, stream, swarm, tool
from pipeline.agents import AgentRun, ParallelAgent, SequentialAgent, as_tool
from pipeline.events import MessageComplete, ToolCallFinished
from pipeline.graph import END
from pipeline.testing import Reply, ScriptedAgent, ScriptedModel


@tool
async def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def worker(name: str, key: str) -> Agent:
    """An agent that calls lookup once, then answers."""
    model = ScriptedModel(
        Reply.tool_call("lookup", {"key": key}, call_id=f"{name}-1"),
        Reply.text(f"{name} found {key}"),
    )
    return Agent(name, model, tools=[lookup])


def trail(messages: tuple[Message, ...]) -> list[tuple[str | None, Role, str]]:
    """Who added each message, its role and its text."""
    return [(m.agent, m.role, m.content) for m in messages]


async def test_parallel_agent_keeps_tool_calls_tagged() -> None:
    """The merged run holds each sub-agent's tool calls and results, tagged
    with that agent, in definition order, then the merged answer."""
    team = ParallelAgent("team", [worker("a", "x"), worker("b", "y")])
    run = (await team.run([Message.user("go")])).unwrap()
    assert trail(run.messages) == [
        ("a", Role.ASSISTANT, ""),
        ("a", Role.TOOL, "value of x"),
        ("b", Role.ASSISTANT, ""),
        ("b", Role.TOOL, "value of y"),
        ("team", Role.ASSISTANT, "[a]\na found x\n\n[b]\nb found y"),
    ]
    assert run.messages[0].tool_calls[0].id == "a-1"
    assert run.messages[1].tool_call_id == "a-1"
    again = ParallelAgent("team", [worker("a", "x"), worker("b", "y")])
    out = (await again(Context.of(Message.user("go")))).unwrap()
    assert [m.agent for m in out.messages] == [
        None,
        "a",
        "a",
        "b",
        "b",
        "team",
    ]


async def test_sequential_agent_tags_what_each_agent_added() -> None:
    """Every message a sequential agent returns names the agent that added
    it, scripted agents included."""
    team = SequentialAgent(
        "relay", [worker("a", "x"), ScriptedAgent("b", ["b is done"])]
    )
    run = (await team.run([Message.user("go")])).unwrap()
    assert trail(run.messages) == [
        ("a", Role.ASSISTANT, ""),
        ("a", Role.TOOL, "value of x"),
        ("a", Role.ASSISTANT, "a found x"),
        ("b", Role.ASSISTANT, "b is done"),
    ]


@attrs.frozen
class Desk:
    """A graph state keeping a conversation."""

    messages: PVector[Message] = attrs.field(factory=pvector)


async def test_graph_and_swarm_nodes_keep_the_trail() -> None:
    """A graph node running a parallel agent, and a swarm, keep the tool
    calls in the conversation, tagged."""

    def see(d: Desk) -> PVector[Message]:
        return d.messages

    def keep(d: Desk, run: AgentRun) -> Desk:
        return Desk(d.messages.extend(run.messages))

    team = ParallelAgent("team", [worker("a", "x"), worker("b", "y")])
    g = (
        graph.builder(Desk)
        .agent("team", team, messages=see, update=keep)
        .entry("team")
        .edge("team", END)
        .build()
    )
    state = (await g.run(Desk(pvector([Message.user("go")])))).unwrap().state
    assert [
        (m.agent, m.role) for m in state.messages if m.role is Role.TOOL
    ] == [
        ("a", Role.TOOL),
        ("b", Role.TOOL),
    ]
    crew = swarm.builder().agent("a", worker("a", "x")).entry("a").build()
    out = (await crew(Context.of(Message.user("go")))).unwrap()
    assert trail(tuple(out.messages)) == [
        (None, Role.USER, "go"),
        ("a", Role.ASSISTANT, ""),
        ("a", Role.TOOL, "value of x"),
        ("a", Role.ASSISTANT, "a found x"),
    ]


def test_composed_agents_have_a_description() -> None:
    """Parallel, sequential and scripted agents carry a description, which
    as_tool shows to the calling model."""
    team = ParallelAgent("team", [worker("a", "x")], description="Two views.")
    relay = SequentialAgent(
        "relay", [worker("a", "x")], description="In turn."
    )
    scripted = ScriptedAgent("s", [], description="Canned.")
    assert as_tool(team).description == "Two views."
    assert as_tool(relay).description == "In turn."
    assert as_tool(scripted).description == "Canned."
    assert as_tool(ParallelAgent("p", [scripted])).description == (
        "Ask the 'p' agent to do a task."
    )


async def test_leaving_a_stream_early_starts_no_model_call() -> None:
    """A reader that leaves after the first agent's answer never makes the
    second agent call its model (nor the first agent call it again)."""
    first = ScriptedModel(Reply.text("one"))
    second = ScriptedModel(Reply.text("two"), strict=False)
    relay = SequentialAgent("relay", [Agent("a", first), Agent("b", second)])
    async with stream(relay, Context.of(Message.user("go"))) as events:
        async for event in events:
            if isinstance(event, MessageComplete):
                break
    assert len(first.requests) == 1
    assert second.requests == []

    looping = ScriptedModel(
        Reply.tool_call("lookup", {"key": "k"}),
        Reply.text("done"),
        strict=False,
    )
    agent = Agent("loop", looping, tools=[lookup])
    async with stream(agent, Context.of(Message.user("go"))) as events:
        async for event in events:
            if isinstance(event, ToolCallFinished):
                break
    assert len(looping.requests) == 1


async def test_a_reader_that_stays_sees_every_call() -> None:
    """Reading on lets the run go on to the end, calls in order."""
    first = ScriptedModel(Reply.text("one"))
    second = ScriptedModel(Reply.text("two"))
    relay = SequentialAgent("relay", [Agent("a", first), Agent("b", second)])
    with first, second:
        async with stream(relay, Context.of(Message.user("go"))) as events:
            texts = [
                e.message.content
                async for e in events
                if isinstance(e, MessageComplete)
            ]
    assert texts == ["one", "two"]
