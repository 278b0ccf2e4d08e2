"""Graphs and swarms the Temporal tests run (importable by worker processes).

Nodes that leave traces outside the run (the crash test's) append one
line per execution to the file ``PIPELINE_TEMPORAL_EFFECTS`` names: an
external side-effect counter that survives the worker.
"""

from __future__ import annotations

import os
import sys

from collections.abc import Sequence
from typing import Any

import anyio
import attrs

from pyrsistent import PVector, pvector
from returns.result import Failure, Result, Success
from temporalio import activity

from pipeline import (
    Agent,
    Context,
    Graph,
    Handler,
    Message,
    Swarm,
    handler,
    interrupt,
    map_reduce,
    tool,
)
from pipeline.agents import AgentRun
from pipeline.fold import (
    Continue,
    Decision,
    Gate,
    Interrupt,
    Stop,
    Transition,
)
from pipeline.graph import END, GraphBuilder, builder
from pipeline.models import ModelRequest, ModelResponse
from pipeline.swarm import builder as swarm_builder
from pipeline.testing import Reply, ScriptedModel


EFFECTS_ENV = "PIPELINE_TEMPORAL_EFFECTS"
BLOCK_ENV = "PIPELINE_TEMPORAL_BLOCK"


@attrs.frozen
class Tally:
    """A graph state: a counter, a trail of nodes, notes agents wrote."""

    count: int = 0
    trail: PVector[str] = attrs.field(factory=pvector)
    notes: PVector[str] = attrs.field(factory=pvector)


@attrs.frozen
class Refused:
    """A user failure type (registered with workers and clients)."""

    node: str
    why: str


@attrs.frozen
class Approval:
    """A human's typed answer."""

    approved: bool
    by: str


def bump(name: str) -> Handler[Tally, Tally, Refused]:
    """A node adding one to the count and its name to the trail."""

    @handler(name=name)
    async def run(s: Tally) -> Result[Tally, Refused]:
        return Success(
            attrs.evolve(s, count=s.count + 1, trail=s.trail.append(name))
        )

    return run


def recorded(name: str) -> Handler[Tally, Tally, Refused]:
    """:func:`bump`, recording each execution in the effects file (and,
    in a worker told to block at *name*, saying so and never finishing)."""

    @handler(name=name)
    async def run(s: Tally) -> Result[Tally, Refused]:
        path = os.environ[EFFECTS_ENV]
        async with await anyio.open_file(path, "a") as f:
            await f.write(f"{name}\n")
        if os.environ.get(BLOCK_ENV) == name:
            print(f"blocked {name}", file=sys.stdout, flush=True)  # noqa: T201
            await anyio.sleep_forever()
        return Success(
            attrs.evolve(s, count=s.count + 1, trail=s.trail.append(name))
        )

    return run


def refuse(name: str) -> Handler[Tally, Tally, Refused]:
    """A node failing with a typed value."""

    @handler(name=name)
    async def run(s: Tally) -> Result[Tally, Refused]:
        return Failure(Refused(name, f"count was {s.count}"))

    return run


def chain(names: Sequence[str], *, name: str) -> Graph[Tally, Refused]:
    """Nodes *names* in a line."""
    b: GraphBuilder[Tally, Refused] = builder(Tally).entry(names[0])
    for n in names:
        b = b.node(n, bump(n))
    for a, z in zip(names, (*names[1:], END), strict=True):
        b = b.edge(a, z)
    return b.build(name=name)


CRASH_NODES = ("c1", "c2", "c3", "c4", "c5")


def _crash_graph() -> Graph[Tally, Refused]:
    b: GraphBuilder[Tally, Refused] = builder(Tally).entry(CRASH_NODES[0])
    for n in CRASH_NODES:
        b = b.node(n, recorded(n))
    for a, z in zip(CRASH_NODES, (*CRASH_NODES[1:], END), strict=True):
        b = b.edge(a, z)
    return b.build(name="crash")


CRASH = _crash_graph()


async def approval_gate(t: Transition[Tally]) -> Decision:
    """Ask before ``publish``; stop if the answer is a refusal."""
    if t.targets != ("publish",):
        return Continue()
    answer = t.answer_as(Approval)
    if answer is None:
        return Interrupt("publish?")
    if not answer.approved:
        return Stop(f"refused by {answer.by}")
    return Continue()


