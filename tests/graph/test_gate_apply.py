"""Answers reach state (issue 16, item 2): a gate's typed ``Interrupt``
with ``apply``; and a refused answer is never stored, on every store."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from pyrsistent import PVector, pvector
from returns.result import Failure, Result, Success

from pipeline import (
    Agent,
    Graph,
    Swarm,
    graph,
    handler,
    interrupt,
    stores,
    swarm,
)
from pipeline.errors import InvalidAnswer
from pipeline.fold import (
    Continue,
    Decision,
    Gate,
    Interrupt,
    Status,
    Stop,
    Transition,
)
from pipeline.graph import END
from pipeline.stores import CheckpointStore, Record
from pipeline.swarm import SwarmState
from pipeline.testing import Reply, ScriptedModel
from tests.servers import StoreFactory
from tests.swarm.helpers import Mission, ask, transfer


SECRET = "SECRET-7f3a"  # noqa: S105  # must never be stored or echoed


@attrs.frozen
class Approval:
    """What the reviewer answers."""

    approved: bool
    by: str = ""


@attrs.frozen
class Deploy:
    """Graph state."""

    approved_by: str = ""
    log: PVector[str] = attrs.field(factory=pvector)


class Seen:
    """What the gate, the apply and the nodes saw."""

    def __init__(self) -> None:
        self.applied: list[Approval] = []
        self.shipped: list[Deploy] = []
        self.fail_ship = 0


def deploy_graph(seen: Seen) -> Graph[Deploy, str]:
    """build -> (gate: "ship?" typed, applied) -> ship."""

    def approved_by(s: Deploy, a: Approval) -> Deploy:
        seen.applied.append(a)
        who = a.by if a.approved else ""
        return attrs.evolve(s, approved_by=who, log=s.log.append("answered"))

    async def ask_ship(t: Transition[Deploy]) -> Decision:
        # The same typed Interrupt whether answered or not: once answered,
        # it counts as answered.
        del t
        return Interrupt("ship?", Approval, apply=approved_by)

    @handler(name="build")
    async def build(s: Deploy) -> Result[Deploy, str]:
        return Success(attrs.evolve(s, log=s.log.append("built")))

    @handler(name="ship")
    async def ship(s: Deploy) -> Result[Deploy, str]:
        if seen.fail_ship:
            seen.fail_ship -= 1
            return Failure("the deploy server is down")
        seen.shipped.append(s)
        return Success(attrs.evolve(s, log=s.log.append("shipped")))

    return (
        graph.builder(Deploy)
        .node("build", build)
        .node("ship", ship)
        .entry("build")
        .edge("build", "ship")
        .edge("ship", END)
        .gate(ask_ship, before="ship")
        .build()
    )


def two_nodes(gate: Gate[Deploy]) -> Graph[Deploy, str]:
    """build -> ship, *gate* before ship; the nodes change nothing."""

    @handler(name="same")
    async def same(s: Deploy) -> Result[Deploy, str]:
        return Success(s)

    return (
        graph.builder(Deploy)
        .node("build", same)
        .node("ship", same)
        .entry("build")
        .edge("build", "ship")
        .edge("ship", END)
        .gate(gate, before="ship")
        .build()
    )


def all_bytes(folder: Path) -> bytes:
    """Every byte of every file in *folder* (a database and its journals)."""
    return b"".join(p.read_bytes() for p in sorted(folder.iterdir()))


async def raw(store: CheckpointStore, thread_id: str) -> tuple[object, ...]:
    """The thread's head and every record, as the store holds them."""
    records: list[Record] = list(await store.records(thread_id))
    return (await store.head(thread_id), *records)


async def test_apply_commits_the_answer_into_the_state_before_the_node(
    make_store: StoreFactory,
) -> None:
    """The answer is checked against the declared type, ``apply`` folds it
    into the state, one record holds both (with the author), and the gated
    node runs on that state."""
    seen = Seen()
    g = deploy_graph(seen)
    async with make_store() as store:
        paused = (await g.run(Deploy(), store=store, thread_id="t")).unwrap()
        assert paused.status is Status.INTERRUPTED
        assert paused.pending is not None
        assert paused.pending.question == "ship?"
        done = (
            await g.resume(
                store,
                "t",
                answer={"approved": True, "by": "ana"},
                author="ana@example.com",
                question=paused.question_id,
            )
        ).unwrap()
        assert done.status is Status.DONE
        assert done.state.approved_by == "ana"
        assert list(done.state.log) == ["built", "answered", "shipped"]
        assert seen.applied == [Approval(approved=True, by="ana")]
        assert [s.approved_by for s in seen.shipped] == ["ana"]
        history = (await g.history(store, "t")).unwrap()
        answered = [
            s for s in history if s.pending is not None and s.pending.answered
        ]
        assert len(answered) == 1
        record = answered[0]
        assert record.parent == paused.version
        assert record.author == "ana@example.com"
        assert record.state.approved_by == "ana"
        assert record.pending is not None
        assert record.pending.answer == {"approved": True, "by": "ana"}
        # The node's record follows the answer's: nothing in between.
        assert history[-1].parent == record.version


