"""Pause anywhere (issue 16, item 7): questions inside fan-out branches
and ``map_reduce`` items.  The whole run pauses, the branches or items that
finished keep their outputs (not run again: the counters say so), several
waiting at once are listed (``Snapshot.questions``) and answered by id,
each answer resumes only its own branch or item, and the run goes on once
all are answered."""

from __future__ import annotations

import collections
import json

from typing import TypeVar

import anyio
import attrs
import pytest

from hypothesis import given, settings
from hypothesis import strategies as st
from returns.result import Failure, Result, Success

from pipeline import (
    Graph,
    Handler,
    graph,
    handler,
    interrupt,
    map_reduce,
    stores,
)
from pipeline._mapreduce import _item_key
from pipeline._step import current_step
from pipeline.errors import InvalidAnswer
from pipeline.failures import CheckpointDecodeError, StaleAnswer
from pipeline.fold import Pending, Snapshot, Status, current_boundary
from pipeline.graph import END
from pipeline.stores import Record, record_checksum
from tests.servers import StoreFactory


@attrs.frozen
class Trio:
    """One field per branch."""

    a: int = 0
    b: int = 0
    c: str = ""


S = TypeVar("S")


def fanned(
    kind: type[S], **branches: Handler[S, S, object]
) -> Graph[S, object]:
    """A graph that fans out from a pass-through start to *branches*."""

    @handler(name="start")
    async def start(s: S) -> Result[S, object]:
        return Success(s)

    built = graph.builder(kind).node("start", start)
    for name, branch in branches.items():
        built = built.node(name, branch)
    return (
        built.entry("start").fan_out("start", list(branches), join=END).build()
    )


class Crash(Exception):
    """The process dies here (the run raises; nothing more is committed)."""


def trio_graph(
    ran: collections.Counter[str], crash_after_answer: list[str] | None = None
) -> Graph[Trio, object]:
    """start fans out to a, b (each asks) and c (does not)."""

    @handler(name="a")
    async def a(t: Trio) -> Result[Trio, object]:
        ran["a"] += 1
        got = await interrupt("a?", int, payload={"branch": "a"})
        ran["a answered"] += 1
        if crash_after_answer is not None and "a" in crash_after_answer:
            crash_after_answer.remove("a")
            raise Crash
        return Success(attrs.evolve(t, a=got))

    @handler(name="b")
    async def b(t: Trio) -> Result[Trio, object]:
        ran["b"] += 1
        got = await interrupt("b?", int)
        ran["b answered"] += 1
        return Success(attrs.evolve(t, b=got))

    @handler(name="c")
    async def c(t: Trio) -> Result[Trio, object]:
        ran["c"] += 1
        return Success(attrs.evolve(t, c="done"))

    return fanned(Trio, a=a, b=b, c=c)


def ids_by_question(snap: Snapshot[object]) -> dict[str, str]:
    """Question text -> id, of every question *snap* waits at."""
    return {p.question: qid for qid, p in snap.questions.items()}


