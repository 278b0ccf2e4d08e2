"""Graphs over your typed state: a fold over immutable snapshots.

Build with :func:`builder`, run with :meth:`Graph.run`, keep checkpoints in a
:class:`CheckpointStore` (:class:`MemoryStore`, :class:`SQLiteStore`), and
:meth:`Graph.resume` or :meth:`Graph.fork` from them.
"""

from ._agent import agent_node as agent_node
from ._agent import state_tools as state_tools
from ._machine import Builder as Builder
from ._machine import Graph as Graph
from ._machine import GraphFailure as GraphFailure
from ._machine import Reducer as Reducer
from ._machine import builder as builder
from ._machine import merge_states as merge_states
from ._model import END as END
from ._model import CheckpointSaved as CheckpointSaved
from ._model import Continue as Continue
from ._model import Decision as Decision
from ._model import Gate as Gate
from ._model import GraphEvent as GraphEvent
from ._model import Interrupt as Interrupt
from ._model import Interrupted as Interrupted
from ._model import Limits as Limits
from ._model import NodeFinished as NodeFinished
from ._model import NodeStarted as NodeStarted
from ._model import Observer as Observer
from ._model import Pending as Pending
from ._model import Snapshot as Snapshot
from ._model import Status as Status
from ._model import Stop as Stop
from ._model import Stopped as Stopped
from ._model import Transition as Transition
from ._sqlite import SQLiteStore as SQLiteStore
from ._store import CheckpointStore as CheckpointStore
from ._store import MemoryStore as MemoryStore
from ._store import Record as Record


__all__ = (
    "END",
    "Builder",
    "CheckpointSaved",
    "CheckpointStore",
    "Continue",
    "Decision",
    "Gate",
    "Graph",
    "GraphEvent",
    "GraphFailure",
    "Interrupt",
    "Interrupted",
    "Limits",
    "MemoryStore",
    "NodeFinished",
    "NodeStarted",
    "Observer",
    "Pending",
    "Record",
    "Reducer",
    "SQLiteStore",
    "Snapshot",
    "Status",
    "Stop",
    "Stopped",
    "Transition",
    "agent_node",
    "builder",
    "merge_states",
    "state_tools",
)
