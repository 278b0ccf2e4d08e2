"""Graphs over your typed state: a fold over immutable snapshots.

Build with :func:`builder`, run with :meth:`Graph.run` (or call the graph:
it is a handler), keep checkpoints in a
:class:`~pipeline.fold.CheckpointStore` (:class:`~pipeline.fold.MemoryStore`,
:class:`~pipeline.fold.SQLiteStore`), and :meth:`Graph.resume` or
``Graph.fork`` from them.  The fold values (snapshots, gates, stores)
live in :mod:`pipeline.fold` and are re-exported here.
"""

from .._state_tools import Writable as Writable
from ..events import CheckpointSaved as CheckpointSaved
from ..events import Interrupted as Interrupted
from ..events import NodeFinished as NodeFinished
from ..events import NodeStarted as NodeStarted
from ..events import Stopped as Stopped
from ..fold import CheckpointStore as CheckpointStore
from ..fold import Continue as Continue
from ..fold import Decision as Decision
from ..fold import EventSink as EventSink
from ..fold import FoldEvent as GraphEvent
from ..fold import Gate as Gate
from ..fold import Interrupt as Interrupt
from ..fold import MemoryStore as MemoryStore
from ..fold import Observer as Observer
from ..fold import Pending as Pending
from ..fold import Record as Record
from ..fold import SignedStore as SignedStore
from ..fold import Snapshot as Snapshot
from ..fold import SQLiteStore as SQLiteStore
from ..fold import Status as Status
from ..fold import Stop as Stop
from ..fold import Transition as Transition
from ._agent import agent_node as agent_node
from ._agent import state_tools as state_tools
from ._builder import Builder as Builder
from ._builder import builder as builder
from ._edges import Reducer as Reducer
from ._graph import Graph as Graph
from ._graph import GraphFailure as GraphFailure
from ._merge import merge_states as merge_states
from ._model import END as END
from ._model import Limits as Limits


__all__ = (
    "END",
    "Builder",
    "CheckpointSaved",
    "CheckpointStore",
    "Continue",
    "Decision",
    "EventSink",
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
    "SignedStore",
    "Snapshot",
    "Status",
    "Stop",
    "Stopped",
    "Transition",
    "Writable",
    "agent_node",
    "builder",
    "merge_states",
    "state_tools",
)
