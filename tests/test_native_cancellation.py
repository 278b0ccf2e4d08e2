"""Cancellation reaches the caller, however it is cancelled.

A native asyncio cancellation (``task.cancel()``, ``asyncio.wait_for``,
``asyncio.timeout``) that lands just after a branch of ``&``, ``must`` or a
fail-fast ``map_reduce`` hit ``timeout()`` used to come back as a
``Failure``: anyio's task group erased it (see
``docs/upstream/anyio-taskgroup-cancel.md``); an agent's tools ran in a
bare task group with the same fault.  Composites that never suspend used
to run to the end for an already-cancelled caller.  Leaving a ``stream()``
while a fan-out's branches emitted raised out of the block.  The tests at
the end cancel the backend's own way on both backends (``tests/cancelling.py``).
"""

from __future__ import annotations

import asyncio
import time

from collections.abc import Callable, Coroutine
from typing import Any, Literal

import anyio
import attrs
import pytest

from pyrsistent import PVector, pvector
from returns.result import Failure, Result, Success

from pipeline import (
    Agent,
    Context,
    Handler,
    Message,
    Note,
    emit,
    first,
    for_each,
    graph,
    handler,
    loop,
    map_reduce,
    must,
    sequential,
    stream,
    tool,
)
from pipeline.agents import ParallelAgent
from pipeline.events import Event, MessageComplete
from pipeline.graph import END
from pipeline.middleware import timeout
from pipeline.testing import Reply, ScriptedModel
from pipeline.typing import Call
from tests.cancelling import (
    call_pre_cancelled,
    deadline_error,
    native_deadline,
)


Shape = Literal["and", "must", "map_reduce", "first", "nested"]
SHAPES: tuple[Shape, ...] = ("and", "must", "map_reduce", "first", "nested")
Mode = Literal["task.cancel", "wait_for", "asyncio.timeout"]
MODES: tuple[Mode, ...] = ("task.cancel", "wait_for", "asyncio.timeout")
TRIALS = 12


@handler
async def forever(x: int) -> Result[int, str]:
    await anyio.sleep(3600)
    return Success(x)


def _then_cancel_caller(
    cancel: Callable[[], None],
) -> Callable[[Call[int, int, Any], str], Call[int, int, Any]]:
    """Middleware: once the wrapped call returned, call *cancel*.

    *cancel* arranges the caller's cancellation (how depends on the mode).
    """

    def middleware(call: Call[int, int, Any], _: str) -> Call[int, int, Any]:
        async def run(x: int) -> Result[int, Any]:
            r = await call(x)
            cancel()
            return r

        return run

    return middleware


def _composite(shape: Shape, branch: Handler[int, int, Any]) -> Any:
    """*shape* over two copies of *branch*, each hitting its timeout."""
    if shape == "and":
        return branch & branch
    if shape == "must":
        return must(branch, branch, aggregate=lambda _, outs: Success(outs))
    if shape == "map_reduce":
        return map_reduce(
            lambda _: [1, 2],
            branch,
            lambda _, rs: Success(rs),
            fail_fast=True,
        )
    if shape == "first":
        return first(branch, branch, forever)
    return (branch & branch) >> handler(_identity)


async def _identity(x: Any) -> Result[Any, Any]:
    return Success(x)


class RecordingTask(asyncio.tasks._PyTask):  # type: ignore[name-defined,misc]
    """A task that remembers whether a cancellation reached it running."""

    cancel_requested = False

    def cancel(self, msg: Any = None) -> bool:
        accepted: bool = super().cancel(msg)
        self.cancel_requested = self.cancel_requested or accepted
        return accepted


