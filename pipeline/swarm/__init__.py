"""Swarms: agents that hand a conversation to each other.

Build with :func:`builder`; a :class:`Swarm` is a handler over contexts
(``classify >> (team | fallback)``), and :meth:`Swarm.run` /
:meth:`Swarm.resume` give snapshots and checkpoints exactly as graphs do:
a swarm is a fold over (active agent, full history, typed state).
"""

from ..fold import CheckpointStore as CheckpointStore
from ..fold import Continue as Continue
from ..fold import Decision as Decision
from ..fold import Gate as Gate
from ..fold import Interrupt as Interrupt
from ..fold import MemoryStore as MemoryStore
from ..fold import Observer as Observer
from ..fold import SignedStore as SignedStore
from ..fold import Snapshot as Snapshot
from ..fold import SQLiteStore as SQLiteStore
from ..fold import Status as Status
from ..fold import Stop as Stop
from ..fold import Transition as Transition
from ._builder import Builder as Builder
from ._builder import builder as builder
from ._machine import HandoffObserver as HandoffObserver
from ._model import DEFAULT_MAX_HANDOFFS as DEFAULT_MAX_HANDOFFS
from ._model import Limits as Limits
from ._model import SwarmState as SwarmState
from ._swarm import Swarm as Swarm
from ._swarm import SwarmFailure as SwarmFailure
from ._transfer import ACCEPTED as ACCEPTED


__all__ = (
    "ACCEPTED",
    "DEFAULT_MAX_HANDOFFS",
    "Builder",
    "CheckpointStore",
    "Continue",
    "Decision",
    "Gate",
    "HandoffObserver",
    "Interrupt",
    "Limits",
    "MemoryStore",
    "Observer",
    "SQLiteStore",
    "SignedStore",
    "Snapshot",
    "Status",
    "Stop",
    "Swarm",
    "SwarmFailure",
    "SwarmState",
    "Transition",
    "builder",
)