async def test_branches_that_ask_at_once_all_wait_and_are_answered_by_id(
    make_store: StoreFactory,
) -> None:
    ran: collections.Counter[str] = collections.Counter()
    g = trio_graph(ran)
    async with make_store() as store:
        first = (await g.run(Trio(), store=store, thread_id="t")).unwrap()
        assert first.status is Status.INTERRUPTED
        waiting = list(first.questions.values())
        # In the order of the branches; each says where it waits.
        assert [p.question for p in waiting] == ["a?", "b?"]
        assert [p.scope for p in waiting] == ["b:a", "b:b"]
        assert waiting[0].payload == {"branch": "a"}
        assert first.pending is not None
        assert first.question_id == next(iter(first.questions))
        ids = ids_by_question(first)
        # Read back from the store, the same questions, the same ids.
        loaded = (await g.load(store, "t")).unwrap()
        assert ids_by_question(loaded) == ids
        assert ran == {"a": 1, "b": 1, "c": 1}

        # Two questions wait: an answer names which one it is for.
        stale = await g.resume(store, "t", answer=1)
        assert isinstance(stale, Failure)
        assert isinstance(stale.failure(), StaleAnswer)
        assert ids["a?"] in str(stale.failure())
        unknown = await g.resume(store, "t", answer=1, question="0-nope")
        assert isinstance(unknown, Failure)
        assert isinstance(unknown.failure(), StaleAnswer)
        assert ran == {"a": 1, "b": 1, "c": 1}  # nothing ran

        second = (
            await g.resume(store, "t", answer=10, question=ids["b?"])
        ).unwrap()
        # b ran on with its answer; a still waits, not run again, and its
        # id did not change; c's output was kept.
        assert second.status is Status.INTERRUPTED
        assert ids_by_question(second) == {"a?": ids["a?"]}
        assert ran == {"a": 1, "b": 2, "b answered": 1, "c": 1}
        assert second.author == ""

        done = (
            await g.resume(
                store, "t", answer=7, question=ids["a?"], author="ana"
            )
        ).unwrap()
        assert done.status is Status.DONE
        assert done.state == Trio(7, 10, "done")
        assert done.questions == {}
        assert ran == {
            "a": 2,
            "a answered": 1,
            "b": 2,
            "b answered": 1,
            "c": 1,
        }
        # Who answered what is in the history.
        history = (await g.history(store, "t")).unwrap()
        answers = [
            s.pending
            for s in history
            if s.pending is not None and s.pending.answered
        ]
        # (The records the step commits after an answer keep the other
        # questions waiting, with that answer.)
        assert sorted({(p.question, p.answer) for p in answers}) == [
            ("a?", 7),
            ("b?", 10),
        ]
        assert {s.author for s in history if s.author} == {"ana"}


async def test_a_crash_between_answering_one_branch_and_the_next(
    make_store: StoreFactory,
) -> None:
    """The first answer is committed, then the process dies while its
    branch runs: a resume finds the answer in its record (nothing asked
    again), the other branch still waits under the same id."""
    ran: collections.Counter[str] = collections.Counter()
    crash = ["a"]
    g = trio_graph(ran, crash)
    async with make_store() as store:
        first = (await g.run(Trio(), store=store, thread_id="t")).unwrap()
        ids = ids_by_question(first)
        with pytest.raises(Crash):
            await g.resume(store, "t", answer=7, question=ids["a?"])
        head = (await g.load(store, "t")).unwrap()
        assert head.status is Status.RUNNING  # the answer's record
        assert head.pending is not None
        assert head.pending.answered
        assert head.pending.answer == 7
        assert [p.question for p in head.pending.waiting] == ["b?"]
        # Without an answer: the answered branch runs on with its answer.
        second = (await g.resume(store, "t")).unwrap()
        assert ids_by_question(second) == {"b?": ids["b?"]}
        assert ran == {"a": 3, "a answered": 2, "b": 1, "c": 1}
        done = (
            await g.resume(store, "t", answer=10, question=ids["b?"])
        ).unwrap()
        assert done.state == Trio(7, 10, "done")
        assert ran == {
            "a": 3,
            "a answered": 2,
            "b": 2,
            "b answered": 1,
            "c": 1,
        }


async def test_a_resume_without_an_answer_keeps_every_question_waiting(
    make_store: StoreFactory,
) -> None:
    """Nothing runs again: the branches that wait keep waiting, under the
    same ids."""
    ran: collections.Counter[str] = collections.Counter()
    g = trio_graph(ran)
    async with make_store() as store:
        first = (await g.run(Trio(), store=store, thread_id="t")).unwrap()
        ids = ids_by_question(first)
        again = (await g.resume(store, "t")).unwrap()
        assert again.status is Status.INTERRUPTED
        assert again.version > first.version
        assert ids_by_question(again) == ids
        assert ran == {"a": 1, "b": 1, "c": 1}
        second = (
            await g.resume(store, "t", answer=7, question=ids["a?"])
        ).unwrap()
        assert ids_by_question(second) == {"b?": ids["b?"]}
        again = (await g.resume(store, "t")).unwrap()
        assert ids_by_question(again) == {"b?": ids["b?"]}
        done = (
            await g.resume(store, "t", answer=10, question=ids["b?"])
        ).unwrap()
        assert done.state == Trio(7, 10, "done")
        assert ran == {
            "a": 2,
            "a answered": 1,
            "b": 2,
            "b answered": 1,
            "c": 1,
        }


