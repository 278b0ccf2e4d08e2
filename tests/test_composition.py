"""Agents, graphs and swarms compose like any handler.

``Graph[S, E]`` is a ``Handler[S, S, E | GraphFailure]``, ``Swarm[T]`` and
``Agent`` are ``Handler[Context, Context, ...]``: each goes on either side
of ``>>``, into ``&`` and ``|``, under ``.use()``, inside another graph,
behind a tool, and into ``stream()``, with no wrapper written by the user.
"""

from __future__ import annotations

import json
import logging

from collections import Counter

import anyio
import attrs
import pytest

from pyrsistent import PVector, pvector
from returns.result import Failure, Result, Success

from pipeline import (
    Agent,
    Context,
    Graph,
    Handler,
    Message,
    Role,
    Swarm,
    fold,
    graph,
    handler,
    must,
    stores,
    stream,
    swarm,
)
from pipeline.agents import AgentRun, as_tool
from pipeline.events import (
    Event,
    Finished,
    Handoff,
    MessageComplete,
    NodeFinished,
    NodeStarted,
)
from pipeline.failures import (
    AllFailed,
    ModelError,
    RunPaused,
    RunStopped,
    TimedOut,
)
from pipeline.fold import (
    Continue,
    Decision,
    Interrupt,
    Status,
    Stop,
    Transition,
)
from pipeline.graph import END
from pipeline.middleware import log, retry, timeout
from pipeline.models import ModelRequest, ModelResponse
from pipeline.testing import Reply, ScriptedModel


# -- a graph over a typed state -----------------------------------------------


@attrs.frozen
class Count:
    """A small typed state: a number and the nodes that touched it."""

    n: int = 0
    trail: PVector[str] = attrs.field(factory=pvector)


def bump(
    name: str, by: int, runs: Counter[str] | None = None
) -> Handler[Count, Count, str]:
    """A node adding *by* and its name to the trail."""

    @handler(name=name)
    async def run(c: Count) -> Result[Count, str]:
        if runs is not None:
            runs[name] += 1
        return Success(Count(c.n + by, c.trail.append(name)))

    return run


@handler
async def double(c: Count) -> Result[Count, str]:
    return Success(Count(c.n * 2, c.trail.append("double")))


@handler
async def broken(c: Count) -> Result[Count, str]:
    return Failure("broken node")


def counter(name: str = "counter") -> Graph[Count, str]:
    """inc (+1), then double: 3 -> 8."""
    return (
        graph.builder(Count)
        .node("inc", bump("inc", 1))
        .node("double", double)
        .entry("inc")
        .edge("inc", "double")
        .edge("double", END)
        .build(name=name)
    )


def doomed() -> Graph[Count, str]:
    """A graph whose only node fails."""
    return (
        graph.builder(Count)
        .node("broken", broken)
        .entry("broken")
        .edge("broken", END)
        .build(name="doomed")
    )


@handler
async def parse(text: str) -> Result[Count, ValueError]:
    return Success(Count(int(text)))


@handler
async def show(c: Count) -> Result[str, KeyError]:
    return Success(f"{c.n} via {'/'.join(c.trail)}")


@handler
async def fallback(c: Count) -> Result[Count, str]:
    return Success(Count(-1, c.trail.append("fallback")))


# -- agents and swarms over contexts ------------------------------------------


def texts(ctx: Context) -> list[str]:
    return [m.content for m in ctx.messages]


def echo(name: str = "echo") -> Agent:
    """An agent answering every request with its name and message count."""

    def step(request: ModelRequest) -> ModelResponse:
        return Reply.text(f"{name} saw {len(request.messages)}")

    return Agent(name, ScriptedModel(step, cycle=True))


def front() -> Agent:
    """An agent that always hands over to "back"."""
    return Agent(
        "front",
        ScriptedModel(
            Reply.tool_call("transfer_to_back", call_id="t1"), cycle=True
        ),
    )


def relay() -> Swarm[None]:
    """front hands over to back, which answers."""
    return (
        swarm.builder()
        .agent("front", front(), handoffs=["back"])
        .agent("back", echo("back"))
        .entry("front")
        .build(name="relay")
    )


