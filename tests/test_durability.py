"""Exactly once, for real: validated commits, leases, durable answers.

Each test attacks one way a committed node could run again or a bad state
could be committed: states of the wrong type, concurrent resumers (tasks
and processes), a crash right after a human answered.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys

from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import attrs
import pytest

from hypothesis import given, settings
from hypothesis import strategies as st
from pyrsistent import PVector, pvector
from returns.result import Result, Success

from pipeline import Context, Message, graph, handler
from pipeline.errors import InvalidState, ThreadBusy
from pipeline.fold import DEFAULT_LEASE_TTL, CheckpointStore
from pipeline.graph import END, Continue, Interrupt, Stop, Transition
from tests.graph.store_urls import open_store
from tests.servers import StoreFactory
from tests.stores import CommitResult, DelegatingStore


HERE = Path(__file__).parent


@attrs.frozen
class Order:
    """A typed state with a little of everything."""

    amount: int = 0
    note: str = ""
    ratio: float = 0.0
    tags: PVector[str] = attrs.field(factory=pvector)
    limits: dict[int, str] = attrs.field(factory=dict)


# -- validated commits ----------------------------------------------------------

WRONG: dict[str, st.SearchStrategy[Any]] = {
    "amount": st.one_of(
        st.builds(lambda s: f"SECRET-{s}", st.text(max_size=5)),
        st.floats(allow_nan=False),
        st.booleans(),
        st.none(),
        st.integers(min_value=10**5000, max_value=10**5001),
    ),
    "note": st.one_of(
        st.integers(),
        st.none(),
        st.just("SECRET lone \ud800 surrogate"),
        st.lists(st.text(max_size=3), max_size=2),
    ),
    "ratio": st.one_of(
        st.just(math.nan),
        st.just(math.inf),
        st.just(-math.inf),
        st.builds(lambda s: f"SECRET-{s}", st.text(max_size=3)),
        st.none(),
    ),
    "tags": st.one_of(
        st.builds(lambda n: pvector([n]), st.integers()),
        st.builds(lambda: pvector(["ok", "bad \udfff"])),
    ),
}


@given(
    field=st.sampled_from(sorted(WRONG)),
    data=st.data(),
    use_sqlite=st.booleans(),
)
@settings(max_examples=60, deadline=None)
def test_a_state_that_does_not_fit_is_never_committed(
    field: str, data: st.DataObject, use_sqlite: bool, tmp_path_factory: Any
) -> None:
    """A node returning a state whose field does not fit its declared type
    (wrong types, non-finite floats, lone surrogates, integers too large) is
    an InvalidState naming node and field; nothing is committed, history
    is unchanged, and the thread resumes from its last good record."""
    value = data.draw(WRONG[field], label="value")

    @handler(name="good")
    async def good(o: Order) -> Result[Order, str]:
        return Success(attrs.evolve(o, amount=o.amount + 1))

    @handler(name="bad")
    async def bad(o: Order) -> Result[Order, str]:
        return Success(attrs.evolve(o, **{field: value}))  # a typing lie

    g = (
        graph.builder(Order)
        .node("good", good)
        .node("bad", bad)
        .entry("good")
        .edge("good", "bad")
        .edge("bad", END)
        .build()
    )

    async def scenario(store: CheckpointStore) -> None:
        out = await g.run(Order(), store=store, thread_id="t")
        failure = out.failure()
        assert isinstance(failure, InvalidState)
        assert (failure.node, failure.field.split("[")[0]) == ("bad", field)
        assert "SECRET" not in str(failure)
        history = (await g.history(store, "t")).unwrap()
        assert [s.node for s in history] == [None, "good"]
        head = (await g.load(store, "t")).unwrap()
        assert head.next == ("bad",)
        assert head.state == Order(amount=1)

    async def main() -> None:
        if use_sqlite:
            path = tmp_path_factory.mktemp("v") / "s.db"
            async with graph.SQLiteStore(path) as store:
                await scenario(store)
        else:
            await scenario(graph.MemoryStore())

    anyio.run(main)


async def test_integer_keys_and_enums_round_trip() -> None:
    """A dict with int keys is stored so that it comes back as it was."""

    @handler(name="fill")
    async def fill(o: Order) -> Result[Order, str]:
        return Success(attrs.evolve(o, limits={7: "x", -1: "y"}))

    g = (
        graph.builder(Order)
        .node("fill", fill)
        .entry("fill")
        .edge("fill", END)
        .build()
    )
    store = graph.MemoryStore()
    done = (await g.run(Order(), store=store, thread_id="t")).unwrap()
    assert (await g.load(store, "t")).unwrap().state == done.state


# -- durable answers ----------------------------------------------------------------


class Crash(BaseException):
    """The process dies here."""


class DieAfter(DelegatingStore):
    """Dies right after committing the record of a chosen version."""

    def __init__(self, inner: CheckpointStore, version: int) -> None:
        super().__init__(inner)
        self.version = version

    async def commit(self, record: Any, **kw: Any) -> CommitResult:
        out = await self.inner.commit(record, **kw)
        if record.version == self.version:
            raise Crash
        return out


async def test_a_crash_after_answering_never_asks_again() -> None:
    """The answer is a record: a crash right after it was committed resumes
    without asking the human again, and the gated node runs once."""
    asked: list[object] = []
    refunds: Counter[str] = Counter()

    async def approve(t: Transition[Context]) -> graph.Decision:
        if t.targets != ("refund",):
            return Continue()
        asked.append(t.answer)
        if t.answer is None:
            return Interrupt("Refund 120 EUR?")
        return Continue() if t.answer == "yes" else Stop("declined")

    @handler(name="triage")
    async def triage(c: Context) -> Result[Context, str]:
        return Success(c.append(Message.assistant("needs a refund")))

    @handler(name="refund")
    async def refund(c: Context) -> Result[Context, str]:
        refunds["refund"] += 1
        return Success(c.append(Message.assistant("refunded")))

    g = (
        graph.builder(Context)
        .node("triage", triage)
        .node("refund", refund)
        .entry("triage")
        .edge("triage", "refund")
        .edge("refund", END)
        .gate(approve)
        .build()
    )
    store = graph.MemoryStore()
    paused = (await g.run(Context(), store=store, thread_id="t")).unwrap()
    assert paused.status is graph.Status.INTERRUPTED
    answered = paused.version + 1
    crashing = DieAfter(store, answered)  # dies right after the answer
    with pytest.raises(Crash):
        await g.resume(crashing, "t", answer="yes")
    before = refunds["refund"]
    assert before == 0
    done = (await g.resume(store, "t")).unwrap()  # no answer given
    assert done.done
    assert asked.count(None) == 1  # asked once, never again
    assert refunds["refund"] == before + 1 <= 2
    head = (await g.history(store, "t")).unwrap()
    assert any(s.pending is not None and s.pending.answered for s in head)


@attrs.frozen
class Approval:
    """A typed answer."""

    ok: bool
    by: str


async def test_typed_answers() -> None:
    """An answer may be any value the converter handles; the gate reads it
    as the type it declares, and one that does not fit is refused."""
    seen: list[Approval | None] = []

    async def approve(t: Transition[Context]) -> graph.Decision:
        if t.source is None:
            return Continue()
        approval = t.answer_as(Approval)
        seen.append(approval)
        if approval is None:
            return Interrupt("approve?")
        return Continue() if approval.ok else Stop(f"refused by {approval.by}")

    @handler(name="a")
    async def a(c: Context) -> Result[Context, str]:
        return Success(c)

    g = (
        graph.builder(Context)
        .node("a", a)
        .node("b", a)
        .entry("a")
        .edge("a", "b")
        .edge("b", END)
        .gate(approve)
        .build()
    )
    store = graph.MemoryStore()
    await g.run(Context(), store=store, thread_id="t")
    done = (
        await g.resume(store, "t", answer=Approval(ok=True, by="ana"))
    ).unwrap()
    assert done.done
    assert seen == [None, Approval(ok=True, by="ana")]


# -- one runner per thread --------------------------------------------------------


def counting_graph(log: Path) -> graph.Graph[Context, Any]:
    """Three nodes whose side effects are lines in *log* (an external
    counter that survives the process)."""

    def node(name: str) -> Any:
        @handler(name=name)
        async def run(c: Context) -> Result[Context, str]:
            with log.open("a") as f:
                f.write(f"{name}\n")
            await anyio.lowlevel.checkpoint()
            return Success(c.append(Message.assistant(name)))

        return run

    return (
        graph.builder(Context)
        .node("a", node("a"))
        .node("b", node("b"))
        .node("c", node("c"))
        .entry("a")
        .edge("a", "b")
        .edge("b", "c")
        .edge("c", END)
        .build()
    )


async def test_hundred_concurrent_resumers_run_each_node_once(
    tmp_path: Path, make_store: StoreFactory
) -> None:
    """100 tasks resuming one paused thread, on every store: one runs it,
    the others are told the thread is busy (or find it done); each node's
    side effect happens exactly once."""
    log = tmp_path / "effects.log"
    g = counting_graph(log)

    async def stop_before_b(t: Transition[Context]) -> graph.Decision:
        return (
            Interrupt("go?")
            if t.targets == ("b",) and t.answer is None
            else Continue()
        )

    async with make_store() as store:
        paused = (
            await g.run(
                Context(), store=store, thread_id="t", gates=[stop_before_b]
            )
        ).unwrap()
        assert paused.status is graph.Status.INTERRUPTED
        outcomes: list[str] = []

        async def resumer() -> None:
            out = await g.resume(
                store, "t", answer="yes", gates=[stop_before_b]
            )
            if isinstance(out, Success):
                outcomes.append("done")
            else:
                assert isinstance(out.failure(), ThreadBusy)
                outcomes.append("busy")

        async with anyio.create_task_group() as tg:
            for _ in range(100):
                tg.start_soon(resumer)
    assert outcomes.count("busy") >= 1
    assert Counter(log.read_text().split()) == {"a": 1, "b": 1, "c": 1}


def test_two_processes_resuming_one_thread_run_each_node_once(
    tmp_path: Path, store_spec: str
) -> None:
    """Two OS processes, fifty resumers each, on one SQLite file, one
    PostgreSQL schema, one Redis prefix: every node's side effect happens
    exactly once."""
    log = tmp_path / "effects.log"

    async def pause() -> None:
        async with open_store(
            store_spec, lease_ttl=DEFAULT_LEASE_TTL
        ) as store:
            out = await counting_graph(log).run(
                Context(), store=store, thread_id="t", gates=[_stop_before_b]
            )
            assert out.unwrap().status is graph.Status.INTERRUPTED

    anyio.run(pause)
    env = {**os.environ, "PYTHONPATH": str(HERE.parent)}
    child = HERE / "resumers_child.py"
    procs = [
        subprocess.Popen(  # noqa: S603
            [sys.executable, str(child), store_spec, str(log)], env=env
        )
        for _ in range(2)
    ]
    for p in procs:
        assert p.wait(timeout=120) == 0
    assert Counter(log.read_text().split()) == {"a": 1, "b": 1, "c": 1}


async def _stop_before_b(t: Transition[Context]) -> graph.Decision:
    if t.targets == ("b",) and t.answer is None:
        return Interrupt("go?")
    return Continue()


async def test_failure_type_of_a_busy_thread_names_it() -> None:
    """ThreadBusy says which thread, and when its lease lapses at most."""
    store = graph.MemoryStore()
    lease = (await store.acquire("t", "someone-else", ttl=60)).unwrap()
    g = counting_graph(Path(os.devnull))
    out = await g.run(Context(), store=store, thread_id="t")
    busy = out.failure()
    assert isinstance(busy, ThreadBusy)
    assert busy.thread_id == "t"
    assert 0 < busy.expires_in <= 60
    assert await store.head("t") is None  # nothing ran, nothing written
    await store.release(lease)
    assert isinstance(
        await g.run(Context(), store=store, thread_id="t"), Success
    )
