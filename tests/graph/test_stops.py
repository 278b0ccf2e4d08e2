"""Stops stay stopped; answers are bound to their question (issue 16,
items 3 and 4), on every store."""

from __future__ import annotations

import attrs

from returns.result import Failure

from pipeline import Graph, graph, stores
from pipeline.failures import StaleAnswer, StepLimitExceeded
from pipeline.fold import (
    Continue,
    Decision,
    Gate,
    Interrupt,
    Snapshot,
    Status,
    Stop,
    Transition,
)
from pipeline.graph import END
from pipeline.stores import Lease, Record
from tests.graph.helpers import Counted, DelegatingStore, Runs, step
from tests.servers import StoreFactory
from tests.stores import CommitResult


def linear(runs: Runs, n: int = 10) -> Graph[Counted, str]:
    b: graph.GraphBuilder[Counted, str] = graph.builder(Counted)
    for i in range(n):
        b = b.node(f"n{i}", step(f"n{i}", runs))
    b = b.entry("n0")
    for i in range(n - 1):
        b = b.edge(f"n{i}", f"n{i + 1}")
    return b.edge(f"n{n - 1}", END).build()


def asks(node: str, question: str, *, decline: bool = False) -> Gate[Counted]:
    """A gate asking *question* before *node*: "yes" goes on, another
    answer stops the run (if *decline*) or asks again."""

    async def gate(t: Transition[Counted]) -> Decision:
        if t.targets != (node,):
            return Continue()
        if t.answer == "yes":
            return Continue()
        if t.answer is not None and decline:
            return Stop(f"{question} declined")
        return Interrupt(question)

    return gate


class Tear(DelegatingStore):
    """Cuts the record of one version short as it is committed."""

    def __init__(self, inner: stores.CheckpointStore, version: int) -> None:
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
            record = attrs.evolve(record, data=record.data[:20])
        return await self.inner.commit(
            record, expected_head=expected_head, lease=lease
        )


async def test_torn_question_never_takes_another_branchs_answer(
    make_store: StoreFactory,
) -> None:
    """The issue's repro: "ship?" waits at version 7; a resume from
    version 3 asks "redo n3?" at version 8, whose record is torn.  A "yes"
    is not applied to "ship?" (another branch): it is refused, n6 never
    runs; the thread goes on from version 8's parent, asks again, and the
    answer given with that question's id applies to it alone."""
    runs = Runs()
    g = linear(runs)
    ship, redo = asks("n6", "ship?"), asks("n3", "redo n3?")
    async with make_store() as store:
        first = (
            await g.run(Counted(), store=store, thread_id="t", gates=[ship])
        ).unwrap()
        assert (first.version, first.status) == (7, Status.INTERRUPTED)
        assert first.pending is not None
        assert first.pending.question == "ship?"
        torn = Tear(store, 8)
        again = (await g.resume(torn, "t", version=3, gates=[redo])).unwrap()
        assert (again.version, again.parent) == (8, 3)
        before = list(await store.records("t"))
        ran = runs.total()

        out = await g.resume(store, "t", answer="yes", gates=[redo, ship])
        refused = out.failure()
        assert isinstance(refused, StaleAnswer)
        assert (refused.pending, refused.status) == (None, "running")
        assert "yes" not in str(refused)
        assert list(await store.records("t")) == before  # nothing committed
        assert runs.total() == ran  # nothing ran
        assert ("n6", 6) not in runs.calls

        # Without an answer it continues from version 3: asks again.
        asked = (await g.resume(store, "t", gates=[redo, ship])).unwrap()
        assert asked.parent == 3
        assert asked.pending is not None
        assert asked.pending.question == "redo n3?"
        assert asked.question_id is not None
        # "ship?"'s id is not this question's: refused.
        assert first.question_id is not None
        stale = await g.resume(
            store,
            "t",
            answer="yes",
            question=first.question_id,
            gates=[redo, ship],
        )
        assert stale.failure() == StaleAnswer(
            "t", first.question_id, asked.question_id, "interrupted"
        )
        assert runs.total() == ran
        # The right id: "yes" redoes n3..n5, then "ship?" asks anew.
        later = (
            await g.resume(
                store,
                "t",
                answer="yes",
                question=asked.question_id,
                gates=[redo, ship],
            )
        ).unwrap()
        assert later.pending is not None
        assert later.pending.question == "ship?"
        assert ("n6", 6) not in runs.calls
        assert runs.calls["n3", 3] == 2


