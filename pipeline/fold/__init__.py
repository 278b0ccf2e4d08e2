"""The fold engine that graphs, swarms and agents share.

Every machine is a transition ``step(snapshot) -> snapshot`` folded until a
snapshot has nowhere left to go; this package runs that fold once for all
of them: limits, gates, observers, events, checkpoint records, resume,
fork, history, and folds nested inside the step of another.

The values users meet with graphs and swarms (snapshots, statuses, gates
and their decisions, observers) live here and only here; checkpoint stores
live in :mod:`pipeline.stores`.
"""

from typing import TYPE_CHECKING

from .._moved import moved
from .._serde import make_converter as make_converter
from ._ambient import Ambient as Ambient
from ._ambient import ambient as ambient
from ._codec import Codec as Codec
from ._codec import check_document as check_document
from ._engine import EventSink as EventSink
from ._engine import Hooks as Hooks
from ._engine import Machine as Machine
from ._engine import Migration as Migration
from ._engine import checked_author as checked_author
from ._engine import drive as drive
from ._engine import run_machine as run_machine
from ._engine import stored_answer as stored_answer
from ._fingerprint import fingerprint as fingerprint
from ._fingerprint import same_shape as same_shape
from ._interrupt import Answered as Answered
from ._interrupt import checked_interrupt as checked_interrupt
from ._interrupt import interrupt as interrupt  # pipeline.interrupt
from ._interrupt import suspension as suspension
from ._journal import Boundary as Boundary
from ._journal import Cell as Cell
from ._journal import Journal as Journal
from ._journal import branch_key as branch_key
from ._journal import current_boundary as current_boundary
from ._journal import enter as enter
from ._journal import known_fresh as known_fresh
from ._journal import leave as leave
from ._model import Continue as Continue
from ._model import Decision as Decision
from ._model import Edit as Edit
from ._model import Gate as Gate
from ._model import Interrupt as Interrupt
from ._model import Observer as Observer
from ._model import Pending as Pending
from ._model import Progress as Progress
from ._model import Snapshot as Snapshot
from ._model import Status as Status
from ._model import Stop as Stop
from ._model import Transition as Transition
from ._model import kept_answer as kept_answer
from ._runnable import Building as Building
from ._runnable import FoldFailure as FoldFailure
from ._runnable import MachineBase as MachineBase
from ._runnable import Runnable as Runnable
from ._runnable import handler_call as handler_call
from ._runnable import new_thread as new_thread
from ._runnable import state_node as state_node


__all__ = (
    "Ambient",
    "Answered",
    "Boundary",
    "Building",
    "Cell",
    "Codec",
    "Continue",
    "Decision",
    "Edit",
    "EventSink",
    "FoldFailure",
    "Gate",
    "Hooks",
    "Interrupt",
    "Journal",
    "Machine",
    "MachineBase",
    "Migration",
    "Observer",
    "Pending",
    "Progress",
    "Runnable",
    "Snapshot",
    "Status",
    "Stop",
    "Transition",
    "ambient",
    "branch_key",
    "check_document",
    "checked_author",
    "checked_interrupt",
    "current_boundary",
    "drive",
    "enter",
    "fingerprint",
    "handler_call",
    "kept_answer",
    "known_fresh",
    "leave",
    "make_converter",
    "new_thread",
    "run_machine",
    "same_shape",
    "state_node",
    "stored_answer",
    "suspension",
)


_MOVED = {
    "CheckpointStore": "pipeline.stores:CheckpointStore",
    "DEFAULT_LEASE_TTL": "pipeline.stores:DEFAULT_LEASE_TTL",
    "Lease": "pipeline.stores:Lease",
    "MemoryStore": "pipeline.stores:MemoryStore",
    "Record": "pipeline.stores:Record",
    "SQLiteStore": "pipeline.stores:SQLiteStore",
    "SignedStore": "pipeline.stores:SignedStore",
    "FoldEvent": "pipeline.events:FoldEvent",
    "InvalidAnswer": "pipeline.errors:InvalidAnswer",
}
if not TYPE_CHECKING:  # type checkers refuse the old paths
    __getattr__ = moved(__name__, _MOVED)
