"""Exactly once, for real: validated commits, leases, durable answers.

Each test attacks one way a committed node could run again or a bad state
could be committed: states of the wrong type, concurrent resumers (tasks
and processes), a crash right after a human answered.
"""

from __future__ import annotations

import datetime as dt
import enum
import functools
import math
import os
import subprocess
import sys

from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import attrs
import pytest

from hypothesis import given, settings
from hypothesis import strategies as st
from pyrsistent import PVector, pvector
from returns.result import Result, Success

from pipeline import Context, Graph, Message, fold, graph, handler, stores
from pipeline.errors import InvalidAnswer, InvalidThreadId
from pipeline.failures import (
    CheckpointDecodeError,
    InvalidState,
    StaleAnswer,
    ThreadBusy,
)
from pipeline.fold import Continue, Interrupt, Stop, Transition
from pipeline.graph import END
from pipeline.stores import DEFAULT_LEASE_TTL, CheckpointStore, Lease, Record
from tests.graph.store_urls import open_store
from tests.servers import StoreFactory
from tests.stores import CommitResult, DelegatingStore


HERE = Path(__file__).parent


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@attrs.frozen
class Order:
    """A typed state with a little of everything."""

    amount: int = 0
    note: str = ""
    ratio: float = 0.0
    tags: PVector[str] = attrs.field(factory=pvector)
    limits: dict[int, str] = attrs.field(factory=dict)
    # After a log field: a failure here must not be blamed on `tags`.
    color: Color = Color.RED
    pair: tuple[int, int] = (0, 0)
    when: dt.datetime = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    extra: dict[str, Any] = attrs.field(factory=dict)
    score: float = 0.0


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
        st.just(b"SECRET bytes"),
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
    # Values that JSON would turn into something else (bytes into base85
    # text, a member's value into the member, a list into a tuple, text
    # into a datetime, sets, tuples and bytes into lists or text).
    "color": st.sampled_from(["red", "blue"]),
    "pair": st.builds(lambda a, b: [a, b], st.integers(), st.integers()),
    "when": st.just("2026-01-01T00:00:00+00:00"),
    "extra": st.one_of(
        st.builds(
            lambda s: {"k": set(s)}, st.lists(st.integers(), min_size=1)
        ),
        st.builds(lambda t: {"k": tuple(t)}, st.lists(st.integers())),
        st.builds(lambda b: {"k": b}, st.binary()),
        st.builds(lambda n: {"k": {n: "SECRET"}}, st.integers()),
    ),
    "score": st.sampled_from([math.nan, math.inf]),
}


@pytest.mark.slow
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
            async with stores.SQLiteStore(path) as store:
                await scenario(store)
        else:
            await scenario(stores.MemoryStore())

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
    store = stores.MemoryStore()
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

    async def approve(t: Transition[Context]) -> fold.Decision:
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
    store = stores.MemoryStore()
    paused = (await g.run(Context(), store=store, thread_id="t")).unwrap()
    assert paused.status is fold.Status.INTERRUPTED
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

    async def approve(t: Transition[Context]) -> fold.Decision:
        if t.source is None:
            return Continue()
        approval = t.answer_as(Approval)
        seen.append(approval)
        if approval is None:
            return Interrupt("approve?")
        return Continue() if approval.ok else Stop(f"refused by {approval.by}")

    g = _two_steps(approve)
    store = stores.MemoryStore()
    await g.run(Context(), store=store, thread_id="t")
    done = (
        await g.resume(store, "t", answer=Approval(ok=True, by="ana"))
    ).unwrap()
    assert done.done
    assert seen == [None, Approval(ok=True, by="ana")]


async def _count(t: Transition[Context]) -> fold.Decision:
    """Asks how many before "b"; reads the answer as an int."""
    if t.targets != ("b",):
        return Continue()
    n = t.answer_as(int)
    return Interrupt("how many?") if n is None else Continue()


def _two_steps(gate: fold.Gate[Context]) -> Graph[Context, Any]:
    """a -> (gate) -> b, each adding an assistant message "a"."""

    @handler(name="a")
    async def a(c: Context) -> Result[Context, str]:
        return Success(c.append(Message.assistant("a")))

    return (
        graph.builder(Context)
        .node("a", a)
        .node("b", a)
        .entry("a")
        .edge("a", "b")
        .edge("b", END)
        .gate(gate)
        .build()
    )