def failing_swarm() -> Swarm[None]:
    """A swarm whose only agent's provider is down."""
    down = Agent("down", ScriptedModel(Reply.error("down", status=503)))
    return swarm.builder().agent("down", down).entry("down").build()


def doomed_agent() -> Agent:
    """An agent whose provider fails."""
    return Agent("doomed", ScriptedModel(Reply.error("no", status=500)))


@handler
async def ask(ctx: Context) -> Result[Context, str]:
    return Success(ctx.append(Message.user("and then?")))


@handler
async def shout(ctx: Context) -> Result[Context, str]:
    last = ctx.last
    assert last is not None
    return Success(ctx.append(Message.assistant(last.content.upper())))


@attrs.frozen
class Chat:
    """A typed state with a conversation."""

    messages: PVector[Message] = attrs.field(factory=pvector)


def see(c: Chat) -> PVector[Message]:
    return c.messages


def keep(c: Chat, run: AgentRun) -> Chat:
    return Chat(c.messages.extend(run.messages))


HI = Context.of(Message.user("hi"), run_id="r")


# -- >> ------------------------------------------------------------------------


async def test_handlers_feed_a_graph_and_a_graph_feeds_handlers() -> None:
    """parse >> graph >> show runs the graph on parse's output."""
    pipeline = parse >> counter() >> show
    assert await pipeline("3") == Success("8 via inc/double")


async def test_graph_failure_short_circuits_a_chain() -> None:
    """A failing graph stops the chain with its node's failure."""
    seen: list[Count] = []

    @handler
    async def spy(c: Count) -> Result[Count, str]:
        seen.append(c)
        return Success(c)

    out = await (parse >> doomed() >> spy)("1")
    assert out == Failure("broken node")
    assert seen == []


async def test_agents_and_swarms_chain_with_handlers() -> None:
    """ask >> agent >> swarm >> shout: each sees the context so far."""
    out = (await (ask >> echo() >> relay() >> shout)(HI)).unwrap()
    assert texts(out) == [
        "hi",
        "and then?",
        "echo saw 2",
        "",  # front's transfer call
        "Transferring to back...",
        "back saw 5",
        "BACK SAW 5",
    ]
    assert out.run_id == HI.run_id


async def test_swarm_then_agent_then_graph_over_contexts() -> None:
    """A graph over contexts takes a swarm's output like any handler."""
    summary = (
        graph.builder(Context)
        .node("agent", echo("summary"))
        .entry("agent")
        .edge("agent", END)
        .build(name="summary")
    )
    out = (await (relay() >> summary)(HI)).unwrap()
    assert texts(out)[-2:] == ["back saw 3", "summary saw 4"]


# -- & and | ------------------------------------------------------------------


async def test_graph_and_handler_fan_out_to_a_tuple() -> None:
    """g & h runs both on the same state; the outputs form a tuple."""
    both = counter() & show & bump("side", 10)
    assert await both(Count(3)) == Success(
        (
            Count(8, pvector(["inc", "double"])),
            "3 via ",
            Count(13, pvector(["side"])),
        )
    )


async def test_context_branches_merge_in_definition_order() -> None:
    """agent & swarm & handler: each branch's messages, in definition order."""
    merged = (await must(echo(), relay(), shout)(HI)).unwrap()
    assert texts(merged) == [
        "hi",
        "echo saw 1",
        "",
        "Transferring to back...",
        "back saw 3",
        "HI",
    ]


async def test_a_failing_branch_fails_the_fan_out() -> None:
    """The first failure of g & h is the result."""
    out = await (doomed() & counter())(Count(1))
    assert out == Failure("broken node")


async def test_race_falls_back_when_the_graph_fails() -> None:
    """g | h: a failing graph loses to the handler's success."""
    assert await (doomed() | fallback)(Count(5)) == Success(
        Count(-1, pvector(["fallback"]))
    )
    assert await (fallback | doomed())(Count(5)) == Success(
        Count(-1, pvector(["fallback"]))
    )


