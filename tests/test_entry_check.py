"""The composites' check for cancellation on entry, fast path included.

On asyncio, ``checkpoint_if_cancelled`` walks the task's anyio scopes
itself when nothing is cancelled (anyio's own check first finds the
backend again); these tests hold it to anyio's own check, over any
nesting of scopes, shielded or not, cancelled or not.
"""

from __future__ import annotations

import asyncio

from contextlib import ExitStack

import anyio
import hypothesis.strategies as st
import pytest

from hypothesis import given, settings
from returns.result import Result, Success

from pipeline import handler
from pipeline._concurrency import checkpoint_if_cancelled


Scope = tuple[bool, bool]  # (shield, cancelled)

scopes = st.lists(st.tuples(st.booleans(), st.booleans()), max_size=5)


async def _reached(
    nesting: list[Scope], check: str, *, from_child: bool
) -> bool:
    """Whether code after the *check* runs inside *nesting* (outermost
    first), the scopes marked cancelled being cancelled from inside."""
    reached = False

    async def body() -> None:
        nonlocal reached
        with ExitStack() as stack:
            opened = [
                stack.enter_context(anyio.CancelScope(shield=shield))
                for shield, _ in nesting
            ]
            for scope, (_, cancelled) in zip(opened, nesting, strict=True):
                if cancelled:
                    scope.cancel()
            if check == "ours":
                await checkpoint_if_cancelled()
            else:
                await anyio.lowlevel.checkpoint_if_cancelled()
            reached = True

    if from_child:  # a task anyio started (its own task state)
        async with anyio.create_task_group() as tg:
            tg.start_soon(body)
    else:
        await body()
    return reached


@pytest.mark.parametrize("from_child", [False, True])
@settings(max_examples=60, deadline=None)
@given(nesting=scopes)
async def test_entry_check_agrees_with_anyio(
    nesting: list[Scope], from_child: bool
) -> None:
    """Any nesting of scopes: the check lets the code on exactly when
    anyio's own check does."""
    ours = await _reached(nesting, "ours", from_child=from_child)
    theirs = await _reached(nesting, "anyio", from_child=from_child)
    assert ours == theirs


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # asyncio tasks
async def test_entry_check_outside_anyio_tasks() -> None:
    """A task anyio never saw (asyncio.create_task): nothing to walk, the
    code runs on; a native cancel request still stops it."""

    @handler
    async def inc(x: int) -> Result[int, str]:
        return Success(x + 1)

    chain = inc >> inc

    async def plain() -> Result[int, str]:
        return await chain(1)

    assert await asyncio.create_task(plain()) == Success(3)

    async def cancelled_first() -> Result[int, str]:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()
        return await chain(1)

    with pytest.raises(asyncio.CancelledError):
        await asyncio.create_task(cancelled_first())


async def test_chain_in_cancelled_scope_runs_no_step() -> None:
    """A ``>>`` entered inside a cancelled scope runs none of its steps,
    on both backends (the fast path passes it to anyio's check)."""
    ran: list[int] = []

    @handler
    async def step(x: int) -> Result[int, str]:
        ran.append(x)
        return Success(x + 1)

    chain = step >> step
    with anyio.CancelScope() as scope:
        scope.cancel()
        await chain(0)
    assert scope.cancelled_caught
    assert ran == []


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_an_anyio_without_the_walked_attributes_keeps_its_own_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The walk reads anyio's private attributes: where they are gone (a
    later anyio), the check is anyio's own, cancelled scopes included."""
    import pipeline._concurrency as concurrency  # noqa: PLC0415

    monkeypatch.setattr(concurrency, "_states", None)
    monkeypatch.setattr(
        concurrency, "_WALKED", (("CancelScope", "_no_such_attribute"),)
    )
    assert concurrency._anyio_states() is None
    reached = False
    with anyio.CancelScope() as scope:
        scope.cancel()
        await checkpoint_if_cancelled()
        reached = True
    assert not reached
    await checkpoint_if_cancelled()  # not cancelled: goes on
    assert concurrency._states is None
