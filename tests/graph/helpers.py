"""Shared graph fixtures: a small attrs state and node factories."""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable

import attrs

from pyrsistent import PVector, pvector
from returns.result import Failure, Result, Success

from pipeline import Handler, handler
from tests.stores import DelegatingStore as DelegatingStore


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
