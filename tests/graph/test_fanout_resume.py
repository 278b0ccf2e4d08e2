"""F8: a resumed fan-out re-runs only the branches that did not finish."""

from __future__ import annotations

import os
import random

from collections import Counter

import anyio
import attrs
import pytest

from pyrsistent import PVector, pvector
from returns.result import Failure, Result, Success

from pipeline import Context, Graph, Handler, Message, graph, handler, stores
from pipeline.failures import MergeConflict
from pipeline.graph import END
from pipeline.graph._merge import merge_states


SEEDS = int(os.environ.get("PIPELINE_FANOUT_SEEDS", "1000"))
K = 32


@attrs.frozen
class Tally:
    """Each branch appends its number."""

    done: PVector[int] = attrs.field(factory=pvector)


def build(
    faults: set[int],
    runs: Counter[int],
    finished: set[int] | None = None,
    version: str = "1",
) -> Graph[Tally, str]:
    def branch(i: int) -> Handler[Tally, Tally, str]:
        @handler(name=f"b{i}")
        async def run(t: Tally) -> Result[Tally, str]:
            runs[i] += 1
            for _ in range(i % 3):  # interleave the branches
                await anyio.lowlevel.checkpoint()
            if i in faults:
                return Failure(f"b{i} failed")
            if finished is not None:
                finished.add(i)
            return Success(attrs.evolve(t, done=t.done.append(i)))

        return run

    @handler
    async def start(t: Tally) -> Result[Tally, str]:
        return Success(t)

    b: graph.GraphBuilder[Tally, str] = graph.builder(Tally).node(
        "start", start
    )
    for i in range(K):
        b = b.node(f"b{i}", branch(i))
    return (
        b.entry("start")
        .fan_out("start", [f"b{i}" for i in range(K)], join=END)
        .build(version=version)
    )


async def run_seed(seed: int) -> None:
    rng = random.Random(seed)
    faults = {i for i in range(K) if rng.random() < 0.2}
    runs: Counter[int] = Counter()
    finished_first: set[int] = set()
    store = stores.MemoryStore()
    first = await build(faults, runs, finished_first).run(
        Tally(), store=store, thread_id="t"
    )
    if not faults:
        assert isinstance(first, Success)
        return
    assert isinstance(first, Failure)
    # The faults clear; the same graph shape resumes.
    again = build(set(), runs)
    done = (await again.resume(store, "t")).unwrap()
    assert list(done.state.done) == list(range(K))  # the oracle: all, in order
    for i in finished_first:
        assert runs[i] == 1, (seed, i)  # a finished branch never re-ran
    assert all(runs[i] <= 2 for i in range(K))


@pytest.mark.slow
async def test_resumed_fan_out_reruns_only_unfinished_branches() -> None:
    """Seeded faults in a 32-way fan-out: finished branches never re-run."""
    for seed in range(SEEDS):
        await run_seed(seed)


async def test_kept_outputs_from_another_graph_are_recomputed() -> None:
    """Branch outputs kept by another graph version are not trusted."""
    runs: Counter[int] = Counter()
    finished: set[int] = set()
    store = stores.MemoryStore()
    await build({5}, runs, finished).run(Tally(), store=store, thread_id="t")
    assert finished
    again = build(set(), runs, version="2")
    done = (await again.resume(store, "t", migrate=lambda s: s)).unwrap()
    assert list(done.state.done) == list(range(K))
    assert all(runs[i] == 2 for i in finished)  # recomputed under version 2


async def test_finished_branches_are_records_of_the_thread() -> None:
    """Each finished branch is a progress record; the join starts afresh."""
    runs: Counter[int] = Counter()
    finished: set[int] = set()
    store = stores.MemoryStore()
    await build({5}, runs, finished).run(Tally(), store=store, thread_id="t")
    head = await store.head("t")
    paused = (await build(set(), runs).load(store, "t")).unwrap()
    assert head == paused.version == 1 + len(paused.progress)
    assert sorted(paused.progress) == sorted(f"b:b{i}" for i in finished)
    done = (await build(set(), runs).resume(store, "t")).unwrap()
    assert done.progress == {}


@attrs.frozen
class Desk:
    """Each branch appends a message (messages read back from a record
    are equal to the live ones, not the same objects)."""

    messages: PVector[Message] = attrs.field(factory=pvector)


async def test_a_resumed_fan_out_merges_vectors_read_back_from_records() -> (
    None
):
    """A fan-out whose branches extend a vector of messages, one branch
    failing on the first run: on resume the finished branches' outputs
    are read back from their records (equal messages, other objects than
    the base's) and still merge, every branch's additions once, in
    definition order (found attacking: a fan-out of agents cancelled
    part-way could never be resumed, each resume refused as branches
    that all changed the field)."""
    failing = {"b1"}
    runs: Counter[str] = Counter()

    def branch(name: str) -> Handler[Desk, Desk, str]:
        @handler(name=name)
        async def run(d: Desk) -> Result[Desk, str]:
            runs[name] += 1
            if name in failing:
                return Failure(f"{name} failed")
            said = Message.assistant(f"from {name}")
            return Success(Desk(d.messages.append(said)))

        return run

    @handler
    async def start(d: Desk) -> Result[Desk, str]:
        return Success(d)

    names = ["b0", "b1", "b2"]
    b: graph.GraphBuilder[Desk, str] = graph.builder(Desk).node("start", start)
    for name in names:
        b = b.node(name, branch(name))
    g = (
        b.node("join", start)
        .entry("start")
        .fan_out("start", names, join="join")
        .edge("join", END)
        .build()
    )
    store = stores.MemoryStore()
    first = await g.run(
        Desk(pvector([Message.user("go")])), store=store, thread_id="t"
    )
    assert first == Failure("b1 failed")
    failing.clear()
    done = (await g.resume(store, "t")).unwrap()
    assert [m.content for m in done.state.messages] == [
        "go",
        "from b0",
        "from b1",
        "from b2",
    ]
    assert runs == Counter({"b0": 1, "b1": 2, "b2": 1})


def test_merged_vectors_of_equal_items_keep_every_branchs_additions() -> None:
    """The merge reads a vector as extended when it starts with the base's
    items, the same objects or equal ones; one whose start was edited is
    still a conflict."""
    base = Desk(pvector([Message.user("go")]))
    copy = Message.user("go")  # equal, not the same object
    outs = (
        Desk(pvector([copy, Message.assistant("a")])),
        Desk(pvector([Message.user("go"), Message.assistant("b")])),
    )
    merged = merge_states(base, outs, ["x", "y"], {}).unwrap()
    assert [m.content for m in merged.messages] == ["go", "a", "b"]
    assert merged.messages[0] is base.messages[0]
    edited = (
        outs[0],
        Desk(pvector([Message.user("stop"), Message.assistant("b")])),
    )
    out = merge_states(base, edited, ["x", "y"], {})
    assert out == Failure(MergeConflict("messages", ("x", "y")))


def test_merged_contexts_of_equal_messages_keep_every_branchs_additions() -> (
    None
):
    """The same for contexts (a fan-out of agents over a context)."""
    base = Context.of(Message.user("go"), run_id="r")
    outs = tuple(
        Context.of(Message.user("go"), Message.assistant(said), run_id="r")
        for said in ("a", "b")
    )
    merged = merge_states(base, outs, ["x", "y"], {}).unwrap()
    assert [m.content for m in merged.messages] == ["go", "a", "b"]