@pytest.mark.parametrize("nested", [False, True], ids=["top", "nested"])
async def test_an_answer_that_does_not_fit_leaves_the_thread_waiting(
    tmp_path: Path, *, nested: bool
) -> None:
    """A gate refusing the answer (InvalidAnswer from answer_as) pauses the
    thread again at the same question before the error propagates: the
    human answers anew, nothing bricked (a gate of a nested graph too)."""
    inner = _two_steps(_count)
    if nested:
        outer = (
            graph.builder(Context)
            .node("inner", inner)
            .entry("inner")
            .edge("inner", END)
            .build()
        )
    else:
        outer = inner
    async with stores.SQLiteStore(tmp_path / "t.sqlite3") as store:
        paused = (
            await outer.run(Context(), store=store, thread_id="t")
        ).unwrap()
        assert paused.status is fold.Status.INTERRUPTED
        for wrong in ("many", [1], {"n": 1}):
            with pytest.raises(InvalidAnswer, match="the answer is not a int"):
                await outer.resume(store, "t", answer=wrong)
            head = (await outer.load(store, "t")).unwrap()
            assert head.status is fold.Status.INTERRUPTED
            assert head.pending is not None
            assert not head.pending.answered
            assert head.pending.question == "how many?"
        done = (await outer.resume(store, "t", answer=3)).unwrap()
        assert done.done
        assert [m.content for m in done.state.messages] == ["a", "a"]


# -- one runner per thread --------------------------------------------------------


def counting_graph(log: Path) -> Graph[Context, Any]:
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
    the others are told the thread is busy (or that it waits for no
    answer any more: StaleAnswer); each node's side effect happens exactly
    once."""
    log = tmp_path / "effects.log"
    g = counting_graph(log)

    async def stop_before_b(t: Transition[Context]) -> fold.Decision:
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
        assert paused.status is fold.Status.INTERRUPTED
        outcomes: list[str] = []

        async def resumer() -> None:
            out = await g.resume(
                store, "t", answer="yes", gates=[stop_before_b]
            )
            if isinstance(out, Success):
                outcomes.append("done")
            elif isinstance(stale := out.failure(), StaleAnswer):
                # Another resumer's answer went first: none waits now.
                assert stale.pending is None
                outcomes.append("stale")
            else:
                assert isinstance(out.failure(), ThreadBusy)
                outcomes.append("busy")

        async with anyio.create_task_group() as tg:
            for _ in range(100):
                tg.start_soon(resumer)
    assert outcomes.count("busy") >= 1
    assert Counter(log.read_text().split()) == {"a": 1, "b": 1, "c": 1}


@pytest.mark.slow
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
            assert out.unwrap().status is fold.Status.INTERRUPTED

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


async def _stop_before_b(t: Transition[Context]) -> fold.Decision:
    if t.targets == ("b",) and t.answer is None:
        return Interrupt("go?")
    return Continue()


async def test_failure_type_of_a_busy_thread_names_it() -> None:
    """ThreadBusy says which thread, and when its lease lapses at most."""
    store = stores.MemoryStore()
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


# -- what a red-team pass found ----------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [b"SECRET", (1, 2), {1, 2}, {1: "SECRET"}, {"k": (1,)}, [b"SECRET"]],
    ids=["bytes", "tuple", "set", "int-keys", "nested-tuple", "nested-bytes"],
)
async def test_an_answer_json_would_change_is_refused(answer: object) -> None:
    """The gate must see the same answer live as after a crash: a value
    that JSON gives back as something else is an InvalidState naming the
    answer (never its value), and no record is written."""
    store = stores.MemoryStore()
    g = counting_graph(Path(os.devnull))
    paused = await g.run(
        Context(), store=store, thread_id="t", gates=[_stop_before_b]
    )
    head = paused.unwrap().version
    out = await g.resume(store, "t", answer=answer, gates=[_stop_before_b])
    failure = out.failure()
    assert isinstance(failure, InvalidState)
    assert failure.field == "answer"
    assert "SECRET" not in str(failure)
    assert await store.head("t") == head


async def test_a_typed_answer_is_seen_alike_live_and_after_a_crash() -> None:
    """An attrs answer is stored as its fields; the gate sees that same
    JSON value live and when the run resumes after a crash."""
    seen: list[object] = []

    async def gate(t: Transition[Context]) -> fold.Decision:
        if t.targets != ("b",):
            return Continue()
        if t.answer is None:
            return Interrupt("go?")
        seen.append(t.answer)
        return Continue()

    store = stores.MemoryStore()
    g = counting_graph(Path(os.devnull))
    await g.run(Context(), store=store, thread_id="t", gates=[gate])
    head = await store.head("t")
    assert head is not None
    with pytest.raises(Crash):
        await g.resume(
            DieAfter(store, head + 1),
            "t",
            answer=Approval(ok=True, by="ana"),
            gates=[gate],
        )
    done = await g.resume(store, "t", gates=[gate])
    assert done.unwrap().done
    assert seen == [{"ok": True, "by": "ana"}] * len(seen)
    assert seen


class Hides(DelegatingStore):
    """A store that lost records (a corrupt index, say): it lists the first
    *keep* of a thread's records while its head says more."""

    def __init__(self, inner: CheckpointStore, keep: int) -> None:
        super().__init__(inner)
        self.keep = keep

    async def records(
        self, thread_id: str, *, upto: int | None = None
    ) -> Sequence[Record]:
        rows = await self.inner.records(thread_id, upto=upto)
        return rows[: self.keep]


