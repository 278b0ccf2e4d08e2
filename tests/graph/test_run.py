"""Running graphs: routes, fan-out merges, limits, gates, events."""

from __future__ import annotations

import anyio
import attrs
import pytest

from hypothesis import given
from hypothesis import strategies as st
from pyrsistent import PVector, pvector
from returns.result import Failure, Result, Success

from pipeline import (
    Context,
    Graph,
    Handler,
    Message,
    fold,
    graph,
    handler,
    map_reduce,
    stores,
)
from pipeline.events import FoldEvent, Interrupted
from pipeline.failures import MergeConflict, StepLimitExceeded, UnknownRoute
from pipeline.fold import Continue, Interrupt, Status, Stop, Transition
from pipeline.graph import END
from tests.graph.helpers import Counted, failing, step


def chain() -> Graph[Counted, str]:
    return (
        graph.builder(Counted)
        .node("a", step("a"))
        .node("b", step("b"))
        .node("c", step("c"))
        .entry("a")
        .edge("a", "b")
        .route("b", lambda s: "b" if s.count < 4 else "c", to=["b", "c"])
        .edge("c", END)
        .build()
    )


async def test_run_folds_to_end() -> None:
    """A run follows static and routed edges to END."""
    out = (await chain().run(Counted())).unwrap()
    assert out.status is Status.DONE
    assert list(out.state.trail) == ["a", "b", "b", "b", "c"]
    assert out.step == 5
    assert out.version == 5
    assert out.next == ()


async def test_step_is_pure() -> None:
    """step() returns the next snapshot and leaves its input alone."""
    g = chain()
    first = g.start(Counted())
    second = (await g.step(first)).unwrap()
    assert first.state == Counted()
    assert first.version == 0
    assert (second.version, second.parent, second.node) == (1, 0, "a")
    assert second.state.count == 1


async def test_unknown_route_is_a_typed_failure() -> None:
    """A router naming an undeclared node fails; it never silently ends."""
    g = (
        graph.builder(Counted)
        .node("a", step("a"))
        .node("b", step("b"))
        .entry("a")
        .route("a", lambda s: "nowhere", to=["b"])
        .edge("b", END)
        .build()
    )
    out = await g.run(Counted())
    assert out == Failure(UnknownRoute("a", "nowhere", ("b",), path=("a",)))


async def test_node_failure_stops_the_run() -> None:
    """A failing node's failure is the run's result."""
    g = (
        graph.builder(Counted)
        .node("a", step("a"))
        .node("bad", failing("bad", "nope"))
        .entry("a")
        .edge("a", "bad")
        .edge("bad", END)
        .build()
    )
    assert await g.run(Counted()) == Failure("nope")


async def test_step_limit_is_exact_and_resumable() -> None:
    """An endless loop stops after exactly max_steps nodes; the stop is a
    record (resuming returns it), and the version before it goes on."""
    g = (
        graph.builder(Counted)
        .node("spin", step("spin"))
        .entry("spin")
        .route(
            "spin",
            lambda s: "spin" if s.count < 10**9 else END,
            to=["spin", END],
        )
        .build()
    )
    store = stores.MemoryStore()
    for limit in (1, 2, 10):
        out = await g.run(
            Counted(),
            store=store,
            thread_id=f"t{limit}",
            limits=graph.GraphLimits(max_steps=limit),
        )
        err = out.failure()
        assert isinstance(err, StepLimitExceeded)
        assert err.limit == limit
        assert err.tail[-1] == "spin"
        head = (await g.load(store, f"t{limit}")).unwrap()
        assert head.state.count == limit
    stop = (await g.load(store, "t10")).unwrap()
    assert stop.status is Status.STOPPED
    assert stop.reason.startswith("step limit 10 reached")
    again = await g.resume(
        store, "t10", limits=graph.GraphLimits(max_steps=15)
    )
    assert again.unwrap() == stop  # stays stopped: nothing ran
    more = await g.resume(
        store,
        "t10",
        version=stop.parent,
        limits=graph.GraphLimits(max_steps=15),
    )
    assert isinstance(more.failure(), StepLimitExceeded)
    assert (await g.load(store, "t10")).unwrap().state.count == 15


def fan(
    reducers: dict[str, graph.Reducer] | None = None,
) -> Graph[Counted, str]:
    def tag(name: str) -> Handler[Counted, Counted, str]:
        @handler(name=name)
        async def run(s: Counted) -> Result[Counted, str]:
            return Success(
                attrs.evolve(s, trail=s.trail.append(name), note=name)
            )

        return run

    return (
        graph.builder(Counted)
        .node("src", step("src"))
        .node("x", tag("x"))
        .node("y", tag("y"))
        .node("z", step("z"))
        .entry("src")
        .fan_out("src", ["x", "y"], join="z", reducers=reducers)
        .edge("z", END)
        .build()
    )


