"""The fold engine that graphs, swarms and agents share.

Every machine is a transition ``step(snapshot) -> snapshot`` folded until a
snapshot has nowhere left to go; this package runs that fold once for all
of them: limits, gates, observers, events, checkpoint records, resume,
fork, history, and folds nested inside the step of another.

The values users meet (snapshots, transitions, gate decisions, stores) are
re-exported by :mod:`pipeline.graph` and :mod:`pipeline.swarm` too.
"""

from .._serde import make_converter as make_converter
from ..errors import InvalidAnswer as InvalidAnswer
from ..events import FoldEvent as FoldEvent
from ._codec import Codec as Codec
from ._engine import EventSink as EventSink
from ._engine import Hooks as Hooks
from ._engine import Machine as Machine
from ._engine import Migration as Migration
from ._engine import drive as drive
from ._engine import stored_answer as stored_answer
from ._journal import Boundary as Boundary
from ._journal import Journal as Journal
from ._journal import current_boundary as current_boundary
from ._journal import enter as enter
from ._journal import leave as leave
from ._model import Continue as Continue
from ._model import Decision as Decision
from ._model import Gate as Gate
from ._model import Interrupt as Interrupt
from ._model import Observer as Observer
from ._model import Pending as Pending
from ._model import Progress as Progress
from ._model import Snapshot as Snapshot
from ._model import Status as Status
from ._model import Stop as Stop
from ._model import Transition as Transition
from ._signed import SignedStore as SignedStore
from ._sqlite import SQLiteStore as SQLiteStore
from ._store import DEFAULT_LEASE_TTL as DEFAULT_LEASE_TTL
from ._store import CheckpointStore as CheckpointStore
from ._store import Lease as Lease
from ._store import MemoryStore as MemoryStore
from ._store import Record as Record


__all__ = (
    "DEFAULT_LEASE_TTL",
    "Boundary",
    "CheckpointStore",
    "Codec",
    "Continue",
    "Decision",
    "EventSink",
    "FoldEvent",
    "Gate",
    "Hooks",
    "Interrupt",
    "InvalidAnswer",
    "Journal",
    "Lease",
    "Machine",
    "MemoryStore",
    "Migration",
    "Observer",
    "Pending",
    "Progress",
    "Record",
    "SQLiteStore",
    "SignedStore",
    "Snapshot",
    "Status",
    "Stop",
    "Transition",
    "current_boundary",
    "drive",
    "enter",
    "leave",
    "make_converter",
    "stored_answer",
)