async def test_race_of_failing_swarm_and_agent() -> None:
    """A swarm whose model is down loses to an agent; all failing lists both."""
    out = (await (failing_swarm() | echo())(HI)).unwrap()
    assert texts(out) == ["hi", "echo saw 1"]
    both_fail = await (failing_swarm() | doomed_agent())(HI)
    assert isinstance(both_fail, Failure)
    err = both_fail.failure()
    assert isinstance(err, AllFailed)
    assert [type(f) for f in err.failures] == [ModelError, ModelError]


# -- .use() -------------------------------------------------------------------


async def test_retry_reruns_a_graph_that_failed() -> None:
    """graph.use(retry(...)) runs the whole graph again after a failure."""
    attempts = Counter[str]()

    @handler(name="flaky")
    async def flaky(c: Count) -> Result[Count, str]:
        attempts["flaky"] += 1
        if attempts["flaky"] < 3:
            return Failure("not yet")
        return Success(Count(c.n + 1, c.trail.append("flaky")))

    g = (
        graph.builder(Count)
        .node("flaky", flaky)
        .entry("flaky")
        .edge("flaky", END)
        .build(name="g")
    )
    out = await g.use(retry(3))(Count(1))
    assert out == Success(Count(2, pvector(["flaky"])))
    assert attempts["flaky"] == 3


async def test_retry_reruns_a_swarm_whose_model_failed_once() -> None:
    """swarm.use(retry(2)): a provider error, then an answer."""
    model = ScriptedModel(Reply.error("blip", status=503), Reply.text("ok"))
    solo = swarm.builder().agent("solo", Agent("solo", model)).entry("solo")
    out = (await solo.build().use(retry(2))(HI)).unwrap()
    assert texts(out) == ["hi", "ok"]
    model.assert_consumed()


async def test_timeout_cancels_a_graph_and_fails_typed() -> None:
    """graph.use(timeout(s)) cancels a blocked node; the failure is TimedOut."""
    released = anyio.Event()
    cleaned: list[str] = []

    @handler(name="wait")
    async def wait(c: Count) -> Result[Count, str]:
        try:
            await released.wait()  # never set: only the timeout ends it
        finally:
            cleaned.append("wait")
        return Success(c)  # pragma: no cover

    g = (
        graph.builder(Count)
        .node("wait", wait)
        .entry("wait")
        .edge("wait", END)
        .build(name="slow")
    )
    out = await g.use(timeout(0.01))(Count())
    assert out == Failure(TimedOut(0.01, path=("slow",)))
    assert cleaned == ["wait"]
    assert await counter().use(timeout(5))(Count(3)) == Success(
        Count(8, pvector(["inc", "double"]))
    )