async def test_an_invalid_answer_to_one_branch_leaves_every_question_waiting(
    make_store: StoreFactory,
) -> None:
    ran: collections.Counter[str] = collections.Counter()
    g = trio_graph(ran)
    async with make_store() as store:
        first = (await g.run(Trio(), store=store, thread_id="t")).unwrap()
        ids = ids_by_question(first)
        with pytest.raises(InvalidAnswer):
            await g.resume(store, "t", answer="seven", question=ids["a?"])
        again = (await g.load(store, "t")).unwrap()
        assert again.status is Status.INTERRUPTED
        assert ids_by_question(again) == ids
        assert ran["c"] == 1
        second = (
            await g.resume(store, "t", answer=7, question=ids["a?"])
        ).unwrap()
        assert ids_by_question(second) == {"b?": ids["b?"]}
        done = (
            await g.resume(store, "t", answer=10, question=ids["b?"])
        ).unwrap()
        assert done.state == Trio(7, 10, "done")
        assert ran["c"] == 1


async def test_one_branch_asking_is_answered_without_an_id(
    make_store: StoreFactory,
) -> None:
    """Only a waits (b got its answer in the same step before): an answer
    without an id applies, as for any single question."""
    ran: collections.Counter[str] = collections.Counter()
    g = trio_graph(ran)
    async with make_store() as store:
        first = (await g.run(Trio(), store=store, thread_id="t")).unwrap()
        ids = ids_by_question(first)
        await g.resume(store, "t", answer=10, question=ids["b?"])
        done = (await g.resume(store, "t", answer=7)).unwrap()
        assert done.state == Trio(7, 10, "done")


@attrs.frozen
class Count:
    """State of the subgraph-in-a-branch test."""

    n: int = 0
    m: int = 0


async def test_a_subgraph_in_a_branch_waits_apart(
    make_store: StoreFactory,
) -> None:
    """A branch that is a subgraph whose node asks (a nested fold that
    pauses), beside a branch that asks itself: both wait at once."""
    ran: collections.Counter[str] = collections.Counter()

    @handler(name="ask_n")
    async def ask_n(c: Count) -> Result[Count, object]:
        ran["inner"] += 1
        return Success(attrs.evolve(c, n=await interrupt("n?", int)))

    inner: Graph[Count, object] = (
        graph.builder(Count)
        .node("ask_n", ask_n)
        .entry("ask_n")
        .edge("ask_n", END)
        .build(name="inner")
    )

    @handler(name="ask_m")
    async def ask_m(c: Count) -> Result[Count, object]:
        ran["m"] += 1
        return Success(attrs.evolve(c, m=await interrupt("m?", int)))

    g = fanned(Count, inner=inner, ask_m=ask_m)
    async with make_store() as store:
        first = (await g.run(Count(), store=store, thread_id="t")).unwrap()
        ids = ids_by_question(first)
        assert sorted(ids) == ["m?", "n?"]
        second = (
            await g.resume(store, "t", answer=3, question=ids["n?"])
        ).unwrap()
        assert ids_by_question(second) == {"m?": ids["m?"]}
        assert ran == {"inner": 2, "m": 1}
        done = (
            await g.resume(store, "t", answer=4, question=ids["m?"])
        ).unwrap()
        assert done.state == Count(3, 4)
        assert ran == {"inner": 2, "m": 2}