async def _trial(shape: Shape, mode: Mode) -> str:
    """One run; ``cancelled``, ``finished`` (before any cancel) or a bug."""
    loop = asyncio.get_running_loop()
    box: list[RecordingTask] = []
    deadline: list[asyncio.Timeout] = []

    def cancel_caller() -> None:
        # Either way the cancellation reaches the caller in the next round
        # of the event loop, while the group cancels its other branches.
        if mode == "task.cancel":
            loop.call_soon(box[0].cancel)
        elif mode == "asyncio.timeout" and not deadline[0].expired():
            # Under ``first`` the other branch is not cancelled when one
            # fails: it may time out on its own after the deadline fired
            # (and a fired ``asyncio.Timeout`` refuses ``reschedule``).
            deadline[0].reschedule(loop.time())

    branch = forever.use(_then_cancel_caller(cancel_caller), timeout(0.002))
    comp = _composite(shape, branch)

    async def run() -> Any:
        if mode == "asyncio.timeout":
            async with asyncio.timeout(None) as cm:
                deadline.append(cm)
                return await comp(1)
        return await comp(1)

    task = RecordingTask(run(), loop=loop)
    box.append(task)
    try:
        if mode == "wait_for":
            # Due with the branches' own timeouts: it lands around them.
            await asyncio.wait_for(task, 0.002)
        else:
            await task
    except (asyncio.CancelledError, TimeoutError):
        return "cancelled"
    return "SWALLOWED" if task.cancel_requested else "finished"


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", SHAPES)
async def test_native_cancellation_after_a_timeout_propagates(
    shape: Shape, mode: Mode
) -> None:
    """A native cancellation landing after a branch timed out is never lost."""
    outcomes = [await _trial(shape, mode) for _ in range(TRIALS)]
    assert "SWALLOWED" not in outcomes, outcomes
    if mode != "wait_for":
        assert set(outcomes) == {"cancelled"}, outcomes


async def test_scope_cancellation_after_a_timeout_propagates() -> None:
    """The same with an anyio scope cancelled at that moment (both backends)."""
    for shape in SHAPES:
        for _ in range(TRIALS):
            scopes: list[anyio.CancelScope] = []
            branch = forever.use(_scope_canceller(scopes), timeout(0.002))
            comp = _composite(shape, branch)
            finished = False
            with anyio.CancelScope() as scope:
                scopes.append(scope)
                await comp(1)
                finished = True
            assert not finished, shape
            assert scope.cancelled_caught, shape


@pytest.mark.parametrize("shape", SHAPES)
async def test_a_branch_error_as_the_caller_is_cancelled_is_raised_alone(
    shape: Shape,
) -> None:
    """A branch raising just as the caller's scope is cancelled raises its
    own error, never a group of it: on trio the branch's error and the
    caller's ``Cancelled`` ended the task group together, and the caller's
    scope stripped the ``Cancelled`` and left ``ExceptionGroup([error])``
    (attack16 F4)."""
    scopes: list[anyio.CancelScope] = []
    calls: list[int] = []

    @handler
    async def boom_once(x: int) -> Result[int, str]:
        calls.append(x)
        if len(calls) > 1:
            await anyio.sleep(3600)
        await anyio.lowlevel.checkpoint()
        scopes[0].cancel()
        raise ConnectionError("the store went away")

    async def run() -> None:
        with anyio.CancelScope() as scope:
            scopes.append(scope)
            await _composite(shape, boom_once)(1)

    with pytest.raises(ConnectionError, match="went away"):
        await run()
    assert len(calls) >= 1


def _scope_canceller(
    scopes: list[anyio.CancelScope],
) -> Callable[[Call[int, int, Any], str], Call[int, int, Any]]:
    def middleware(call: Call[int, int, Any], _: str) -> Call[int, int, Any]:
        async def run(x: int) -> Result[int, Any]:
            r = await call(x)
            scopes[0].cancel()
            return r

        return run

    return middleware


# -- already cancelled: nothing runs ------------------------------------------


def _counting() -> tuple[list[int], Handler[int, int, str]]:
    ran: list[int] = []

    @handler
    async def step(x: int) -> Result[int, str]:
        ran.append(x)
        return Success(x + 1)

    return ran, step


def _pre_cancelled_shapes(
    step: Handler[int, int, str],
) -> dict[str, Handler[int, Any, Any]]:
    return {
        ">>": step >> step,
        "sequential": sequential(step, step),
        "loop": loop(step, times=3),
        "for_each": for_each([1, 2], handler(_item_step(step))),
        "&": step & step,
        "|": step | step,
        "must": must(step, step, aggregate=lambda _, outs: Success(outs)),
        "map_reduce": map_reduce(
            lambda _: [1, 2], step, lambda _, rs: Success(len(rs))
        ),
    }