async def test_fan_out_conflict_without_reducer() -> None:
    """Two branches writing one plain field without a rule is a conflict."""
    out = await fan().run(Counted())
    assert out == Failure(MergeConflict("note", ("x", "y")))


async def test_fan_out_merges_logs_and_reduces_fields() -> None:
    """Vectors get each branch's additions in order; reducers resolve fields."""
    joined = fan({"note": lambda before, vals: "+".join(vals)})
    out = (await joined.run(Counted())).unwrap()
    assert list(out.state.trail) == ["src", "x", "y", "z"]
    assert out.state.note == "x+y"
    assert out.state.count == 2


@pytest.mark.slow
@given(order=st.permutations(range(5)))
async def test_fan_out_merge_ignores_completion_order(
    order: list[int],
) -> None:
    """Whatever order branches finish in, the merged state is the same."""
    gates = [anyio.Event() for _ in range(5)]
    done = [anyio.Event() for _ in range(5)]

    def branch(i: int) -> Handler[Context, Context, str]:
        @handler(name=f"b{i}")
        async def run(ctx: Context) -> Result[Context, str]:
            await gates[i].wait()
            done[i].set()
            return Success(
                ctx.append(Message.assistant(f"b{i}")).set(f"k{i}", i)
            )

        return run

    @handler
    async def src(ctx: Context) -> Result[Context, str]:
        return Success(ctx)

    b = graph.builder(Context).node("src", src)
    for i in range(5):
        b = b.node(f"b{i}", branch(i))
    g = (
        b.entry("src")
        .fan_out("src", [f"b{i}" for i in range(5)], join=END)
        .build()
    )
    results: list[Context] = []
    async with anyio.create_task_group() as tg:

        async def go() -> None:
            results.append(
                (await g.run(Context.of(Message.user("q")))).unwrap().state
            )

        tg.start_soon(go)
        for i in order:
            gates[i].set()
            await done[i].wait()
    merged = results[0]
    assert [m.content for m in merged.messages] == [
        "q",
        "b0",
        "b1",
        "b2",
        "b3",
        "b4",
    ]
    assert dict(merged.metadata) == {f"k{i}": i for i in range(5)}


async def test_gate_stop_and_observer() -> None:
    """A gate can stop the run gracefully; observers see each snapshot."""
    seen: list[str | None] = []

    async def gate(t: Transition[Counted]) -> fold.Decision:
        return Stop("enough") if t.targets == ("c",) else Continue()

    async def observe(s: fold.Snapshot[Counted]) -> None:
        seen.append(s.node)

    out = (
        await chain().run(Counted(), gates=[gate], observers=[observe])
    ).unwrap()
    assert out.status is Status.STOPPED
    assert out.next == ("c",)
    assert seen == ["a", "b", "b", "b"]


async def test_interrupt_then_resume_with_answer() -> None:
    """An interrupt saves a resumable checkpoint; the answer reaches the gate."""
    answers: list[object] = []

    async def approval(t: Transition[Counted]) -> fold.Decision:
        if t.targets != ("c",):
            return Continue()
        answers.append(t.answer)
        if t.answer is None:
            return Interrupt("ship it?")
        return Continue() if t.answer == "yes" else Stop("denied")

    store = stores.MemoryStore()
    events: list[FoldEvent] = []

    async def sink(e: FoldEvent) -> None:
        events.append(e)

    g = chain()
    paused = (
        await g.run(
            Counted(),
            store=store,
            thread_id="t",
            gates=[approval],
            on_event=sink,
        )
    ).unwrap()
    assert paused.status is Status.INTERRUPTED
    assert paused.pending == fold.Pending("b", ("c",), "ship it?")
    assert Interrupted("ship it?") in events
    loaded = (await g.load(store, "t")).unwrap()
    assert loaded.pending == paused.pending
    done = (
        await g.resume(store, "t", answer="yes", gates=[approval])
    ).unwrap()
    assert done.status is Status.DONE
    assert list(done.state.trail)[-1] == "c"
    assert answers == [None, "yes"]
    kinds = [type(e).__name__ for e in events]
    assert kinds[:3] == ["CheckpointSaved", "NodeStarted", "CheckpointSaved"]


async def test_map_reduce_as_a_node() -> None:
    """map_reduce is a handler, so it is a graph node."""

    @handler
    async def square(x: int) -> Result[int, str]:
        return Success(x * x)

    def reduce(
        s: Counted, results: tuple[Result[int, str], ...]
    ) -> Result[Counted, str]:
        return Success(attrs.evolve(s, count=sum(r.unwrap() for r in results)))

    mr = map_reduce(
        lambda s: range(s.count), square, reduce, max_concurrency=3
    )
    g = (
        graph.builder(Counted)
        .node("mr", mr)
        .entry("mr")
        .edge("mr", END)
        .build()
    )
    out = (await g.run(Counted(count=5))).unwrap()
    assert out.state.count == 0 + 1 + 4 + 9 + 16