@attrs.frozen
class Batch:
    """State of the map_reduce tests."""

    items: tuple[int, ...] = (1, 2, 3, 4)
    total: int = 0


def batch_graph(
    ran: collections.Counter[int], crash_after_answer: list[int] | None = None
) -> Graph[Batch, object]:
    """A map_reduce node whose even items ask what they are worth (an item
    in *crash_after_answer* raises once it got its answer, once)."""

    @handler(name="worth")
    async def worth(i: int) -> Result[int, object]:
        ran[i] += 1
        if i % 2:
            return Success(i)
        got = await interrupt("worth?", int, payload={"item": i})
        if crash_after_answer is not None and i in crash_after_answer:
            crash_after_answer.remove(i)
            raise Crash
        return Success(got)

    return summing(worth)


def summing(work: Handler[int, int, object]) -> Graph[Batch, object]:
    """A map_reduce node named ``sum`` of *work* over the batch's items."""

    def total(
        b: Batch, results: tuple[Result[int, object], ...]
    ) -> Result[Batch, object]:
        return Success(attrs.evolve(b, total=sum(r.unwrap() for r in results)))

    node = map_reduce(lambda b: b.items, work, total, name="sum")
    return (
        graph.builder(Batch)
        .node("sum", node)
        .entry("sum")
        .edge("sum", END)
        .build()
    )


def ids_by_item(snap: Snapshot[object]) -> dict[int, str]:
    """Item -> id of the question it waits at."""

    def item(p: Pending) -> int:
        assert isinstance(p.payload, dict)
        value = p.payload["item"]
        assert isinstance(value, int)
        return value

    return {item(p): qid for qid, p in snap.questions.items()}


@pytest.mark.parametrize("crash", [False, True], ids=["", "crash"])
async def test_map_reduce_items_wait_apart_and_finished_ones_are_kept(
    make_store: StoreFactory, crash: bool
) -> None:
    """With *crash*, item 4 gets its answer, then the process dies in it:
    a resume replays that answer from its record (nothing asked again);
    the items kept at the pause do not run again either way."""
    ran: collections.Counter[int] = collections.Counter()
    g = batch_graph(ran, [4] if crash else None)
    async with make_store() as store:
        first = (await g.run(Batch(), store=store, thread_id="t")).unwrap()
        ids = ids_by_item(first)
        assert list(ids) == [2, 4]  # in the items' order
        assert all(
            p.question == "worth?" and p.scope.startswith("m:sum#0/")
            for p in first.questions.values()
        )
        assert ran == {1: 1, 2: 1, 3: 1, 4: 1}
        if crash:
            with pytest.raises(Crash):
                await g.resume(store, "t", answer=40, question=ids[4])
            second = (await g.resume(store, "t")).unwrap()
        else:
            second = (
                await g.resume(store, "t", answer=40, question=ids[4])
            ).unwrap()
        assert ids_by_item(second) == {2: ids[2]}
        # Items 1 and 3 finished before: kept, not run again; item 2
        # waits, not run again either.
        assert ran == {1: 1, 2: 1, 3: 1, 4: 3 if crash else 2}
        done = (
            await g.resume(store, "t", answer=20, question=ids[2])
        ).unwrap()
        assert done.state.total == 1 + 20 + 3 + 40
        assert ran == {1: 1, 2: 2, 3: 1, 4: 3 if crash else 2}


