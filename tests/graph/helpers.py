"""Shared graph fixtures: a small attrs state and node factories."""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Sequence

import attrs

from pyrsistent import PVector, pvector
from returns.result import Failure, Result, Success

from pipeline import Handler, graph, handler
from pipeline.errors import ConcurrentModification


@attrs.frozen
class Counted:
    """A typed graph state: a counter and an append-only trail."""

    count: int = 0
    trail: PVector[str] = attrs.field(factory=pvector)
    note: str = ""


class Runs:
    """Counts node executions, keyed by (node, count at entry)."""

    def __init__(self) -> None:
        self.calls: Counter[tuple[str, int]] = Counter()

    def total(self) -> int:
        """All executions."""
        return sum(self.calls.values())


Hook = Callable[[str, "Counted"], Awaitable[None]]
"""Called as a node starts (after it is counted): tests crash or block there."""


def step(
    name: str, runs: Runs | None = None, hook: Hook | None = None
) -> Handler[Counted, Counted, str]:
    """A node adding one to the counter and its name to the trail."""

    @handler(name=name)
    async def run(s: Counted) -> Result[Counted, str]:
        if runs is not None:
            runs.calls[name, s.count] += 1
        if hook is not None:
            await hook(name, s)
        return Success(
            attrs.evolve(s, count=s.count + 1, trail=s.trail.append(name))
        )

    return run


def failing(name: str, message: str) -> Handler[Counted, Counted, str]:
    """A node that fails with *message*."""

    @handler(name=name)
    async def run(s: Counted) -> Result[Counted, str]:
        return Failure(message)

    return run


class DelegatingStore:
    """A CheckpointStore passing everything to *inner*; tests override
    ``commit`` to inject faults."""

    def __init__(self, inner: graph.MemoryStore) -> None:
        self.inner = inner

    async def commit(
        self, record: graph.Record, *, expected_head: int | None
    ) -> Result[None, ConcurrentModification]:
        return await self.inner.commit(record, expected_head=expected_head)

    async def records(
        self, thread_id: str, *, upto: int | None = None
    ) -> Sequence[graph.Record]:
        return await self.inner.records(thread_id, upto=upto)

    async def head(self, thread_id: str) -> int | None:
        return await self.inner.head(thread_id)

    async def threads(self) -> Sequence[str]:
        return await self.inner.threads()

    async def delete(self, thread_id: str) -> None:
        await self.inner.delete(thread_id)