async def test_context_state_and_plain_values() -> None:
    """Contexts and plain values work as graph states too."""

    @handler
    async def hello(ctx: Context) -> Result[Context, str]:
        return Success(ctx.append(Message.assistant("hi")))

    g = (
        graph.builder(Context)
        .node("hello", hello)
        .entry("hello")
        .edge("hello", END)
        .build()
    )
    out = (await g.run(Context.of(Message.user("yo")))).unwrap()
    assert [m.content for m in out.state.messages] == ["yo", "hi"]

    @handler
    async def inc(x: int) -> Result[int, str]:
        return Success(x + 1)

    gi = (
        graph.builder(int)
        .node("inc", inc)
        .entry("inc")
        .edge("inc", END)
        .build()
    )
    assert (await gi.run(41)).unwrap().state == 42
    assert pvector([1]) == pvector([1])


async def test_fan_out_concurrency_is_bounded() -> None:
    """No more branches run at once than Limits.concurrency allows."""
    running = [0, 0]  # now, peak

    def slow(i: int) -> Handler[Counted, Counted, str]:
        @handler(name=f"s{i}")
        async def run(s: Counted) -> Result[Counted, str]:
            running[0] += 1
            running[1] = max(running[1], running[0])
            for _ in range(3):
                await anyio.lowlevel.checkpoint()
            running[0] -= 1
            return Success(attrs.evolve(s, trail=s.trail.append(f"s{i}")))

        return run

    b: graph.GraphBuilder[Counted, str] = graph.builder(Counted).node(
        "src", step("src")
    )
    for i in range(40):
        b = b.node(f"s{i}", slow(i))
    g = (
        b.entry("src")
        .fan_out("src", [f"s{i}" for i in range(40)], join=END)
        .build()
    )
    out = (
        await g.run(Counted(), limits=graph.GraphLimits(concurrency=3))
    ).unwrap()
    assert running[1] == 3
    assert list(out.state.trail) == ["src", *(f"s{i}" for i in range(40))]
    with pytest.raises(ValueError, match="concurrency"):
        graph.GraphLimits(concurrency=0)


async def test_fan_out_branch_editing_a_vector_is_a_conflict() -> None:
    """A branch that edits an element of a vector another branch extends
    is a MergeConflict, never a merge that drops the edit."""

    @attrs.frozen
    class Items:
        items: PVector[str] = attrs.field(factory=lambda: pvector(["todo"]))

    @handler
    async def start(s: Items) -> Result[Items, str]:
        return Success(Items(s.items.append("b")))

    @handler
    async def left(s: Items) -> Result[Items, str]:
        return Success(Items(s.items.set(0, "DONE").append("l")))

    @handler
    async def right(s: Items) -> Result[Items, str]:
        return Success(Items(s.items.append("r")))

    g = (
        graph.builder(Items)
        .node("start", start)
        .node("left", left)
        .node("right", right)
        .entry("start")
        .fan_out("start", ["left", "right"], join=END)
        .build()
    )
    out = await g.run(Items())
    assert isinstance(out, Failure)
    assert isinstance(out.failure(), MergeConflict)
    assert out.failure().field == "items"


async def test_fan_out_branch_rewriting_context_history_is_a_conflict() -> (
    None
):
    """On a context state, a branch that rewrote earlier messages cannot be
    merged with the others: MergeConflict on the messages."""

    @handler
    async def start(c: Context) -> Result[Context, str]:
        return Success(c.append(Message.user("q")))

    @handler
    async def rewrite(c: Context) -> Result[Context, str]:
        return Success(c.with_messages([Message.user("redacted")]))

    @handler
    async def add(c: Context) -> Result[Context, str]:
        return Success(c.append(Message.assistant("a")))

    g = (
        graph.builder(Context)
        .node("start", start)
        .node("rewrite", rewrite)
        .node("add", add)
        .entry("start")
        .fan_out("start", ["rewrite", "add"], join=END)
        .build()
    )
    out = await g.run(Context())
    assert isinstance(out, Failure)
    conflict = out.failure()
    assert isinstance(conflict, MergeConflict)
    assert (conflict.field, conflict.branches) == ("messages", ("rewrite",))


async def test_two_branches_changing_a_field_to_equal_values_conflict() -> (
    None
):
    """Two branches that each add one to a counter both changed it: taking
    either value would lose an increment, so it is a MergeConflict."""

    @handler(name="inc")
    async def inc(s: Counted) -> Result[Counted, str]:
        return Success(attrs.evolve(s, count=s.count + 1))

    @handler(name="start")
    async def start(s: Counted) -> Result[Counted, str]:
        return Success(s)

    g = (
        graph.builder(Counted)
        .node("start", start)
        .node("a", inc)
        .node("b", inc)
        .entry("start")
        .fan_out("start", ["a", "b"], join=END)
        .build()
    )
    out = await g.run(Counted())
    conflict = out.failure()
    assert isinstance(conflict, MergeConflict)
    assert (conflict.field, conflict.branches) == ("count", ("a", "b"))
