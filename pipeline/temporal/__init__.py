"""Graphs and swarms as Temporal workflows (extra ``typed-pipeline[temporal]``).

The same :class:`~pipeline.Graph` or :class:`~pipeline.Swarm`
value that runs in process runs on a Temporal cluster, unchanged: a
worker (:func:`worker`) hosts it; :class:`Runs` starts it and gives a typed
:class:`Run` (answer an interrupt, read the snapshot, await the result,
cancel).  The workflow drives the fold engine's own loop; every node,
fan-out branch and swarm agent's turn at the conversation is an activity,
and so is every model call and tool call of the agents inside them, each
with its own timeouts and retries (:class:`NodeOptions`).  Values cross
as JSON through the checkpoint stores' cattrs converter
(``DATA_CONVERTER``); there is no pickle.

See ``docs/temporal.md``.
"""

from .._extras import require


require(__name__, "the Temporal SDK", "temporal", ("temporalio",))

from typing import TYPE_CHECKING

from .._moved import moved
from ._client import Run as Run
from ._client import Runs as Runs
from ._client import connect as connect
from ._converter import DATA_CONVERTER as DATA_CONVERTER
from ._converter import (
    CattrsJSONPayloadConverter as CattrsJSONPayloadConverter,
)
from ._converter import PipelinePayloadConverter as PipelinePayloadConverter
from ._devserver import dev_server as dev_server
from ._devserver import dev_server_path as dev_server_path
from ._hosted import Hostable as Hostable
from ._wire import DEFAULT_HISTORY_BOUND as DEFAULT_HISTORY_BOUND
from ._wire import MAX_PAYLOAD as MAX_PAYLOAD
from ._wire import ActivityRetry as ActivityRetry
from ._wire import NodeOptions as NodeOptions
from ._wire import RunOptions as RunOptions
from ._worker import DEFAULT_TASK_QUEUE as DEFAULT_TASK_QUEUE
from ._worker import PipelineWorker as PipelineWorker
from ._worker import build_id as build_id
from ._worker import calls_queue as calls_queue
from ._worker import replayer as replayer
from ._worker import worker as worker
from ._workflow import PipelineWorkflow as PipelineWorkflow


__all__ = (
    "DATA_CONVERTER",
    "DEFAULT_HISTORY_BOUND",
    "DEFAULT_TASK_QUEUE",
    "MAX_PAYLOAD",
    "ActivityRetry",
    "CattrsJSONPayloadConverter",
    "Hostable",
    "NodeOptions",
    "PipelinePayloadConverter",
    "PipelineWorker",
    "PipelineWorkflow",
    "Run",
    "RunOptions",
    "Runs",
    "build_id",
    "calls_queue",
    "connect",
    "dev_server",
    "dev_server_path",
    "replayer",
    "worker",
)

_MOVED: dict[str, str] = {
    "RemoteFailure": "pipeline.failures:RemoteFailure",
    "Retry": "pipeline.temporal:ActivityRetry",
}

if not TYPE_CHECKING:  # type checkers refuse the old paths
    __getattr__ = moved(__name__, _MOVED)
