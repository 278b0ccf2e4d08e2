"""Crashes inside agent turns: a committed tool call never runs again.

An agent's loop is a fold whose step is one turn (a model call and the tool
calls it asks for).  Inside a checkpointed graph or swarm every turn is a
progress record, so a crash loses at most the turn in flight.  These tests
kill the run (a ``BaseException`` nothing catches) at seeded points:

* ``model``: as the k-th model call starts (the scripted step raises);
* ``tool``: in the k-th tool call, before or after its side effect;
* ``before-record``: as the store is asked for its k-th commit;
* ``after-record``: once the k-th commit is durable, before anyone knows.

Then a fresh graph (or swarm) resumes from the store, as a restarted
process would, with the same outside world: tool side effects are counted
per call id, model calls per (agent, turn).  Scripted models answer from the
request (how many turns the agent already took in it), so the same script
serves the first run and the resumed one.
"""

from __future__ import annotations

import json
import os
import random

from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, Literal, TypeAlias

import attrs
import pytest

from pyrsistent import PVector, pvector
from returns.result import Result, Success

from pipeline import (
    Agent,
    Context,
    Message,
    Role,
    Swarm,
    Tool,
    graph,
    handler,
    swarm,
    tool,
)
from pipeline.agents import AgentRun
from pipeline.fold import Snapshot
from pipeline.graph import END
from pipeline.models import ModelRequest, ModelResponse
from pipeline.stores import (
    CheckpointStore,
    Lease,
    MemoryStore,
    Record,
    SQLiteStore,
)
from pipeline.testing import Reply, ScriptedModel
from tests.stores import CommitResult, DelegatingStore