def approval_graph(name: str, *gates: Gate[Tally]) -> Graph[Tally, Refused]:
    """Draft, then publish, under *gates*."""
    return (
        builder(Tally)
        .node("draft", bump("draft"))
        .node("publish", bump("publish"))
        .entry("draft")
        .edge("draft", "publish")
        .edge("publish", END)
        .gate(*gates)
        .build(name=name)
    )


APPROVAL = approval_graph("approval", approval_gate)


def signed(t: Tally, a: Approval) -> Tally:
    """The approval, applied: a note naming who approved."""
    word = "approved" if a.approved else "refused"
    return attrs.evolve(t, notes=t.notes.append(f"{word} by {a.by}"))


async def typed_gate(t: Transition[Tally]) -> Decision:
    """Ask before ``publish`` for an Approval, applied to the state."""
    if t.targets != ("publish",):
        return Continue()
    return Interrupt("publish?", Approval, apply=signed)


TYPED = approval_graph("typed-approval", typed_gate)
"""Draft, then publish behind a typed question whose answer is applied."""


def huge(name: str) -> Handler[Tally, Tally, Refused]:
    """:func:`recorded`, adding a note of two megabytes."""
    base = recorded(name)

    @handler(name=name)
    async def run(s: Tally) -> Result[Tally, Refused]:
        out = await base(s)
        if type(out) is not Success:
            return out
        t = out.unwrap()
        return Success(attrs.evolve(t, notes=t.notes.append("x" * 2_000_000)))

    return run


HUGE = (
    builder(Tally)
    .node("grow", huge("grow"))
    .entry("grow")
    .edge("grow", END)
    .build(name="huge")
)
"""One node whose result is past Temporal's payload limit."""


def _nested_graph() -> Graph[Tally, object]:
    """A graph whose second node is :data:`APPROVAL`'s shape as a subgraph:
    its gate asks inside the node (a pause requested by a nested fold)."""
    return (
        builder(Tally)
        .node("before", bump("before"))
        .node("inner", approval_graph("inner", approval_gate))
        .node("after", bump("after"))
        .entry("before")
        .edge("before", "inner")
        .edge("inner", "after")
        .edge("after", END)
        .build(name="nested")
    )


NESTED = _nested_graph()


@handler(name="review")
async def _review(s: Tally) -> Result[Tally, Refused]:
    """Asks inside the node (``pipeline.interrupt``), typed."""
    answer = await interrupt(
        "publish this draft?", Approval, payload={"trail": list(s.trail)}
    )
    if not answer.approved:
        return Failure(Refused("review", f"refused by {answer.by}"))
    return Success(attrs.evolve(s, trail=s.trail.append(f"ok:{answer.by}")))


ASKS = (
    builder(Tally)
    .node("draft", bump("draft"))
    .node("review", _review)
    .entry("draft")
    .edge("draft", "review")
    .edge("review", END)
    .build(name="asks")
)
"""A node that asks a typed question itself."""


def traced(name: str) -> Handler[Tally, Tally, Refused]:
    """:func:`bump`, recording each execution in the effects file: the
    run (the workflow id of the step activity running it), the node and
    the id of the process that ran it (which worker did the step)."""

    @handler(name=name)
    async def run(s: Tally) -> Result[Tally, Refused]:
        path = os.environ[EFFECTS_ENV]
        line = f"{activity.info().workflow_id} {name} {os.getpid()}\n"
        async with await anyio.open_file(path, "a") as f:
            await f.write(line)
        return Success(
            attrs.evolve(s, count=s.count + 1, trail=s.trail.append(name))
        )

    return run


def reviewed(version: str, *nodes: str) -> Graph[Tally, Refused]:
    """The graph ``reviewed`` at *version*: ``draft``, ``publish`` (asked
    for by :func:`approval_gate`), then *nodes*, each traced."""
    names = ("draft", "publish", *nodes)
    b: GraphBuilder[Tally, Refused] = builder(Tally).entry(names[0])
    for n in names:
        b = b.node(n, traced(n))
    for a, z in zip(names, (*names[1:], END), strict=True):
        b = b.edge(a, z)
    return b.gate(approval_gate).build(name="reviewed", version=version)