async def test_records_missing_below_the_head_are_never_skipped(
    tmp_path: Path,
) -> None:
    """load, history and resume refuse a thread whose store lists fewer
    records than its head: no committed node runs again."""
    log = tmp_path / "effects.log"
    g = counting_graph(log)
    store = stores.MemoryStore()
    await g.run(Context(), store=store, thread_id="t")
    ran = log.read_text()
    lossy = Hides(store, keep=2)
    for out in (
        await g.load(lossy, "t"),
        await g.history(lossy, "t"),
        await g.resume(lossy, "t"),
    ):
        failure = out.failure()
        assert isinstance(failure, CheckpointDecodeError)
        assert "missing" in str(failure)
    assert log.read_text() == ran


class Stalls(DelegatingStore):
    """Grants a lease, then never answers the caller (who gets cancelled)."""

    def __init__(self, inner: CheckpointStore) -> None:
        super().__init__(inner)
        self.stalled = anyio.Event()
        self.stall = True

    async def acquire(
        self, thread_id: str, owner: str, *, ttl: float
    ) -> Result[Lease, ThreadBusy]:
        got = await self.inner.acquire(thread_id, owner, ttl=ttl)
        if self.stall:
            self.stall = False
            self.stalled.set()
            await anyio.sleep_forever()
        return got


async def test_a_claim_cancelled_after_the_store_granted_it_is_given_up(
    anyio_backend: str,
) -> None:
    """Cancelled while the store had already granted the lease (natively,
    with task.cancel(), on asyncio): the thread is free at once, not busy
    until the lease expires."""
    store = stores.MemoryStore(lease_ttl=60)
    stalls = Stalls(store)
    g = counting_graph(Path(os.devnull))
    await g.run(Context(), store=store, thread_id="t", gates=[_stop_before_b])
    if anyio_backend == "asyncio":
        import asyncio  # noqa: PLC0415  # native cancellation

        task = asyncio.ensure_future(g.resume(stalls, "t", answer="yes"))
        await stalls.stalled.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    else:
        async with anyio.create_task_group() as tg:
            tg.start_soon(
                functools.partial(g.resume, stalls, "t", answer="yes")
            )
            await stalls.stalled.wait()
            tg.cancel_scope.cancel()
    probe = await store.acquire("t", "someone else", ttl=1)
    assert isinstance(probe.unwrap(), Lease)


@pytest.mark.parametrize(
    "thread_id",
    ["", "SECRET\x00", "SECRET \ud800", "S" * 257, None, 5, b"SECRET"],
    ids=["empty", "nul", "surrogate", "long", "none", "int", "bytes"],
)
async def test_a_thread_id_no_store_can_keep_is_refused(
    thread_id: Any,
) -> None:
    """Before anything runs or is written: InvalidThreadId, never showing
    the id; the store stays empty."""
    store = stores.MemoryStore()
    g = counting_graph(Path(os.devnull))
    calls: list[Callable[[], Awaitable[object]]] = [
        lambda: g.resume(store, thread_id),
        lambda: g.load(store, thread_id),
        lambda: g.history(store, thread_id),
    ]
    if thread_id is not None:
        calls.append(
            lambda: g.run(Context(), store=store, thread_id=thread_id)
        )
    for call in calls:
        with pytest.raises(InvalidThreadId) as info:
            await call()
        assert "SECRET" not in str(info.value)
    assert await store.threads() == []
