"""A gate asked only before chosen nodes (and drawn there)."""

from __future__ import annotations

from typing import Generic, TypeVar, final

import attrs

from ..fold import Continue, Decision, Gate, Transition


S = TypeVar("S")


@final
@attrs.frozen
class Before(Generic[S]):
    """*gate*, asked only for transitions into one of *nodes*; any other
    transition continues.  Made by ``GraphBuilder.gate(..., before=...)``;
    drawings show it in front of those nodes."""

    gate: Gate[S]
    nodes: tuple[str, ...]

    @property
    def name(self) -> str:
        """The gate's function name (``gate`` when it has none)."""
        return str(getattr(self.gate, "__name__", "gate"))

    async def __call__(self, t: Transition[S]) -> Decision:
        if not any(n in self.nodes for n in t.targets):
            return Continue()
        return await self.gate(t)