REVIEWED_V1 = reviewed("1")
REVIEWED_V2 = reviewed("2", "announce")


def note_model(note: str) -> ScriptedModel:
    """A stateless scripted model: asks for the ``noted`` tool once, then
    answers *note* with the tool's result (so it replays identically on
    any worker)."""

    def step(request: ModelRequest) -> ModelResponse:
        last = request.messages[-1] if request.messages else None
        if last is not None and last.name == "noted":
            return Reply.text(f"{note}:{last.content}")
        return Reply.tool_call("noted", {"text": note})

    return ScriptedModel(step, cycle=True, name=note)


@tool
async def noted(text: str) -> str:
    """Echo a note back (a trivial tool)."""
    return text.upper()


def note_agent(note: str) -> Agent:
    """An agent that calls one tool, then answers."""
    return Agent(note, note_model(note), tools=(noted,))


def agent_update(s: Tally, run: AgentRun) -> Tally:
    """Append the agent's last message to the notes."""
    text = run.messages[-1].content if run.messages else ""
    return attrs.evolve(s, count=s.count + 1, notes=s.notes.append(text))


def agent_messages(s: Tally) -> Sequence[Message]:
    """What an agent node sees: the count, as a user message."""
    return (Message.user(f"count {s.count}"),)


def _swarm_model(name: str, target: str | None) -> ScriptedModel:
    def step(request: ModelRequest) -> ModelResponse:
        if target is None:
            return Reply.text(f"{name} answers after {len(request.messages)}")
        return Reply.tool_call(f"transfer_to_{target}")

    return ScriptedModel(step, cycle=True, name=name)


def _relay() -> Swarm[None]:
    """Three agents handing the conversation round: triage, then billing,
    then support, who answers."""
    return (
        swarm_builder()
        .agent(
            "triage",
            Agent("triage", _swarm_model("triage", "billing")),
            handoffs=["billing"],
        )
        .agent(
            "billing",
            Agent("billing", _swarm_model("billing", "support")),
            handoffs=["support"],
        )
        .agent("support", Agent("support", _swarm_model("support", None)))
        .entry("triage")
        .build(name="relay")
    )


RELAY = _relay()


def ask(text: str) -> Context:
    """A context with one user message."""
    return Context.of(Message.user(text))


def _sum_counts(before: int, values: tuple[int, ...]) -> int:
    return before + sum(v - before for v in values)


def _fanout_graph() -> Graph[Tally, object]:
    """An action, a fan-out to an agent and an action, a join."""
    return (
        builder(Tally)
        .node("start", bump("start"))
        .agent(
            "scribe",
            note_agent("scribe"),
            messages=agent_messages,
            update=agent_update,
        )
        .node("side", bump("side"))
        .node("join", bump("join"))
        .entry("start")
        .fan_out(
            "start",
            ["scribe", "side"],
            join="join",
            reducers={"count": _sum_counts},
        )
        .edge("join", END)
        .build(name="fanout")
    )


FANOUT = _fanout_graph()


def _effect_tool_model(name: str) -> ScriptedModel:
    """Asks for the ``effect`` tool twice (``n`` 1, then 2), then answers
    with what the tools said; stateless, so any worker replays it."""

    def step(request: ModelRequest) -> ModelResponse:
        _append_effect("model")
        results = [m.content for m in request.messages if m.name == "effect"]
        if len(results) < 2:
            return Reply.tool_call("effect", {"n": len(results) + 1})
        return Reply.text(f"{name}:" + ",".join(results))

    return ScriptedModel(step, cycle=True, name=name)


def _append_effect(line: str) -> int:
    """One line in the effects file (if one is named); how many lines
    equal to *line* it holds now."""
    path = os.environ.get(EFFECTS_ENV)
    if path is None:
        return 0
    with open(path, "a+", encoding="utf-8") as f:  # noqa: PTH123
        f.write(f"{line}\n")
        f.seek(0)
        return f.read().split().count(line)


@tool(errors=())
def flaky() -> str:
    """A tool with a side effect that raises on its first call (a bug, not
    an error result: it propagates, and its activity is retried)."""
    if _append_effect("flaky") == 1:
        msg = "flaky the first time"
        raise RuntimeError(msg)
    return "steady"