async def test_declined_answer_stops_and_stays_stopped(
    make_store: StoreFactory,
) -> None:
    """A gate that stops on the answer commits a stopped record with its
    reason; resuming returns it and runs nothing; an answer is refused;
    forking at the question's version asks it again, with an id of its
    own, and a "yes" there goes on."""
    runs = Runs()
    g = linear(runs, 4)
    gate = asks("n2", "ship?", decline=True)
    async with make_store() as store:
        paused = (
            await g.run(Counted(), store=store, thread_id="t", gates=[gate])
        ).unwrap()
        assert paused.question_id is not None
        stop = (
            await g.resume(
                store,
                "t",
                answer="no",
                question=paused.question_id,
                gates=[gate],
            )
        ).unwrap()
        assert (stop.status, stop.reason) == (Status.STOPPED, "ship? declined")
        head = (await g.load(store, "t")).unwrap()
        assert head == stop
        history = (await g.history(store, "t")).unwrap()
        assert [s.status for s in history][-1] is Status.STOPPED
        ran = runs.total()
        assert (await g.resume(store, "t", gates=[gate])).unwrap() == stop
        refused = (
            await g.resume(store, "t", answer="yes", gates=[gate])
        ).failure()
        assert refused == StaleAnswer("t", None, None, "stopped")
        assert "stopped" in str(refused)
        assert runs.total() == ran
        assert await store.head("t") == stop.version

        fork = (
            await g.fork(store, "t", version=paused.version, new_thread_id="f")
        ).unwrap()
        assert fork.status is Status.INTERRUPTED
        assert fork.question_id not in (None, paused.question_id)
        done = (
            await g.resume(
                store,
                "f",
                answer="yes",
                question=fork.question_id,
                gates=[gate],
            )
        ).unwrap()
        assert done.status is Status.DONE
        assert done.state.count == 4


async def test_gate_stop_and_limit_are_records(
    make_store: StoreFactory,
) -> None:
    """A gate's Stop and a step limit each commit a stopped record with
    the reason; a fork of the stop goes on running."""
    runs = Runs()
    g = linear(runs, 4)

    async def halt(t: Transition[Counted]) -> Decision:
        return Stop("not today") if t.targets == ("n1",) else Continue()

    async with make_store() as store:
        out = (
            await g.run(Counted(), store=store, thread_id="g", gates=[halt])
        ).unwrap()
        head: Snapshot[Counted] = (await g.load(store, "g")).unwrap()
        assert head == out
        assert (head.status, head.reason, head.next) == (
            Status.STOPPED,
            "not today",
            ("n1",),
        )
        assert (await g.resume(store, "g")).unwrap() == head
        fork = (await g.fork(store, "g", new_thread_id="g2")).unwrap()
        assert (fork.status, fork.reason) == (Status.RUNNING, "")
        assert (await g.resume(store, "g2")).unwrap().state.count == 4

        limited = await g.run(
            Counted(),
            store=store,
            thread_id="l",
            limits=graph.GraphLimits(max_steps=2),
        )
        assert isinstance(limited.failure(), StepLimitExceeded)
        stop = (await g.load(store, "l")).unwrap()
        assert stop.status is Status.STOPPED
        assert stop.reason.startswith("step limit 2 reached")
        ran = runs.total()
        assert (await g.resume(store, "l")).unwrap() == stop
        assert runs.total() == ran


async def test_answer_needs_one_pending_question() -> None:
    """resume(question=...) without an answer answers None, and a thread
    that waits at no question refuses it; an answer to a running thread is
    StaleAnswer and commits nothing."""
    g = linear(Runs(), 3)
    store = stores.MemoryStore()
    await g.run(
        Counted(),
        store=store,
        thread_id="t",
        limits=graph.GraphLimits(max_steps=1),
    )
    stop = (await g.load(store, "t")).unwrap()
    null = await g.resume(store, "t", question="1-abc")
    assert null == Failure(StaleAnswer("t", "1-abc", None, "stopped"))
    out = await g.resume(store, "t", version=stop.parent, answer="yes")
    assert out == Failure(StaleAnswer("t", None, None, "running"))
    assert await store.head("t") == stop.version


async def test_a_stop_inside_a_subgraph_stops_the_run_for_good(
    make_store: StoreFactory,
) -> None:
    """A subgraph's gate that stops, inside a checkpointed run, stops the
    enclosing run too: a stopped record with the reason; resuming returns
    it and runs neither graph's nodes."""
    runs = Runs()

    async def halt(t: Transition[Counted]) -> Decision:
        return Stop("inner no") if t.targets == ("i1",) else Continue()

    inner = (
        graph.builder(Counted)
        .node("i0", step("i0", runs))
        .node("i1", step("i1", runs))
        .entry("i0")
        .edge("i0", "i1")
        .edge("i1", END)
        .gate(halt)
        .build()
    )
    outer = (
        graph.builder(Counted)
        .node("o0", step("o0", runs))
        .node("sub", inner)
        .node("o1", step("o1", runs))
        .entry("o0")
        .edge("o0", "sub")
        .edge("sub", "o1")
        .edge("o1", END)
        .build()
    )
    async with make_store() as store:
        out = (await outer.run(Counted(), store=store, thread_id="t")).unwrap()
        assert (out.status, out.reason, out.next) == (
            Status.STOPPED,
            "inner no",
            ("sub",),
        )
        assert (await outer.load(store, "t")).unwrap() == out
        ran = runs.total()
        assert (await outer.resume(store, "t")).unwrap() == out
        assert runs.total() == ran
        assert ("o1", 2) not in runs.calls
