"""Graphs over your typed state: a fold over immutable snapshots.

Build with :func:`builder`, run the :class:`~pipeline.Graph` it gives with
:meth:`~pipeline.Graph.run` (or call it: a graph is a handler), keep its
checkpoints in a store from :mod:`pipeline.stores`, and
:meth:`~pipeline.fold.Runnable.resume` or ``fork`` from them.
The values a run meets (snapshots, gates, observers) are the fold's, in
:mod:`pipeline.fold`; this package holds what only graphs have.
"""

from typing import TYPE_CHECKING

from .._moved import FOLD_VALUES, STORES, homes, moved
from .._state_tools import Writable as Writable
from ._agent import agent_node as agent_node
from ._agent import state_tools as state_tools
from ._builder import GraphBuilder as GraphBuilder
from ._builder import builder as builder
from ._cache import CachePolicy as CachePolicy
from ._edges import Reducer as Reducer
from ._graph import GraphFailure as GraphFailure
from ._merge import merge_states as merge_states
from ._model import END as END
from ._model import GraphLimits as GraphLimits


__all__ = (
    "END",
    "CachePolicy",
    "GraphBuilder",
    "GraphFailure",
    "GraphLimits",
    "Reducer",
    "Writable",
    "agent_node",
    "builder",
    "merge_states",
    "state_tools",
)

_MOVED = {
    "Graph": "pipeline:Graph",
    "Builder": "pipeline.graph:GraphBuilder",
    "Limits": "pipeline.graph:GraphLimits",
    "GraphEvent": "pipeline.events:FoldEvent",
    **homes(
        "pipeline.events",
        "CheckpointSaved",
        "Interrupted",
        "NodeFinished",
        "NodeStarted",
        "Stopped",
    ),
    **homes("pipeline.fold", *FOLD_VALUES, "EventSink", "Pending"),
    **homes("pipeline.stores", *STORES, "Record", "CacheStore", "MemoryCache"),
}
if not TYPE_CHECKING:  # type checkers refuse the old paths
    __getattr__ = moved(__name__, _MOVED)