def _flaky_model(name: str) -> ScriptedModel:
    def step(request: ModelRequest) -> ModelResponse:
        _append_effect("model")
        said = [m.content for m in request.messages if m.name == "flaky"]
        if not said:
            return Reply.tool_call("flaky", {})
        return Reply.text(f"{name}:" + ",".join(said))

    return ScriptedModel(step, cycle=True, name=name)


@tool
async def effect(n: int) -> str:
    """A tool with a side effect: one line in the effects file per call
    (and, in a worker told to block at ``tool<n>``, it says so and never
    returns)."""
    path = os.environ[EFFECTS_ENV]
    async with await anyio.open_file(path, "a") as f:
        await f.write(f"tool{n}\n")
    if os.environ.get(BLOCK_ENV) == f"tool{n}":
        print(f"blocked tool{n}", file=sys.stdout, flush=True)  # noqa: T201
        await anyio.sleep_forever()
    return f"done{n}"


def _agent_graph(
    name: str, before: Handler[Tally, Tally, Refused], agent: Agent
) -> Graph[Tally, object]:
    """An action ``before``, then *agent* as a node."""
    return (
        builder(Tally)
        .node("before", before)
        .agent(agent.name, agent, messages=agent_messages, update=agent_update)
        .entry("before")
        .edge("before", agent.name)
        .edge(agent.name, END)
        .build(name=name)
    )


TURNS = _agent_graph(
    "turns",
    bump("before"),
    Agent("worker", _effect_tool_model("worker"), tools=(effect,)),
)
"""One agent node whose turns call a tool with side effects."""


@tool(approval=lambda text: text != "small")
async def guarded(text: str) -> str:
    """Echo a note back, once a person approved it (large notes only)."""
    return text.upper()


def _guarded_model(name: str) -> ScriptedModel:
    def step(request: ModelRequest) -> ModelResponse:
        last = request.messages[-1] if request.messages else None
        if last is not None and last.name == "guarded":
            return Reply.text(f"{name}:{last.content}")
        return Reply.tool_call("guarded", {"text": "large"})

    return ScriptedModel(step, cycle=True, name=name)


GUARDED = _agent_graph(
    "guarded",
    bump("before"),
    Agent("cashier", _guarded_model("cashier"), tools=(guarded,)),
)
"""An action, then an agent whose tool call waits for approval."""
FLAKY = _agent_graph(
    "flaky",
    recorded("before"),
    Agent("caller", _flaky_model("caller"), tools=(flaky,)),
)
"""An action, then an agent whose tool raises once."""


@handler
async def square(x: int) -> Result[int, Refused]:
    """A map_reduce worker: refuses 13, squares the rest."""
    if x == 13:
        return Failure(Refused("square", "13"))
    return Success(x * x)


def _split(s: Tally) -> list[int]:
    return list(range(s.count % 4 + 1))


def mapped(
    name: str, *, fail_fast: bool = False
) -> Handler[Tally, Tally, Any]:
    """A map_reduce node: squares ``0 .. count % 4`` (``13`` too when the
    count is 13), adds one and the squares to the count."""

    def split(s: Tally) -> list[int]:
        return [*_split(s), *([13] if s.count == 13 else [])]

    def reduce(
        s: Tally, results: tuple[Result[int, Refused], ...]
    ) -> Result[Tally, Refused]:
        for r in results:
            if type(r) is not Success:
                return Failure(r.failure())
        total = sum(r.unwrap() for r in results)
        return Success(
            attrs.evolve(
                s, count=s.count + 1 + total, trail=s.trail.append(name)
            )
        )

    return map_reduce(
        split,
        square,
        reduce,
        max_concurrency=2,
        fail_fast=fail_fast,
        name=name,
    )


def limited(t: Tally, limit: int | None) -> Tally:
    """The answer, applied: a note naming the limit (or none)."""
    return attrs.evolve(t, notes=t.notes.append(f"limit {limit}"))


async def optional_gate(t: Transition[Tally]) -> Decision:
    """Ask before ``publish`` for a limit that may be none (``None``)."""
    if t.targets != ("publish",):
        return Continue()
    return Interrupt("limit?", int | None, apply=limited)


OPTIONAL = approval_graph("optional-limit", optional_gate)
"""Draft, then publish behind a question whose answer may be ``None``."""
