"""Running a target under the CLI: events to a reporter, Ctrl-C to cancel.

Ctrl-C (SIGINT) cancels the run's scope: the node in flight is abandoned,
its lease is given up, and every record committed so far stays, so
``pipeline resume`` continues from the last one.
"""

from __future__ import annotations

import signal

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio

from anyio.abc import TaskStatus
from returns.result import Result

from .._concurrency import collapse


if TYPE_CHECKING:
    from ._events import Reporter


Work = Callable[[], Awaitable[Result[Any, Any]]]


async def execute(
    work: Work, reporter: Reporter, *, name: str = "run"
) -> Result[Any, Any] | None:
    """Run *work* streaming its events to *reporter*; ``None`` if the user
    cancelled it (Ctrl-C).  The run is a scope called *name*, opened after
    the target is loaded: a tracer provider its module set globally
    (``logfire.configure()``) traces it, as ``--trace`` does."""
    from ..runs import current, scope  # noqa: PLC0415

    found = current()
    if found is not None and found.tracing is not None:
        return await _execute(work, reporter)
    with scope(name=name):
        return await _execute(work, reporter)


async def _execute(work: Work, reporter: Reporter) -> Result[Any, Any] | None:
    from .. import handler, stream  # noqa: PLC0415
    from ..events import Finished  # noqa: PLC0415

    @handler(name="cli")
    async def job(_: None) -> Result[Any, Any]:
        return await work()

    cancelled = False
    result: Result[Any, Any] | None = None
    try:
        async with anyio.create_task_group() as group:

            async def watch(*, task_status: TaskStatus[None]) -> None:
                nonlocal cancelled
                with anyio.open_signal_receiver(signal.SIGINT) as signals:
                    task_status.started()
                    async for _ in signals:
                        cancelled = True
                        group.cancel_scope.cancel()
                        return

            await group.start(watch)
            async with stream(job, None) as events:
                async for event in events:
                    if not isinstance(event, Finished):
                        await reporter.event(event)
                result = events.result
            group.cancel_scope.cancel()
    except BaseExceptionGroup as raised:
        raise collapse(raised) from None
    finally:
        reporter.close()
    if cancelled and result is None:
        return None
    return result
