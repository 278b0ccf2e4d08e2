"""Swarms: agents that hand a conversation to each other.

Build with :func:`builder`; a :class:`~pipeline.Swarm` is a handler over contexts
(``classify >> (team | fallback)``), and :meth:`~pipeline.Swarm.run` /
:meth:`~pipeline.fold.Runnable.resume` give snapshots and checkpoints exactly as graphs do:
a swarm is a fold over (active agent, full history, typed state).
"""

from typing import TYPE_CHECKING

from .._moved import FOLD_VALUES, STORES, homes, moved
from ._builder import SwarmBuilder as SwarmBuilder
from ._builder import builder as builder
from ._machine import HandoffObserver as HandoffObserver
from ._model import DEFAULT_MAX_HANDOFFS as DEFAULT_MAX_HANDOFFS
from ._model import SwarmLimits as SwarmLimits
from ._model import SwarmState as SwarmState
from ._swarm import SwarmFailure as SwarmFailure
from ._transfer import ACCEPTED as ACCEPTED


__all__ = (
    "ACCEPTED",
    "DEFAULT_MAX_HANDOFFS",
    "HandoffObserver",
    "SwarmBuilder",
    "SwarmFailure",
    "SwarmLimits",
    "SwarmState",
    "builder",
)

_MOVED = {
    "Swarm": "pipeline:Swarm",
    "Builder": "pipeline.swarm:SwarmBuilder",
    "Limits": "pipeline.swarm:SwarmLimits",
    **homes("pipeline.fold", *FOLD_VALUES),
    **homes("pipeline.stores", *STORES),
}
if not TYPE_CHECKING:  # type checkers refuse the old paths
    __getattr__ = moved(__name__, _MOVED)