async def test_log_wraps_agent_graph_and_swarm(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """log() on each records its start and finish under its name."""
    caplog.set_level(logging.DEBUG, logger="pipeline")
    await echo().use(log())(HI)
    await relay().use(log())(HI)
    await counter().use(log())(Count())
    await doomed().use(log())(Count())
    finishes = [
        (r.pipeline_handler, r.pipeline_outcome)  # type: ignore[attr-defined]
        for r in caplog.records
        if getattr(r, "pipeline_event", "") == "finish"
    ]
    assert finishes == [
        ("echo", "success"),
        ("relay", "success"),
        ("counter", "success"),
        ("doomed", "failure"),
    ]


# -- graphs inside graphs -----------------------------------------------------


async def test_graph_as_a_node_of_another_graph() -> None:
    """A subgraph is a node; the outer graph runs it to END, then goes on."""
    outer = (
        graph.builder(Count)
        .node("pre", bump("pre", 10))
        .node("sub", counter("sub"))
        .node("post", bump("post", 100))
        .entry("pre")
        .edge("pre", "sub")
        .edge("sub", "post")
        .edge("post", END)
        .build(name="outer")
    )
    done = (await outer.run(Count(1))).unwrap()
    assert done.state == Count(
        (1 + 10 + 1) * 2 + 100, pvector(["pre", "inc", "double", "post"])
    )
    assert done.step == 3  # the subgraph is one step of the outer graph
    store = stores.MemoryStore()
    kept = (await outer.run(Count(1), store=store, thread_id="t")).unwrap()
    assert kept.state == done.state
    assert kept.status is Status.DONE


async def test_subgraph_failure_is_located_in_the_outer_graph() -> None:
    """A failing subgraph fails its node."""
    outer = (
        graph.builder(Count)
        .node("sub", doomed())
        .entry("sub")
        .edge("sub", END)
        .build(name="outer")
    )
    assert await outer(Count()) == Failure("broken node")


def approval(answers: list[object]) -> fold.Gate[Count]:
    """Interrupt before "risky" until a human answered; record answers."""

    async def gate(t: Transition[Count]) -> Decision:
        if t.targets != ("risky",):
            return Continue()
        answers.append(t.answer)
        if t.answer is None:
            return Interrupt("run the risky step?")
        if t.answer == "yes":
            return Continue()
        return Stop("refused")

    return gate


def gated_sub(runs: Counter[str], answers: list[object]) -> Graph[Count, str]:
    return (
        graph.builder(Count)
        .node("safe", bump("safe", 1, runs))
        .node("risky", bump("risky", 1000, runs))
        .entry("safe")
        .edge("safe", "risky")
        .edge("risky", END)
        .gate(approval(answers))
        .build(name="sub")
    )


def parent_of(
    sub: Graph[Count, str], runs: Counter[str]
) -> Graph[Count, str | graph.GraphFailure]:
    return (
        graph.builder(Count)
        .node("pre", bump("pre", 10, runs))
        .node("sub", sub)
        .node("post", bump("post", 100, runs))
        .entry("pre")
        .edge("pre", "sub")
        .edge("sub", "post")
        .edge("post", END)
        .build(name="parent")
    )


async def test_interrupt_inside_a_subgraph_pauses_and_resumes_the_parent() -> (
    None
):
    """The inner gate's interrupt pauses the checkpointed parent; the answer
    resumes the inner graph where it stopped, and the parent finishes."""
    runs = Counter[str]()
    answers: list[object] = []
    store = stores.MemoryStore()
    parent = parent_of(gated_sub(runs, answers), runs)

    paused = (await parent.run(Count(), store=store, thread_id="t")).unwrap()
    assert paused.status is Status.INTERRUPTED
    assert paused.pending is not None
    assert paused.pending.question == "run the risky step?"
    assert runs == Counter({"pre": 1, "safe": 1})
    assert answers == [None]

    # A new process: fresh graphs, same store.
    parent = parent_of(gated_sub(runs, answers), runs)
    done = (await parent.resume(store, "t", answer="yes")).unwrap()
    assert done.status is Status.DONE
    assert done.state == Count(
        10 + 1 + 1000 + 100, pvector(["pre", "safe", "risky", "post"])
    )
    assert answers == [None, "yes"]
    assert runs == Counter({"pre": 1, "safe": 1, "risky": 1, "post": 1})
    assert (await parent.load(store, "t")).unwrap().status is Status.DONE


async def test_inner_refusal_after_resume_stops_the_parent() -> None:
    """Answering "no" makes the inner gate stop; the parent stops with it,
    for good: a stopped record with the inner reason, which a resume
    returns without running anything."""
    runs = Counter[str]()
    answers: list[object] = []
    store = stores.MemoryStore()
    parent = parent_of(gated_sub(runs, answers), runs)
    await parent.run(Count(), store=store, thread_id="t")
    out = (await parent.resume(store, "t", answer="no")).unwrap()
    assert (out.status, out.reason) == (Status.STOPPED, "refused")
    assert "risky" not in runs
    assert (await parent.load(store, "t")).unwrap() == out
    before = Counter(runs)
    assert (await parent.resume(store, "t")).unwrap() == out
    assert runs == before


def approved_relay(
    answers: list[object], models: list[ScriptedModel]
) -> Swarm[None]:
    """relay() whose handoff waits for a human's "yes"."""

    async def gate(t: Transition[swarm.SwarmState[None]]) -> Decision:
        answers.append(t.answer)
        if t.answer is None:
            return Interrupt("hand over to back?")
        return Continue() if t.answer == "yes" else Stop("refused")

    first = front()
    assert isinstance(first.model, ScriptedModel)
    models.append(first.model)
    return (
        swarm.builder()
        .agent("front", first, handoffs=["back"])
        .agent("back", echo("back"))
        .entry("front")
        .before_handoff(gate)
        .build(name="team")
    )


async def test_interrupt_inside_a_swarm_node_pauses_the_parent() -> None:
    """A swarm node's before-handoff interrupt pauses the checkpointed graph;
    the answer resumes the swarm at the handoff (front is not asked again)."""
    answers: list[object] = []
    models: list[ScriptedModel] = []
    store = stores.MemoryStore()

    def parent() -> Graph[Context, object]:
        return (
            graph.builder(Context)
            .node("team", approved_relay(answers, models))
            .entry("team")
            .edge("team", END)
            .build(name="parent")
        )

    paused = (await parent().run(HI, store=store, thread_id="t")).unwrap()
    assert paused.status is Status.INTERRUPTED
    assert paused.pending is not None
    assert paused.pending.question == "hand over to back?"
    done = (await parent().resume(store, "t", answer="yes")).unwrap()
    assert done.status is Status.DONE
    assert texts(done.state) == [
        "hi",
        "",
        "Transferring to back...",
        "back saw 3",
    ]
    assert answers == [None, "yes"]
    assert [len(m.requests) for m in models] == [1, 0]


async def test_interrupt_inside_a_swarm_agent_node_pauses_the_parent() -> None:
    """The same through .agent(): the answer reaches the swarm's gate."""
    answers: list[object] = []
    models: list[ScriptedModel] = []
    store = stores.MemoryStore()

    def parent() -> Graph[Chat, object]:
        return (
            graph.builder(Chat)
            .agent(
                "team",
                approved_relay(answers, models),
                messages=see,
                update=keep,
            )
            .entry("team")
            .edge("team", END)
            .build(name="parent")
        )

    start = Chat(pvector([Message.user("hi")]))
    paused = (await parent().run(start, store=store, thread_id="t")).unwrap()
    assert paused.status is Status.INTERRUPTED
    done = (await parent().resume(store, "t", answer="yes")).unwrap()
    assert answers == [None, "yes"]
    assert done.status is Status.DONE
    assert [m.content for m in done.state.messages][-1] == "back saw 3"
    assert [len(m.requests) for m in models] == [1, 0]


async def test_graph_handler_gate_stop_is_run_stopped() -> None:
    """Called as a handler, a graph whose gate stops fails with RunStopped."""

    async def stop(t: Transition[Count]) -> Decision:
        return Stop("enough") if t.source == "inc" else Continue()

    g = (
        graph.builder(Count)
        .node("inc", bump("inc", 1))
        .node("double", double)
        .entry("inc")
        .edge("inc", "double")
        .edge("double", END)
        .gate(stop)
        .build(name="stopping")
    )
    out = await g(Count(1))
    assert out == Failure(RunStopped("enough", path=("stopping",)))
    seen: list[Count] = []

    @handler
    async def after(c: Count) -> Result[Count, str]:
        seen.append(c)
        return Success(c)

    assert isinstance(await (g >> after)(Count(1)), Failure)
    assert seen == []  # nothing runs on a half-finished state
    snap = (await g.run(Count(1))).unwrap()  # run() gives the snapshot
    assert snap.status is Status.STOPPED
    assert snap.state == Count(2, pvector(["inc"]))


async def test_graph_handler_gate_interrupt_is_run_paused() -> None:
    """Outside a checkpointed run a pause has nowhere to wait: RunPaused."""
    runs = Counter[str]()
    g = gated_sub(runs, [])
    out = await g(Count())
    assert out == Failure(RunPaused("run the risky step?", path=("sub",)))
    assert runs == Counter({"safe": 1})
    # Inside a parent that keeps no checkpoints it is a failure too.
    inside = await parent_of(gated_sub(runs, []), runs)(Count())
    assert inside == Failure(
        RunPaused("run the risky step?", path=("sub", "sub"))
    )


async def test_swarm_handler_before_handoff_stop_is_run_stopped() -> None:
    """A swarm's before-handoff gate that stops fails the handler."""

    async def no_handoffs(
        t: Transition[swarm.SwarmState[None]],
    ) -> Decision:
        return Stop("stay")

    team = (
        swarm.builder()
        .agent("front", front(), handoffs=["back"])
        .agent("back", echo("back"))
        .entry("front")
        .before_handoff(no_handoffs)
        .build(name="stay")
    )
    out = await team(HI)
    assert isinstance(out, Failure)
    assert out.failure() == RunStopped("stay", path=("stay",))


# -- as tools -----------------------------------------------------------------


def caller(tool_name: str, arguments: dict[str, object]) -> ScriptedModel:
    """Calls *tool_name* once, then answers with the tool's result."""

    def step(request: ModelRequest) -> ModelResponse:
        results = [m for m in request.messages if m.role is Role.TOOL]
        if not results:
            return Reply.tool_call(tool_name, dict(arguments), call_id="c1")
        return Reply.text(f"tool said: {results[-1].content}")

    return ScriptedModel(step, cycle=True)


async def test_swarm_as_an_agents_tool() -> None:
    """as_tool(swarm): the prompt starts a fresh conversation; the final text
    is the tool's result."""
    team_tool = as_tool(relay(), name="team", description="Ask the team.")
    assert team_tool.name == "team"
    assert team_tool.description == "Ask the team."
    assert team_tool.parameters["required"] == ["prompt"]
    boss = Agent("boss", caller("team", {"prompt": "help"}), tools=[team_tool])
    run = (await boss.run([Message.user("go")])).unwrap()
    result = run.messages[1]
    assert result.role is Role.TOOL
    assert result.content == "back saw 3"  # help, transfer call, its result
    assert run.text == "tool said: back saw 3"


async def test_failing_swarm_tool_is_an_error_result() -> None:
    """A swarm failing inside a tool becomes an error result, not a crash."""
    boss = Agent(
        "boss",
        caller("down", {"prompt": "help"}),
        tools=[as_tool(failing_swarm(), name="down")],
    )
    run = (await boss.run([Message.user("go")])).unwrap()
    assert run.messages[1].content.startswith("error:")
    assert "down" in run.messages[1].content


@attrs.frozen
class Score:
    """A typed state of plain JSON-able fields."""

    n: int
    notes: tuple[str, ...] = ()


@handler
async def triple(s: Score) -> Result[Score, str]:
    return Success(Score(s.n * 3, (*s.notes, "tripled")))


def scorer() -> Graph[Score, str]:
    return (
        graph.builder(Score)
        .node("triple", triple)
        .entry("triple")
        .edge("triple", END)
        .build(name="scorer")
    )


async def test_typed_graph_as_an_agents_tool() -> None:
    """as_tool(graph over Score): the state's fields in, the final state out."""
    tool_ = as_tool(scorer(), name="score")
    assert tool_.parameters["properties"] == {
        "n": {"type": "integer"},
        "notes": {"type": "array", "items": {"type": "string"}},
    }
    assert tool_.parameters["required"] == ["n"]
    boss = Agent(
        "boss", caller("score", {"n": 3, "notes": ["start"]}), tools=[tool_]
    )
    run = (await boss.run([Message.user("go")])).unwrap()
    result = run.messages[1]
    assert result.role is Role.TOOL
    assert json.loads(result.content) == {
        "n": 9,
        "notes": ["start", "tripled"],
    }
    assert run.text == f"tool said: {result.content}"


async def test_typed_graph_tool_refuses_arguments_of_another_shape() -> None:
    """Arguments that do not make the state are an error result."""
    boss = Agent(
        "boss",
        caller("score", {"n": "three"}),
        tools=[as_tool(scorer(), name="score")],
    )
    run = (await boss.run([Message.user("go")])).unwrap()
    assert run.messages[1].content.startswith("error:")
    assert "three" not in run.messages[1].content


async def test_graph_tool_over_a_state_with_a_vector_log() -> None:
    """A state with a PVector log (the codec's append-only field) is a tool
    too: the log is a JSON array."""
    tool_ = as_tool(counter(), name="count")
    assert tool_.parameters["properties"]["trail"]["type"] == "array"
    boss = Agent(
        "boss", caller("count", {"n": 3, "trail": ["start"]}), tools=[tool_]
    )
    run = (await boss.run([Message.user("go")])).unwrap()
    assert json.loads(run.messages[1].content) == {
        "n": 8,
        "trail": ["start", "inc", "double"],
    }


async def test_context_graph_as_an_agents_tool() -> None:
    """A graph over contexts is a prompt-taking tool, like an agent."""
    g = (
        graph.builder(Context)
        .node("answer", echo("inner"))
        .entry("answer")
        .edge("answer", END)
        .build(name="inner-graph")
    )
    tool_ = as_tool(g)
    assert tool_.name == "inner-graph"
    boss = Agent("boss", caller("inner-graph", {"prompt": "q"}), tools=[tool_])
    run = (await boss.run([Message.user("go")])).unwrap()
    assert run.messages[1].content == "inner saw 1"


# -- graph and agent nodes ----------------------------------------------------


async def test_swarm_and_agent_as_agent_nodes() -> None:
    """.agent() takes an agent or any context handler (a swarm here)."""
    g = (
        graph.builder(Chat)
        .agent("team", relay(), messages=see, update=keep)
        .agent("echo", echo(), messages=see, update=keep)
        .entry("team")
        .edge("team", "echo")
        .edge("echo", END)
        .build()
    )
    done = (await g.run(Chat(pvector([Message.user("hi")])))).unwrap()
    assert [m.content for m in done.state.messages] == [
        "hi",
        "",
        "Transferring to back...",
        "back saw 3",
        "echo saw 4",
    ]


# -- stream -------------------------------------------------------------------


async def collect(
    h: Handler[Count, Count, object], value: Count
) -> tuple[list[Event], Result[Count, object] | None]:
    async with stream(h, value) as events:
        seen = [e async for e in events]
        return seen, events.result


async def test_stream_of_a_graph_yields_its_node_events() -> None:
    """stream(g, x): NodeStarted/NodeFinished per node, then Finished."""
    g = counter()
    seen, result = await collect(g, Count(3))
    assert seen[:-1] == [
        NodeStarted(("inc",), 0),
        NodeFinished(("inc",), 1),
        NodeStarted(("double",), 1),
        NodeFinished(("double",), 2),
    ]
    final = seen[-1]
    assert isinstance(final, Finished)
    ran = (await g.run(Count(3))).unwrap()
    assert final.result == result == Success(ran.state)
    assert result == await g(Count(3))


async def test_stream_of_a_chain_with_a_graph() -> None:
    """stream(parse >> g >> show) has the graph's events and its result."""
    async with stream(parse >> counter() >> show, "3") as events:
        seen = [e async for e in events]
    assert [type(e) for e in seen] == [
        NodeStarted,
        NodeFinished,
        NodeStarted,
        NodeFinished,
        Finished,
    ]
    assert events.result == Success("8 via inc/double")


async def test_stream_of_a_swarm_and_an_agent() -> None:
    """stream(swarm) yields the handoff and every message; the result is the
    handler's."""
    async with stream(relay(), HI) as events:
        seen = [e async for e in events]
    handoffs = [e for e in seen if isinstance(e, Handoff)]
    assert handoffs == [Handoff("front", "back", 1)]
    complete = [
        e.message.content for e in seen if isinstance(e, MessageComplete)
    ]
    assert complete == ["", "Transferring to back...", "back saw 3"]
    final = seen[-1]
    assert isinstance(final, Finished)
    assert final.result == await relay()(HI)
    async with stream(echo(), HI) as agent_events:
        from_agent = [e async for e in agent_events]
    assert [type(e) for e in from_agent][-1] is Finished
    assert agent_events.result == await echo()(HI)
