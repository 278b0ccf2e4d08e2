"""A run given no gates, observers nor event callback (and whose fold has
none) shares one empty set of hooks instead of building it again: the same
value as built, and any hook given is still there."""

from __future__ import annotations

import attrs

from pipeline import Agent, swarm
from pipeline.fold import Snapshot
from pipeline.fold._engine import Hooks
from pipeline.testing import ScriptedModel


async def nothing(_: Snapshot[object]) -> None:
    """An observer that looks and does nothing."""


def test_no_hooks_is_the_empty_hooks_value() -> None:
    """Nothing given: the empty hooks; given or the fold's own: kept."""
    team = (
        swarm.builder()
        .agent("a", Agent("a", ScriptedModel()))
        .entry("a")
        .build()
    )
    assert team._hooks((), (), None) == Hooks((), (), None)
    given = team._hooks((), (nothing,), None)
    assert tuple(given.observers) == (nothing,)
    observed = attrs.evolve(team, observers=(nothing,))
    assert tuple(observed._hooks((), (), None).observers) == (nothing,)