async def test_answer_given_as_an_instance_is_applied(
    make_store: StoreFactory,
) -> None:
    """An answer given as an instance of the declared type (not as JSON)
    is applied the same way."""
    seen = Seen()
    g = deploy_graph(seen)
    async with make_store() as store:
        await g.run(Deploy(), store=store, thread_id="t")
        done = (
            await g.resume(store, "t", answer=Approval(approved=False))
        ).unwrap()
        assert done.state.approved_by == ""
        assert list(done.state.log) == ["built", "answered", "shipped"]


async def test_refused_answer_leaves_the_store_unchanged(
    make_store: StoreFactory,
) -> None:
    """An answer that does not fit the declared type: ``InvalidAnswer``
    names the field and the type, never the value; the store's head and
    records are exactly what they were; a good answer then goes through."""
    seen = Seen()
    g = deploy_graph(seen)
    async with make_store() as store:
        await g.run(Deploy(), store=store, thread_id="t")
        before = await raw(store, "t")
        with pytest.raises(InvalidAnswer) as caught:
            await g.resume(
                store,
                "t",
                answer={"approved": SECRET, "by": "x"},
                author="mallory",
            )
        text = str(caught.value)
        assert "$.approved" in text
        assert "Approval" in text
        assert SECRET not in text
        assert await raw(store, "t") == before
        assert seen.applied == []
        assert seen.shipped == []
        waiting = (await g.load(store, "t")).unwrap()
        assert waiting.status is Status.INTERRUPTED
        done = (
            await g.resume(store, "t", answer={"approved": True, "by": "bo"})
        ).unwrap()
        assert done.state.approved_by == "bo"


async def test_answer_a_gate_refuses_leaves_the_store_unchanged(
    make_store: StoreFactory,
) -> None:
    """A gate that checks the answer itself (``Transition.answer_as``) and
    refuses it: nothing was committed before, nothing is after."""

    async def strict(t: Transition[Deploy]) -> Decision:
        got = t.answer_as(Approval)
        if got is None:
            return Interrupt("ship?")
        return Continue() if got.approved else Stop("declined")

    g = two_nodes(strict)
    async with make_store() as store:
        await g.run(Deploy(), store=store, thread_id="t")
        before = await raw(store, "t")
        with pytest.raises(InvalidAnswer) as caught:
            await g.resume(store, "t", answer={"approved": [SECRET]})
        assert SECRET not in str(caught.value)
        assert await raw(store, "t") == before
        out = (await g.resume(store, "t", answer={"approved": False})).unwrap()
        assert out.status is Status.STOPPED


async def test_refused_answer_is_nowhere_in_the_sqlite_file(
    tmp_path: Path,
) -> None:
    """The refused value is in no byte of the SQLite database (nor its
    journal files), on a real file."""
    path = tmp_path / "deploy.db"
    g = deploy_graph(Seen())
    async with stores.SQLiteStore(path) as store:
        await g.run(Deploy(), store=store, thread_id="t")
        for bad in ({"approved": SECRET}, {"approved": True, "by": [SECRET]}):
            with pytest.raises(InvalidAnswer):
                await g.resume(store, "t", answer=bad, author="mallory")
        open_files = all_bytes(tmp_path)  # the WAL too, before a checkpoint
    closed = all_bytes(tmp_path)
    for data in (open_files, closed):
        assert b"ship?" in data  # the question was written
        assert SECRET.encode() not in data
        assert b"mallory" not in data


async def test_apply_that_raises_commits_nothing(
    make_store: StoreFactory,
) -> None:
    """An ``apply`` that raises: the error propagates, nothing is committed,
    the thread still waits at the question."""

    def broken(s: Deploy, a: Approval) -> Deploy:
        del s, a
        raise LookupError("no such approver")

    async def ask_ship(t: Transition[Deploy]) -> Decision:
        del t
        return Interrupt("ship?", Approval, apply=broken)

    g = two_nodes(ask_ship)
    async with make_store() as store:
        await g.run(Deploy(), store=store, thread_id="t")
        before = await raw(store, "t")
        with pytest.raises(LookupError):
            await g.resume(store, "t", answer={"approved": True})
        assert await raw(store, "t") == before