def _item_step(
    step: Handler[int, int, str],
) -> Callable[[Any], Coroutine[Any, Any, Result[int, str]]]:
    async def body(item: Any) -> Result[int, str]:
        return await step(item.state)

    return body


@pytest.mark.parametrize(
    "shape",
    [">>", "sequential", "loop", "for_each", "&", "|", "must", "map_reduce"],
)
async def test_pre_cancelled_composites_run_nothing(shape: str) -> None:
    """In an already-cancelled scope, no step of a composite runs."""
    ran, step = _counting()
    composite = _pre_cancelled_shapes(step)[shape]
    returned = False
    with anyio.CancelScope() as scope:
        scope.cancel()
        await composite(1)
        returned = True
    assert not returned
    assert ran == []


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_pre_cancelled_task_runs_nothing() -> None:
    """A task cancelled natively before it ran never runs a step."""
    ran, step = _counting()
    task = asyncio.ensure_future(sequential(step, step)(1))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert ran == []


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_failure_value_not_confused_with_cancellation() -> None:
    """Without any cancellation, a timed-out branch is a Failure value."""
    comp = forever.use(timeout(0.001)) & forever.use(timeout(0.001))
    r = await comp(1)
    assert type(r) is Failure


# -- leaving a stream while the caller is cancelled natively --------------------


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_stream_exit_keeps_a_native_cancellation() -> None:
    """Leaving stream() early while cancelled natively stays cancelled.

    The run's own cancel scope was cancelled (a count on the run's task)
    just before the block was left and the caller was cancelled: the
    stream's task group used to erase the caller's cancellation.
    """
    scopes: list[anyio.CancelScope] = []

    @handler
    async def waits(x: int) -> Result[int, str]:
        with anyio.CancelScope() as scope:
            scopes.append(scope)
            await emit(Note("waits", "ready"))
            await anyio.sleep(3600)
        return Success(x)

    async def consume() -> str:
        host = asyncio.current_task()
        assert host is not None
        loop = asyncio.get_running_loop()

        def cancel_later() -> None:
            loop.call_soon(host.cancel)

        async with stream(waits, 1) as events:
            async for _ in events:
                scopes[0].cancel()
                # Lands after the stream has started cancelling its run.
                loop.call_soon(cancel_later)
                break
        return "finished"

    task = asyncio.get_running_loop().create_task(consume())
    with pytest.raises(asyncio.CancelledError):
        await task


# -- the backend's own cancellation, on both backends ---------------------------


@pytest.mark.parametrize(
    "shape",
    [">>", "sequential", "loop", "for_each", "&", "|", "must", "map_reduce"],
)
async def test_pre_cancelled_native_caller_runs_nothing(shape: str) -> None:
    """A ``Task.cancel()`` not yet delivered (asyncio) or a cancelled trio
    scope: no step runs, the caller sees its cancellation, never a value."""
    ran, step = _counting()
    composite = _pre_cancelled_shapes(step)[shape]
    assert await call_pre_cancelled(lambda: composite(1)) == "cancelled"
    assert ran == []


@tool(timeout=0.05)
async def slow() -> str:
    """Times out (its own timeout) while the loop is blocked."""
    await anyio.sleep(10)
    return "late"


@tool
async def blocker() -> str:
    """An async tool that blocks the event loop (a careless one)."""
    # The blocked loop is the scenario: when it resumes, the tool's timeout,
    # the agent's timeout() and the caller's deadline are all due at once,
    # and fire in that order.
    time.sleep(0.2)  # noqa: ASYNC251
    return "ok"


async def test_run_tools_keeps_the_callers_native_deadline() -> None:
    """The red team's case: the agent's tools ran in a bare task group, so
    the tool's timeout handed its cancel count to the group, which erased
    the caller's expired ``asyncio.timeout`` and returned a Failure."""
    model = ScriptedModel(
        Reply.tool_calls(("slow", {}, "c1"), ("blocker", {}, "c2")),
        Reply.text("done"),
        strict=False,
    )
    agent = Agent("ag", model, tools=[slow, blocker]).use(timeout(0.10))
    returned = None
    with pytest.raises(deadline_error()):
        async with native_deadline(0.15):
            returned = await agent(Context.of(Message.user("go")))
    assert returned is None