async def test_map_reduce_in_a_branch_waits_beside_a_branch_that_asks(
    make_store: StoreFactory,
) -> None:
    """Scopes nest: items of a map_reduce that is a fan-out branch ask
    apart from each other and from the sibling branch."""
    ran: collections.Counter[str] = collections.Counter()

    @attrs.frozen
    class Both:
        total: int = 0
        note: str = ""

    @handler(name="item")
    async def item(i: int) -> Result[int, object]:
        ran[f"item {i}"] += 1
        if i == 1:
            return Success(i)
        return Success(await interrupt(f"item {i}?", int))

    def add(
        b: Both, results: tuple[Result[int, object], ...]
    ) -> Result[Both, object]:
        return Success(attrs.evolve(b, total=sum(r.unwrap() for r in results)))

    @handler(name="note")
    async def note(b: Both) -> Result[Both, object]:
        ran["note"] += 1
        return Success(attrs.evolve(b, note=await interrupt("note?", str)))

    items = map_reduce(lambda _: [1, 2, 3], item, add)
    g = fanned(Both, items=items, note=note)
    async with make_store() as store:
        first = (await g.run(Both(), store=store, thread_id="t")).unwrap()
        ids = ids_by_question(first)
        assert list(ids) == ["item 2?", "item 3?", "note?"]
        for question, answer in (("note?", "ok"), ("item 3?", 30)):
            paused = (
                await g.resume(
                    store, "t", answer=answer, question=ids[question]
                )
            ).unwrap()
            assert paused.status is Status.INTERRUPTED
        done = (
            await g.resume(store, "t", answer=20, question=ids["item 2?"])
        ).unwrap()
        assert done.state == Both(1 + 20 + 30, "ok")
        assert ran == {"item 1": 1, "item 2": 2, "item 3": 2, "note": 2}


async def test_a_branch_that_asks_twice_keeps_the_others_waiting(
    make_store: StoreFactory,
) -> None:
    """Branch a asks again after its first answer: a new question (a new
    id); b still waits under its first id."""
    ran: collections.Counter[str] = collections.Counter()

    @handler(name="a")
    async def a(t: Trio) -> Result[Trio, object]:
        ran["a"] += 1
        first = await interrupt("a1?", int)
        second = await interrupt("a2?", int)
        return Success(attrs.evolve(t, a=first * 10 + second))

    @handler(name="b")
    async def b(t: Trio) -> Result[Trio, object]:
        ran["b"] += 1
        return Success(attrs.evolve(t, b=await interrupt("b?", int)))

    g = fanned(Trio, a=a, b=b)
    async with make_store() as store:
        first = (await g.run(Trio(), store=store, thread_id="t")).unwrap()
        ids = ids_by_question(first)
        second = (
            await g.resume(store, "t", answer=1, question=ids["a1?"])
        ).unwrap()
        now = ids_by_question(second)
        assert list(now) == ["a2?", "b?"]
        assert now["b?"] == ids["b?"]
        third = (
            await g.resume(store, "t", answer=2, question=now["a2?"])
        ).unwrap()
        assert ids_by_question(third) == {"b?": ids["b?"]}
        done = (
            await g.resume(store, "t", answer=5, question=ids["b?"])
        ).unwrap()
        assert done.state == Trio(12, 5, "")
        assert ran == {"a": 3, "b": 2}


async def test_a_failing_branch_fails_the_run_even_if_another_asks(
    make_store: StoreFactory,
) -> None:
    @handler(name="a")
    async def a(t: Trio) -> Result[Trio, object]:
        return Success(attrs.evolve(t, a=await interrupt("a?", int)))

    @handler(name="b")
    async def b(_: Trio) -> Result[Trio, object]:
        return Failure("broken")

    g = fanned(Trio, a=a, b=b)
    async with make_store() as store:
        out = await g.run(Trio(), store=store, thread_id="t")
        assert isinstance(out, Failure)
        assert "broken" in str(out.failure())


@attrs.frozen
class Point:
    """An item output that is no JSON value."""

    x: int