async def test_applied_answer_survives_a_failed_node_and_applies_once(
    make_store: StoreFactory,
) -> None:
    """The gated node fails after the answer was committed: a resume
    without an answer continues from the answer's record (the gate's typed
    Interrupt counts as answered, no question asked again) and ``apply``
    does not run twice."""
    seen = Seen()
    seen.fail_ship = 1
    g = deploy_graph(seen)
    async with make_store() as store:
        await g.run(Deploy(), store=store, thread_id="t")
        failed = await g.resume(
            store, "t", answer={"approved": True, "by": "ana"}
        )
        assert failed.failure() == "the deploy server is down"
        done = (await g.resume(store, "t")).unwrap()
        assert done.status is Status.DONE
        assert list(done.state.log) == ["built", "answered", "shipped"]
        assert len(seen.applied) == 1
        assert [s.approved_by for s in seen.shipped] == ["ana"]


async def test_untyped_interrupt_keeps_asking_until_the_gate_continues(
    make_store: StoreFactory,
) -> None:
    """An ``Interrupt`` without a type or ``apply`` means what it did: the
    gate decides with the answer (here: asks again)."""
    asked: list[object] = []

    async def ask_twice(t: Transition[Deploy]) -> Decision:
        asked.append(t.answer)
        if t.answer == "sure":
            return Continue()
        return Interrupt("ship?")

    g = two_nodes(ask_twice)
    async with make_store() as store:
        await g.run(Deploy(), store=store, thread_id="t")
        again = (await g.resume(store, "t", answer="maybe")).unwrap()
        assert again.status is Status.INTERRUPTED
        done = (await g.resume(store, "t", answer="sure")).unwrap()
        assert done.status is Status.DONE
        assert asked == [None, "maybe", "sure"]


def mission_desk() -> tuple[Swarm[Mission], ScriptedModel]:
    """dispatcher -> specialist, the handoff behind a typed question whose
    answer sets the mission."""

    def set_mission(
        s: SwarmState[Mission], a: Approval
    ) -> SwarmState[Mission]:
        return attrs.evolve(s, state=Mission(f"approved by {a.by}"))

    async def approve(t: Transition[SwarmState[Mission]]) -> Decision:
        del t
        return Interrupt("hand over?", Approval, apply=set_mission)

    specialist = ScriptedModel(Reply.text("on it"))
    team = (
        swarm.builder(state=Mission())
        .agent(
            "dispatcher",
            Agent("dispatcher", ScriptedModel(transfer("specialist"))),
            handoffs=["specialist"],
        )
        .agent("specialist", Agent("specialist", specialist))
        .entry("dispatcher")
        .before_handoff(approve)
        .build()
    )
    return team, specialist


async def test_swarm_gate_apply_reaches_the_swarm_state(
    make_store: StoreFactory,
) -> None:
    """A swarm's handoff gate: the typed answer reaches the swarm's typed
    state before the next agent runs; a refused one changes nothing."""
    team, specialist = mission_desk()
    async with make_store() as store:
        paused = (
            await team.run(ask("go"), store=store, thread_id="t")
        ).unwrap()
        assert paused.status is Status.INTERRUPTED
        before = await raw(store, "t")
        with pytest.raises(InvalidAnswer):
            await team.resume(store, "t", answer={"by": SECRET})
        assert await raw(store, "t") == before
        assert specialist.requests == []
        done = (
            await team.resume(
                store,
                "t",
                answer={"approved": True, "by": "ana"},
                author="ana",
            )
        ).unwrap()
        assert done.state.state == Mission("approved by ana")
        assert done.state.active == "specialist"
        assert len(specialist.requests) == 1
        history = (await team.history(store, "t")).unwrap()
        authors = [s.author for s in history if s.author]
        assert authors == ["ana"]


def asking_graph(effects: list[str]) -> Graph[Deploy, str]:
    """One node that asks (``pipeline.interrupt``) for an Approval."""

    @handler(name="review")
    async def review(s: Deploy) -> Result[Deploy, str]:
        effects.append("before")
        got = await interrupt("ship?", Approval)
        effects.append("after")
        return Success(attrs.evolve(s, approved_by=got.by))

    return (
        graph.builder(Deploy)
        .node("review", review)
        .entry("review")
        .edge("review", END)
        .build()
    )