@handler
async def chatty(x: int) -> Result[int, str]:
    """Emits five notes and finishes (checkpoints only in emit)."""
    for i in range(5):
        await emit(Note("chatty", f"step {i}"))
    return Success(x)


@handler
async def endless(x: int) -> Result[int, str]:
    """Emits until cancelled."""
    i = 0
    while True:
        await emit(Note("endless", str(i)))
        i += 1


@tool
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@attrs.frozen
class Trail:
    log: PVector[str] = attrs.field(factory=pvector)


def _emitting_node(name: str, notes: int | None) -> Handler[Trail, Trail, str]:
    """A node emitting *notes* notes (``None``: until cancelled)."""

    @handler(name=name)
    async def node(s: Trail) -> Result[Trail, str]:
        i = 0
        while notes is None or i < notes:
            await emit(Note(name, str(i)))
            i += 1
        return Success(attrs.evolve(s, log=s.log.append(name)))

    return node


def _fan_out_graph(notes: int | None) -> Any:
    return (
        graph.builder(Trail)
        .node("start", _emitting_node("start", 5))
        .node("a", _emitting_node("a", notes))
        .node("b", _emitting_node("b", notes))
        .node("j", _emitting_node("j", 5))
        .entry("start")
        .fan_out("start", ["a", "b"], join="j")
        .edge("j", END)
        .build()
    )


def _parallel_agents() -> Any:
    def scripted() -> ScriptedModel:
        return ScriptedModel(
            Reply.tool_call("add", {"a": 1, "b": 2}),
            Reply.text("x"),
            strict=False,
        )

    return ParallelAgent(
        "p",
        [
            Agent("a1", scripted(), tools=[add]),
            Agent("a2", scripted(), tools=[add]),
        ],
    )


def _leaving_cases() -> dict[str, tuple[Any, Any, Callable[[Event], bool]]]:
    """Fan-outs whose branches emit, and the event after which to leave."""
    in_branch: Callable[[Event], bool] = lambda e: (  # noqa: E731
        isinstance(e, Note) and e.source in {"a", "b"}
    )
    note: Callable[[Event], bool] = lambda e: isinstance(e, Note)  # noqa: E731
    message: Callable[[Event], bool] = lambda e: isinstance(  # noqa: E731
        e, MessageComplete
    )
    ctx = Context.of(Message.user("hi"))
    return {
        "chatty & chatty": (chatty & chatty, 1, note),
        "endless & endless": (endless & endless, 1, note),
        "ParallelAgent": (_parallel_agents(), ctx, message),
        "graph fan-out": (_fan_out_graph(5), Trail(), in_branch),
        "endless graph fan-out": (_fan_out_graph(None), Trail(), in_branch),
    }


@pytest.mark.parametrize("case", list(_leaving_cases()))
async def test_leaving_a_stream_while_branches_emit_is_clean(
    case: str,
) -> None:
    """The red team's case: the branches' next emit hit the closed stream
    and ``BrokenResourceError`` (in a group) escaped the block.  Now what
    they emit after the reader left is dropped, they are cancelled (an
    endless emitter included), and the block exits as left."""
    for _ in range(20):  # the interleavings differ from run to run
        h, value, leave_after = _leaving_cases()[case]
        with anyio.fail_after(30):  # a guard: a hang fails, never waits
            async with stream(h, value) as events:
                async for event in events:
                    if leave_after(event):
                        break


@pytest.mark.parametrize("after", range(1, 13))
async def test_a_native_deadline_around_a_stream_reader_stays_a_timeout(
    after: int,
) -> None:
    """``asyncio.timeout`` (``trio.fail_after`` on trio) expiring while the
    reader reads a fan-out's events raises the deadline's own error: never
    an ``ExceptionGroup`` or ``BrokenResourceError``."""
    seen: list[Event] = []
    with pytest.raises(deadline_error()):
        await _read_and_expire(endless & endless, after, seen)
    assert len(seen) >= after


async def _read_and_expire(
    h: Handler[int, Any, Any], after: int, seen: list[Event]
) -> None:
    """Read *h*'s stream; expire a native deadline after *after* events."""
    async with native_deadline() as expire, stream(h, 1) as events:
        async for event in events:
            seen.append(event)
            if len(seen) == after:
                expire()  # lands while both branches emit