async def test_map_reduce_items_whose_output_is_no_json_value_run_again(
    make_store: StoreFactory,
) -> None:
    """Only JSON outputs are kept (as the docs say): an attrs output is
    computed again when the step runs again."""
    ran: collections.Counter[int] = collections.Counter()

    @handler(name="point")
    async def point(i: int) -> Result[Point, object]:
        ran[i] += 1
        if i == 0:
            return Success(Point(await interrupt("x?", int)))
        return Success(Point(i))

    def total(
        b: Batch, results: tuple[Result[Point, object], ...]
    ) -> Result[Batch, object]:
        return Success(
            attrs.evolve(b, total=sum(r.unwrap().x for r in results))
        )

    g: Graph[Batch, object] = (
        graph.builder(Batch)
        .node("sum", map_reduce(lambda b: b.items, point, total))
        .entry("sum")
        .edge("sum", END)
        .build()
    )
    async with make_store() as store:
        await g.run(Batch((0, 1)), store=store, thread_id="t")
        done = (await g.resume(store, "t", answer=5)).unwrap()
        assert done.state.total == 6
        assert ran == {0: 2, 1: 2}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(
    field=st.sampled_from(["waiting", "asked", "scope"]),
    inner=st.booleans(),
    value=json_values,
)
async def test_a_tampered_question_list_only_gives_decode_errors(
    field: str, inner: bool, value: object
) -> None:
    """The questions a record lists (their scopes, versions, the others
    waiting) decode, or fail as ``CheckpointDecodeError``: nothing else."""
    g = trio_graph(collections.Counter())
    store = stores.MemoryStore()
    await g.run(Trio(), store=store, thread_id="t")
    records = list(await store.records("t"))
    head = records[-1]
    doc = json.loads(head.data)
    pending = doc["pending"]["waiting"][0] if inner else doc["pending"]
    pending[field] = value
    data = json.dumps(doc).encode()
    records[-1] = Record(
        head.thread_id,
        head.version,
        head.parent,
        data,
        record_checksum(head.thread_id, head.version, head.parent, data),
    )
    copy = stores.MemoryStore()
    for r in records:
        await copy.commit(r, expected_head=r.parent)
    out = await g.load(copy, "t")
    if isinstance(out, Failure):
        assert isinstance(out.failure(), CheckpointDecodeError)
    else:
        assert all(isinstance(qid, str) for qid in out.unwrap().questions)


async def test_map_reduce_items_that_ask_nothing_make_no_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """In a checkpointed step, an item that never looks at its step costs
    no key and no digest of it (and so no boundary): none is made."""
    keyed: list[int] = []
    item_key = _item_key

    def counting(base: str, i: int, item: object) -> str:
        keyed.append(i)
        return item_key(base, i, item)

    monkeypatch.setattr("pipeline._mapreduce._item_key", counting)

    @handler(name="double")
    async def double(i: int) -> Result[int, object]:
        return Success(2 * i)

    done = (
        await summing(double).run(
            Batch(), store=stores.MemoryStore(), thread_id="t"
        )
    ).unwrap()
    assert done.state.total == 20
    assert keyed == []


async def test_a_map_reduce_item_that_looks_gets_its_own_step_once() -> None:
    """An item that looks at its step gets the one it would have had
    (scoped under its key: position and digest), the same object however
    often and from whichever task it looks."""
    scopes: dict[int, set[str]] = collections.defaultdict(set)
    ids: dict[int, set[int]] = collections.defaultdict(set)

    @handler(name="look")
    async def look(i: int) -> Result[int, object]:
        def note() -> None:
            step, boundary = current_step(), current_boundary()
            assert step is boundary
            assert boundary is not None
            scopes[i].add(boundary.scope)
            ids[i].add(id(boundary))

        note()
        async with anyio.create_task_group() as tg:  # a task of its own

            async def in_task() -> None:
                note()

            tg.start_soon(in_task)
        note()
        return Success(i)

    done = (
        await summing(look).run(
            Batch(), store=stores.MemoryStore(), thread_id="t"
        )
    ).unwrap()
    assert done.state.total == 10
    assert dict(scopes) == {
        n: {_item_key("m:sum#0", k, n)} for k, n in enumerate((1, 2, 3, 4))
    }
    assert all(len(v) == 1 for v in ids.values())
