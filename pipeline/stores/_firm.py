"""A write run in its caller's own asyncio task, which asyncio's own
cancellation (``task.cancel()``: asyncio's timeouts, ``wait_for``, a task
group's) does not cut: it is held back until the write is whole, then
raised.

anyio's shield holds back anyio's cancellation only; the old way to hold
back asyncio's was a task of the write's own, whose making and turns of the
loop cost more than the rest of a PostgreSQL commit's client side.
:func:`held_back` drives the write's coroutine itself instead: what the
write waits for is not what the task waits for, so a cancellation of the
task reaches the driver, which keeps it, waits on, and raises it at the
end.  A future the write makes for itself as a :class:`Firm` one (which a
cancellation does not cancel: the task raises it once the future is done)
is waited for as it is, with no turn of the loop added.
"""

from __future__ import annotations

import asyncio
import functools

from collections.abc import Coroutine, Generator
from typing import Any, TypeVar


T = TypeVar("T")


class Firm(asyncio.Future[T]):
    """A future that a cancellation of the task waiting for it does not
    cancel: the task is told once it is done (see the module)."""

    def cancel(self, msg: Any | None = None) -> bool:
        del msg
        return False


def _relay(proxy: asyncio.Future[None], _: object) -> None:
    if not proxy.done():
        proxy.set_result(None)


def _waited(
    step: Any,
) -> Generator[Any, None, asyncio.CancelledError | None]:
    """Wait (in the task) for what the driven coroutine yielded, *step*:
    the cancellation that came meanwhile, if any."""
    cancelled: asyncio.CancelledError | None = None
    if step is None:  # a bare yield: one turn of the loop
        try:
            yield None
        except asyncio.CancelledError as e:
            cancelled = e
        return cancelled
    if isinstance(step, Firm):
        while True:
            try:
                yield step  # the task waits for it as it is
            except asyncio.CancelledError as e:
                cancelled = cancelled or e  # told once it is done
            if step.done():
                return cancelled
            step._asyncio_future_blocking = True  # noqa: SLF001  # the protocol's
    # Another's future: the task waits for a stand-in, so that cancelling
    # the task cancels the stand-in only.
    step._asyncio_future_blocking = False  # noqa: SLF001  # taken, as a task does
    while not step.done():
        proxy = step.get_loop().create_future()
        step.add_done_callback(functools.partial(_relay, proxy))
        proxy._asyncio_future_blocking = True  # noqa: SLF001  # the protocol's
        try:
            yield proxy
        except asyncio.CancelledError as e:
            cancelled = cancelled or e
    return cancelled


class held_back:  # noqa: N801  # used as a function: await held_back(...)
    """``await held_back(coro)``: *coro* run in the caller's task, its
    outcome returned or raised, then the cancellation it held back (the
    first), if any."""

    __slots__ = ("_coro",)

    def __init__(self, coro: Coroutine[Any, Any, Any]) -> None:
        self._coro = coro

    def __await__(self) -> Generator[Any, None, Any]:
        coro = self._coro
        cancelled: asyncio.CancelledError | None = None
        try:
            step = coro.send(None)
            while True:
                came = yield from _waited(step)
                cancelled = cancelled or came
                step = coro.send(None)
        except StopIteration as stop:
            if cancelled is not None:
                raise cancelled from None
            return stop.value
        except GeneratorExit:
            coro.close()
            raise
        except BaseException:
            if cancelled is not None:
                raise cancelled from None
            raise
