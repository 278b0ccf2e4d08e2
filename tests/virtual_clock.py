"""A virtual clock for tests, on asyncio and trio alike.

Tasks ``await clock.sleep(t)``; :meth:`VirtualClock.drive` runs a workload
and, whenever every task is blocked, jumps time to the next wake-up.  No
wall-clock time passes, and tasks due at the same virtual instant wake in the
same scheduling round.

"Every task is blocked" is exact on trio (``wait_all_tasks_blocked``).  On
asyncio, anyio's version polls with real 0.1 s sleeps, so the driver instead
waits for quiescence: a run of event-loop iterations in which nothing touched
the clock.
"""

from __future__ import annotations

import heapq

from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio
import sniffio

from anyio import wait_all_tasks_blocked


T = TypeVar("T")
_QUIET_ROUNDS = 25  # idle loop iterations that count as "all blocked"


class Deadlock(Exception):  # a test harness signal
    """Every task is blocked and nobody is sleeping on the clock."""


class VirtualClock:
    """Virtual time: sleeps end when the driver says so, instantly."""

    def __init__(self) -> None:
        self.now = 0.0
        self._due: list[tuple[float, int, anyio.Event]] = []
        self._seq = 0
        self._activity = 0

    def touch(self) -> None:
        """Note progress that the driver must not run ahead of."""
        self._activity += 1

    async def _settle(self) -> None:
        if sniffio.current_async_library() == "trio":
            await wait_all_tasks_blocked()
            return
        quiet = 0
        while quiet < _QUIET_ROUNDS:
            seen = self._activity
            await anyio.lowlevel.checkpoint()
            quiet = quiet + 1 if self._activity == seen else 0

    async def sleep(self, delay: float) -> None:
        """Sleep *delay* virtual seconds (cancellable like any wait)."""
        wake = anyio.Event()
        heapq.heappush(self._due, (self.now + delay, self._seq, wake))
        self._seq += 1
        self._activity += 1
        try:
            await wake.wait()
        finally:
            self._activity += 1

    async def drive(self, work: Callable[[], Awaitable[T]]) -> T:
        """Run *work*, advancing virtual time whenever all tasks block."""
        out: list[T] = []
        done = anyio.Event()
        try:
            async with anyio.create_task_group() as tg:

                async def run() -> None:
                    try:
                        out.append(await work())
                    finally:
                        done.set()

                tg.start_soon(run)
                while not done.is_set():
                    await self._settle()
                    if done.is_set():
                        break
                    if not self._due:
                        raise Deadlock
                    instant = self._due[0][0]
                    self.now = instant
                    while self._due and self._due[0][0] == instant:
                        heapq.heappop(self._due)[2].set()
        except BaseExceptionGroup as group:
            if len(group.exceptions) == 1:  # what *work* raised, as itself
                raise group.exceptions[0] from None
            raise
        return out[0]