async def test_in_step_refused_answer_leaves_the_store_unchanged(
    make_store: StoreFactory,
) -> None:
    """``pipeline.interrupt`` checks the answer before it is committed: a
    refused one leaves head and records as they were (the same question,
    same id, waits); a good one is committed by its author."""
    effects: list[str] = []
    g = asking_graph(effects)
    async with make_store() as store:
        paused = (await g.run(Deploy(), store=store, thread_id="t")).unwrap()
        before = await raw(store, "t")
        with pytest.raises(InvalidAnswer) as caught:
            await g.resume(
                store, "t", answer={"approved": SECRET}, author="mallory"
            )
        assert "$.approved" in str(caught.value)
        assert SECRET not in str(caught.value)
        assert await raw(store, "t") == before
        assert "after" not in effects
        waiting = (await g.load(store, "t")).unwrap()
        assert waiting.question_id == paused.question_id is not None
        done = (
            await g.resume(
                store,
                "t",
                answer={"approved": True, "by": "ana"},
                author="ana",
                question=paused.question_id,
            )
        ).unwrap()
        assert done.state.approved_by == "ana"
        history = (await g.history(store, "t")).unwrap()
        assert [s.author for s in history if s.author] == ["ana"]


async def test_in_step_refused_answer_is_nowhere_in_the_sqlite_file(
    tmp_path: Path,
) -> None:
    """The value ``pipeline.interrupt`` refused is in no byte of the SQLite
    database or its journal files."""
    g = asking_graph([])
    async with stores.SQLiteStore(tmp_path / "ask.db") as store:
        await g.run(Deploy(), store=store, thread_id="t")
        with pytest.raises(InvalidAnswer):
            await g.resume(
                store, "t", answer={"approved": SECRET}, author="mallory"
            )
        open_files = all_bytes(tmp_path)
    for data in (open_files, all_bytes(tmp_path)):
        assert b"ship?" in data
        assert SECRET.encode() not in data
        assert b"mallory" not in data


def announced(inner: Graph[Deploy, str]) -> Graph[Deploy, object]:
    """*inner* as a subgraph node, then a node noting "announced"."""

    @handler(name="announce")
    async def announce(s: Deploy) -> Result[Deploy, str]:
        return Success(attrs.evolve(s, log=s.log.append("announced")))

    return (
        graph.builder(Deploy)
        .node("deploy", inner)
        .node("announce", announce)
        .entry("deploy")
        .edge("deploy", "announce")
        .edge("announce", END)
        .build()
    )


async def test_a_subgraphs_typed_gate_applies_its_answer(
    make_store: StoreFactory,
) -> None:
    """A subgraph (used as a node) whose gate asks a typed question with
    ``apply``: the outer graph pauses; a refused answer changes nothing; a
    good one reaches the inner state (applied once) before the inner
    gated node runs, and the outer graph goes on."""
    seen = Seen()
    outer = announced(deploy_graph(seen))
    async with make_store() as store:
        paused = (
            await outer.run(Deploy(), store=store, thread_id="t")
        ).unwrap()
        assert paused.status is Status.INTERRUPTED
        assert paused.pending is not None
        assert paused.pending.question == "ship?"
        before = await raw(store, "t")
        with pytest.raises(InvalidAnswer):
            await outer.resume(store, "t", answer={"approved": SECRET})
        assert await raw(store, "t") == before
        done = (
            await outer.resume(
                store, "t", answer={"approved": True, "by": "ana"}
            )
        ).unwrap()
        assert done.status is Status.DONE
        assert done.state.approved_by == "ana"
        assert list(done.state.log) == [
            "built",
            "answered",
            "shipped",
            "announced",
        ]
        assert seen.applied == [Approval(approved=True, by="ana")]
        assert [s.approved_by for s in seen.shipped] == ["ana"]


async def test_a_subgraphs_applied_answer_survives_a_failed_node(
    make_store: StoreFactory,
) -> None:
    """The subgraph's gated node fails after its answer was committed: a
    resume without an answer continues from that record; ``apply`` ran
    once, nobody is asked again."""
    seen = Seen()
    seen.fail_ship = 1
    outer = announced(deploy_graph(seen))
    async with make_store() as store:
        await outer.run(Deploy(), store=store, thread_id="t")
        failed = await outer.resume(
            store, "t", answer={"approved": True, "by": "ana"}
        )
        assert type(failed) is Failure
        done = (await outer.resume(store, "t")).unwrap()
        assert done.status is Status.DONE
        assert list(done.state.log) == [
            "built",
            "answered",
            "shipped",
            "announced",
        ]
        assert len(seen.applied) == 1