Point: TypeAlias = Literal["model", "tool", "before-record", "after-record"]
POINTS: tuple[Point, ...] = ("model", "tool", "before-record", "after-record")
# Trials per shape and per store, on each anyio backend; raise for soaks.
RUNS = int(os.environ.get("PIPELINE_TURN_CRASH_RUNS", "80"))
SQLITE_RUNS = max(4, RUNS // 8)


class SimulatedCrash(BaseException):
    """The process dies here (a BaseException: nothing may catch it)."""


# -- the outside world --------------------------------------------------------


class World:
    """What survives a crash: tool side effects and model calls, counted.

    *point* and *at* say where the armed world crashes: the *at*-th model
    call, tool call or store commit.  *effect_first*: a crashing tool call
    has done its side effect before it dies.
    """

    def __init__(
        self,
        point: Point | None = None,
        at: int = 0,
        *,
        effect_first: bool = False,
    ) -> None:
        self.point, self.at, self.effect_first = point, at, effect_first
        self.armed = point is not None
        self.effects: Counter[str] = Counter()  # per tool call id
        self.asked: Counter[tuple[str, int]] = Counter()  # per (agent, turn)
        self.model_calls = 0
        self.tool_calls = 0
        self.commits = 0
        self.crashed: str | None = None  # the tool call that died

    def ask(self, agent: str, turn: int) -> None:
        """A model call starts (and dies here if it is the chosen one)."""
        self.model_calls += 1
        self.asked[agent, turn] += 1
        if self._hit("model", self.model_calls):
            raise SimulatedCrash

    def act(self, ref: str) -> None:
        """A tool call does its side effect (dying before or after it)."""
        self.tool_calls += 1
        hit = self._hit("tool", self.tool_calls)
        if hit:
            self.crashed = ref
        if hit and not self.effect_first:
            raise SimulatedCrash
        self.effects[ref] += 1
        if hit:
            raise SimulatedCrash

    def _hit(self, point: Point, n: int) -> bool:
        return self.armed and self.point == point and n == self.at


class CrashingStore(DelegatingStore):
    """A store that dies around its world's chosen commit."""

    def __init__(self, inner: CheckpointStore, world: World) -> None:
        self.inner, self.world = inner, world

    async def commit(
        self,
        record: Record,
        *,
        expected_head: int | None,
        lease: Lease | None = None,
    ) -> CommitResult:
        world = self.world
        world.commits += 1
        if world._hit("before-record", world.commits):
            raise SimulatedCrash
        out = await self.inner.commit(
            record, expected_head=expected_head, lease=lease
        )
        if world._hit("after-record", world.commits):
            raise SimulatedCrash
        return out


def make_tools(world: World) -> list[Tool]:
    """Real tools whose side effects land in *world*, per call id."""

    @tool
    async def charge(ref: str, amount: int) -> str:
        """Charge a card.

        Args:
            ref: the idempotency reference
            amount: how much
        """
        world.act(ref)
        return f"charged {amount} ({ref})"

    @tool
    async def ship(ref: str, parcel: str) -> str:
        """Ship a parcel.

        Args:
            ref: the idempotency reference
            parcel: what to ship
        """
        world.act(ref)
        return f"shipped {parcel} ({ref})"

    return [charge, ship]


# -- plans and scripted models -------------------------------------------------


@attrs.frozen
class Turn:
    """One scripted turn: tool calls ``(tool, value)``, and maybe a transfer.

    A turn with neither is the agent's final answer.
    """

    calls: tuple[tuple[str, int], ...] = ()
    transfer: str | None = None


Plan: TypeAlias = dict[str, tuple[Turn, ...]]


def call_id(agent: str, turn: int, j: int) -> str:
    """Unique across a run; ``<agent>-<turn>`` names the turn."""
    return f"{agent}-{turn}-{j}"


def reply(agent: str, n: int, turn: Turn) -> ModelResponse:
    """The model's reply for *agent*'s turn *n*."""
    if not turn.calls and turn.transfer is None:
        return Reply.text(f"{agent} is done after {n} turns")
    calls: list[tuple[str, dict[str, Any], str]] = []
    for j, (name, value) in enumerate(turn.calls):
        ref = call_id(agent, n, j)
        if name == "charge":
            calls.append((name, {"ref": ref, "amount": value}, ref))
        elif name == "ship":
            calls.append((name, {"ref": ref, "parcel": f"p{value}"}, ref))
        elif name == "write_state":
            calls.append((name, {"total": value}, ref))
        else:
            calls.append((name, {"field": "total"}, ref))
    if turn.transfer is not None:
        calls.append(
            (f"transfer_to_{turn.transfer}", {}, call_id(agent, n, 99))
        )
    return Reply.tool_calls(*calls)


def turns_taken(agent: str, request: ModelRequest) -> int:
    """How many turns *agent* already took in the conversation it is shown."""
    return sum(
        1
        for m in request.messages
        if m.role is Role.ASSISTANT and m.name == agent
    )


def model_for(agent: str, plan: Plan, world: World) -> ScriptedModel:
    """A model answering *agent*'s turns from the request alone."""

    def step(request: ModelRequest) -> ModelResponse:
        n = turns_taken(agent, request)
        world.ask(agent, n)
        return reply(agent, n, plan[agent][n])

    return ScriptedModel(step, name=agent, cycle=True)


def random_turns(
    rng: random.Random, *, typed: bool, last: Turn
) -> tuple[Turn, ...]:
    """1-3 tool turns of 1-3 calls, then *last*.

    At most one state tool per turn: concurrent writes of one field would
    make the uninterrupted run itself nondeterministic.
    """
    turns: list[Turn] = []
    for _ in range(rng.randint(1, 3)):
        calls = [
            (rng.choice(("charge", "ship")), rng.randint(1, 99))
            for _ in range(rng.randint(1, 3))
        ]
        if typed and rng.random() < 0.4:
            state_call = rng.choice(("write_state", "read_state"))
            calls.insert(
                rng.randint(0, len(calls)), (state_call, rng.randint(1, 99))
            )
        turns.append(Turn(tuple(calls)))
    return (*turns, last)


# -- the machines under test ------------------------------------------------------


@attrs.frozen
class Desk:
    """A graph state: the conversation and a field the agents may write."""

    messages: PVector[Message] = attrs.field(factory=pvector)
    total: int = 0


@attrs.frozen
class Ledger:
    """A swarm's typed state."""

    total: int = 0


def see(d: Desk) -> PVector[Message]:
    return d.messages


def keep(d: Desk, run: AgentRun) -> Desk:
    return attrs.evolve(d, messages=d.messages.extend(run.messages))


@handler
async def tally(d: Desk) -> Result[Desk, str]:
    return Success(attrs.evolve(d, total=d.total + 1000))


START = Desk(pvector([Message.user("please settle my order")]))
CTX = Context.of(Message.user("please settle my order"), run_id="run-1")

Run: TypeAlias = Callable[
    [CheckpointStore, str], Awaitable[Result[Snapshot[Any], Any]]
]


@attrs.frozen
class Subject:
    """A checkpointed machine: how to run it, and how to resume it."""

    run: Run
    resume: Run


def agents_of(plan: Plan, world: World) -> dict[str, Agent]:
    tools = make_tools(world)
    return {
        name: Agent(name, model_for(name, plan, world), tools=tools)
        for name in plan
    }


def desk_graph(plan: Plan, world: World) -> Subject:
    """Agent nodes in a row (state tools over Desk), a plain node between."""
    agents = agents_of(plan, world)
    b: graph.GraphBuilder[Desk, object] = graph.builder(Desk)
    names = list(agents)
    for name in names:
        b = b.agent(
            name, agents[name], messages=see, update=keep, writable=["total"]
        )
    b = b.node("tally", tally).entry(names[0]).edge(names[0], "tally")
    b = b.edge("tally", names[1] if len(names) > 1 else END)
    if len(names) > 1:
        b = b.edge(names[1], END)
    g = b.build(name="desk")

    async def run(store: CheckpointStore, t: str) -> Result[Any, Any]:
        return await g.run(START, store=store, thread_id=t)

    async def resume(store: CheckpointStore, t: str) -> Result[Any, Any]:
        return await g.resume(store, t)

    return Subject(run, resume)


def chain_swarm(agents: dict[str, Agent]) -> Swarm[Ledger]:
    """*agents* handing over in order, sharing a Ledger."""
    names = list(agents)
    b = swarm.builder(state=Ledger())
    for i, name in enumerate(names):
        b = b.agent(
            name,
            agents[name],
            handoffs=names[i + 1 : i + 2],
            writable=["total"],
        )
    return b.entry(names[0]).build(name="team")


def team_subject(plan: Plan, world: World) -> Subject:
    """A checkpointed swarm."""
    team = chain_swarm(agents_of(plan, world))

    async def run(store: CheckpointStore, t: str) -> Result[Any, Any]:
        return await team.run(CTX, store=store, thread_id=t)

    async def resume(store: CheckpointStore, t: str) -> Result[Any, Any]:
        return await team.resume(store, t)

    return Subject(run, resume)


def swarm_node_graph(plan: Plan, world: World) -> Subject:
    """A checkpointed graph whose agent node (``.agent()``) is a swarm."""
    team = chain_swarm(agents_of(plan, world))
    g = (
        graph.builder(Desk)
        .agent("team", team, messages=see, update=keep)
        .node("tally", tally)
        .entry("team")
        .edge("team", "tally")
        .edge("tally", END)
        .build(name="desk")
    )

    async def run(store: CheckpointStore, t: str) -> Result[Any, Any]:
        return await g.run(START, store=store, thread_id=t)

    async def resume(store: CheckpointStore, t: str) -> Result[Any, Any]:
        return await g.resume(store, t)

    return Subject(run, resume)


def context_graph(plan: Plan, world: World) -> Subject:
    """A checkpointed graph over contexts: an agent, then a swarm, both
    plain ``.node()``s (no state tools, no cell)."""
    agents = agents_of(plan, world)
    clerk = agents.pop("clerk")
    g = (
        graph.builder(Context)
        .node("clerk", clerk)
        .node("team", chain_swarm(agents))
        .entry("clerk")
        .edge("clerk", "team")
        .edge("team", END)
        .build(name="desk")
    )

    async def run(store: CheckpointStore, t: str) -> Result[Any, Any]:
        return await g.run(CTX, store=store, thread_id=t)

    async def resume(store: CheckpointStore, t: str) -> Result[Any, Any]:
        return await g.resume(store, t)

    return Subject(run, resume)


Shape: TypeAlias = Literal["graph", "swarm", "swarm-node", "context-graph"]
SUBJECTS: dict[Shape, Callable[[Plan, World], Subject]] = {
    "graph": desk_graph,
    "swarm": team_subject,
    "swarm-node": swarm_node_graph,
    "context-graph": context_graph,
}


def make_plan(shape: Shape, rng: random.Random) -> Plan:
    """One or two agents (graph), two or three handing over (swarms), an
    agent then two handing over (context-graph)."""
    if shape == "graph":
        names = ["clerk", "auditor"][: rng.randint(1, 2)]
        return {n: random_turns(rng, typed=True, last=Turn()) for n in names}
    plan: Plan = {}
    if shape == "context-graph":
        plan["clerk"] = random_turns(rng, typed=False, last=Turn())
        names = ["front", "billing"]
    else:
        names = ["front", "billing", "courier"][: rng.randint(2, 3)]
    for i, name in enumerate(names):
        target = names[i + 1] if i + 1 < len(names) else None
        last = Turn(transfer=target) if target else Turn()
        if target and rng.random() < 0.5:  # tools alongside the transfer
            last = Turn((("charge", rng.randint(1, 99)),), target)
        plan[name] = random_turns(rng, typed=True, last=last)
    return plan


# -- stores -------------------------------------------------------------------------

Opener: TypeAlias = Callable[[], AbstractAsyncContextManager[CheckpointStore]]


def memory_opener() -> Opener:
    """The same MemoryStore on every open: it plays the disk."""
    disk = MemoryStore()

    @asynccontextmanager
    async def opened() -> AsyncIterator[CheckpointStore]:
        yield disk

    return opened


def sqlite_opener(path: Path) -> Opener:
    """A fresh connection to one SQLite file on every open."""

    @asynccontextmanager
    async def opened() -> AsyncIterator[CheckpointStore]:
        async with SQLiteStore(path) as store:
            yield store

    return opened


# -- one trial ---------------------------------------------------------------------


def committed_call_ids(records: Sequence[Record]) -> set[str]:
    """Tool call ids whose result is in a committed record."""
    found: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            ref = node.get("tool_call_id")
            if isinstance(ref, str) and node.get("role") == "tool":
                found.add(ref)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for record in records:
        walk(json.loads(record.data))
    return found


@attrs.frozen
class Baseline:
    """The uninterrupted run: its end, and how much it did."""

    state: object
    world: World

    def total(self, point: Point) -> int:
        """How many model calls, tool calls or commits it made."""
        if point == "model":
            return self.world.model_calls
        if point == "tool":
            return self.world.tool_calls
        return self.world.commits


_BASELINES: dict[tuple[Shape, str], Baseline] = {}


async def baseline(shape: Shape, plan: Plan) -> Baseline:
    """Run *plan* without a crash (checkpointed, counting commits).

    Deterministic, so kept per plan: every backend and store compares
    against the same uninterrupted run.
    """
    key = (shape, repr(plan))
    if key in _BASELINES:
        return _BASELINES[key]
    world = World()
    store = CrashingStore(MemoryStore(), world)
    snap = (await SUBJECTS[shape](plan, world).run(store, "t")).unwrap()
    assert snap.done, (shape, plan)
    _BASELINES[key] = Baseline(snap.state, world)
    return _BASELINES[key]


@attrs.frozen
class Outcome:
    """A crashed and resumed run, next to the uninterrupted one."""

    where: tuple[object, ...]
    base: Baseline
    world: World
    state: object
    done: bool
    committed: frozenset[str]  # call ids whose result was committed
    at_crash: Counter[str]  # side effects when the process died

    def check(self) -> None:
        """Same end; committed calls ran once; only one turn ran again."""
        where, world = self.where, self.world
        expected = self.base.world.effects
        assert self.done, where
        assert self.state == self.base.state, where
        assert set(world.effects) == set(expected), where
        for ref in self.committed & set(expected):
            # Its result was committed: it never ran again.
            assert world.effects[ref] == self.at_crash[ref] == 1, (where, ref)
        assert all(n <= 2 for n in world.effects.values()), where
        assert set(world.asked) == set(self.base.world.asked), where
        assert all(n <= 2 for n in world.asked.values()), where
        # Only the turn in flight ran again: one model call, and its tools.
        asked_twice = {key for key, n in world.asked.items() if n > 1}
        assert len(asked_twice) <= 1, where
        twice = {ref for ref, n in world.effects.items() if n > 1}
        assert {ref.rsplit("-", 1)[0] for ref in twice} <= {
            f"{agent}-{turn}" for agent, turn in asked_twice
        }, where


async def crash_then_resume(
    shape: Shape,
    plan: Plan,
    world: World,
    open_store: Opener,
    thread: str = "t",
    base: Baseline | None = None,
) -> Outcome:
    """Run *plan* until *world* crashes it; resume as a new process would."""
    base = base or await baseline(shape, plan)
    where = (shape, world.point, world.at, world.effect_first)
    async with open_store() as disk:
        with pytest.raises(SimulatedCrash):
            await SUBJECTS[shape](plan, world).run(
                CrashingStore(disk, world), thread
            )
        committed = committed_call_ids(await disk.records(thread))
    at_crash = Counter(world.effects)

    world.armed = False  # the process restarts: no crash this time
    async with open_store() as disk:
        again = SUBJECTS[shape](plan, world)
        if await disk.head(thread) is None:  # died before the admission
            out = await again.run(disk, thread)
        else:
            out = await again.resume(disk, thread)
    snap = out.unwrap()
    return Outcome(
        where,
        base,
        world,
        snap.state,
        snap.done,
        frozenset(committed),
        at_crash,
    )


async def seeded_trials(
    shape: Shape, seeds: range, opener: Callable[[int], Opener]
) -> None:
    """One crash per seed, at a seeded point; every failing seed is listed."""
    failed: list[str] = []
    for seed in seeds:
        rng = random.Random(seed)
        plan = make_plan(shape, rng)
        point = POINTS[seed % len(POINTS)]
        base = await baseline(shape, plan)
        world = World(
            point,
            rng.randint(1, base.total(point)),
            effect_first=rng.random() < 0.5,
        )
        outcome = await crash_then_resume(
            shape, plan, world, opener(seed), f"t{seed}", base
        )
        try:
            outcome.check()
        except AssertionError as exc:
            failed.append(f"seed {seed} ({point}): {str(exc)[:300]}")
    assert not failed, f"{len(failed)} of {len(seeds)} trials:\n" + "\n".join(
        failed[:10]
    )


# -- the seeded tests ----------------------------------------------------------------

SHAPES: tuple[Shape, ...] = ("graph", "context-graph", "swarm", "swarm-node")


@pytest.mark.slow
@pytest.mark.parametrize("shape", SHAPES)
async def test_turn_crashes_resume_on_memory_store(shape: Shape) -> None:
    """Seeded crashes in agent turns: same end; no committed call re-runs."""
    await seeded_trials(shape, range(RUNS), lambda _: memory_opener())


@pytest.mark.slow
@pytest.mark.parametrize("shape", SHAPES)
async def test_turn_crashes_resume_from_sqlite_file(
    shape: Shape, tmp_path: Path
) -> None:
    """The same, with a real SQLite file reopened after every crash."""
    opener = sqlite_opener(tmp_path / "runs.db")
    seeds = range(10_000, 10_000 + SQLITE_RUNS)  # not the memory store's
    await seeded_trials(shape, seeds, lambda _: opener)


# -- the same properties, one scenario at a time --------------------------------------

SHOP: Plan = {
    "clerk": (
        Turn((("charge", 10), ("write_state", 7))),
        Turn((("charge", 20), ("ship", 21), ("charge", 22))),
        Turn((("read_state", 0),)),
        Turn(),
    )
}


async def test_crash_between_tool_calls_redoes_only_that_turn() -> None:
    """A tool dies mid-turn: turn 0 (committed) is not redone; turn 1 is."""
    world = World("tool", 3)  # one of turn 1's three calls dies
    outcome = await crash_then_resume("graph", SHOP, world, memory_opener())
    outcome.check()
    assert outcome.committed == {"clerk-0-0", "clerk-0-1"}
    assert world.effects["clerk-0-0"] == 1
    assert world.asked["clerk", 0] == 1
    assert world.asked["clerk", 1] == 2  # the turn in flight, once more
    # The calls run concurrently: which one died depends on the scheduler.
    assert world.crashed in {"clerk-1-0", "clerk-1-1", "clerk-1-2"}
    assert world.effects[world.crashed] == 1  # it died before its effect


async def test_state_written_in_a_committed_turn_is_restored() -> None:
    """write_state of a committed turn is seen by the resumed turns."""
    world = World("model", 3)  # turn 2 (read_state) is in flight
    outcome = await crash_then_resume("graph", SHOP, world, memory_opener())
    outcome.check()
    assert isinstance(outcome.state, Desk)
    assert outcome.state.total == 7 + 1000  # the write, then the tally node
    read = [m for m in outcome.state.messages if m.name == "read_state"]
    assert [m.content for m in read] == ["7"]


async def test_crash_after_a_turn_record_loses_nothing() -> None:
    """Dying right after a turn's record: no model call or tool is redone."""
    world = World("after-record", 3)  # admission, turn 0, turn 1
    outcome = await crash_then_resume("graph", SHOP, world, memory_opener())
    outcome.check()
    assert all(n == 1 for n in world.asked.values())
    assert all(n == 1 for n in world.effects.values())


async def test_crash_before_the_node_record_redoes_no_turn() -> None:
    """Every turn was recorded, the node's own record was not: nothing re-runs."""
    world = World("before-record", 6)  # admission, 4 turns, then the node
    outcome = await crash_then_resume("graph", SHOP, world, memory_opener())
    outcome.check()
    assert world.model_calls == 4
    assert all(n == 1 for n in world.effects.values())


HANDOFF: Plan = {
    "front": (Turn((("charge", 1),)), Turn(transfer="billing")),
    "billing": (Turn((("charge", 2),)), Turn()),
}


async def test_swarm_handoff_survives_a_crash_before_its_record() -> None:
    """The transfer turn was recorded, the handoff was not: billing still runs.

    Commits: admission, front's two turns (progress), then the handoff.
    """
    world = World("before-record", 4)
    outcome = await crash_then_resume("swarm", HANDOFF, world, memory_opener())
    assert isinstance(outcome.state, swarm.SwarmState)
    assert outcome.state.active == "billing"
    assert ("billing", 1) in world.asked
    outcome.check()


async def test_swarm_agent_node_keeps_its_committed_turns() -> None:
    """A swarm as a graph's agent node resumes its committed turns."""
    world = World("model", 2)  # front's turn 1 is in flight
    outcome = await crash_then_resume(
        "swarm-node", HANDOFF, world, memory_opener()
    )
    assert world.effects["front-0-0"] == 1  # committed in turn 0
    outcome.check()
