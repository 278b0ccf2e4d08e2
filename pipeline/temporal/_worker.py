"""The worker helper: host graphs and swarms on a task queue.

A worker polls one task queue for both the workflow (the fold, which only
decides) and the step activity (which runs nodes and agents).  Every
process hosting the same task queue must host the same machines under the
same names; with Temporal's worker versioning (*deployment*), a run stays
on workers of the build it started on (:func:`build_id`).
"""

from __future__ import annotations

import asyncio
import contextlib

from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta
from typing import Any, Final, Self, cast, final

from temporalio.client import Client
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.worker import (
    Replayer,
    Worker,
    WorkerConfig,
    WorkerDeploymentConfig,
)
from temporalio.worker.workflow_sandbox import (
    SandboxedWorkflowRunner,
    SandboxRestrictions,
)

from .._offload import known_agents
from .._serde import canonical, checksum
from ..agents import Agent
from ._activities import StepActivity
from ._calls import Agents
from ._converter import DATA_CONVERTER
from ._failures import Kinds
from ._hosted import Hostable, Hosted, host, register
from ._wire import CALLS_SUFFIX
from ._workflow import PipelineWorkflow


DEFAULT_TASK_QUEUE: Final = "pipeline"
"""The task queue workers poll and clients start runs on, unless told."""

PASSTHROUGH: Final = (
    "pipeline",
    "attrs",
    "cattrs",
    "returns",
    "pyrsistent",
    "orjson",
    "anyio",
    "sniffio",
    "typing_extensions",
    "exceptiongroup",
)
"""Modules the workflow sandbox shares with the worker instead of
re-importing per run: side-effect free at import, and the graphs the
workflow runs live in them (users' own modules are reached through the
hosted graphs, never imported by the sandbox)."""


def _hosted(
    machines: Iterable[Hostable] | Mapping[str, Hostable],
) -> list[Hosted]:
    if isinstance(machines, Mapping):
        named = cast("Mapping[str, Hostable]", machines)
        return [host(m, name) for name, m in named.items()]
    return [host(m) for m in machines]


def _runner() -> SandboxedWorkflowRunner:
    return SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules(
            *PASSTHROUGH
        )
    )


def build_id(machines: Iterable[Hostable] | Mapping[str, Hostable]) -> str:
    """A build id naming exactly these machines' shapes: the digest of every
    hosted name and fingerprint.

    A graph's fingerprint changes with its shape (nodes, edges, entry) and
    with the version its builder declares; so does this id.  Use it as the
    Temporal worker deployment's build id: runs started on one build are
    pinned to workers of that build.

    .. versionadded:: 0.1.0
    """
    hosted = _hosted(machines)
    shape = sorted([h.name, h.fingerprint] for h in hosted)
    return checksum(canonical(shape))[:16]


@final
class PipelineWorker:
    """A worker of :mod:`pipeline.temporal`: two Temporal workers of one
    process, one on the task queue (the workflow and the step activity,
    together, so Temporal can hand a step to the worker that scheduled it
    without a trip through its queue), one on its calls queue
    (:func:`calls_queue`: agents' model calls and tool calls).

    Steps wait for the calls their agents make; with their own queue and
    slots the calls always find a slot, however many steps wait, and on
    shutdown the calls worker stops last, so the steps in flight still get
    their calls made.  Run it with ``async with`` (it polls until the
    block ends) or ``await worker.run()`` (until :meth:`shutdown`).

    .. versionadded:: 0.1.0
    """

    __slots__ = ("_stack", "calls", "steps")

    def __init__(self, steps: Worker, calls: Worker) -> None:
        self.steps = steps
        self.calls = calls
        self._stack: contextlib.AsyncExitStack | None = None

    @property
    def task_queue(self) -> str:
        """The task queue runs are started on."""
        return self.steps.task_queue

    def config(self) -> WorkerConfig:
        """The step worker's Temporal configuration."""
        return self.steps.config()

    async def run(self) -> None:
        """Poll until :meth:`shutdown` (or until one of the two fails)."""
        try:
            async with asyncio.TaskGroup() as tg:
                for w in (self.calls, self.steps):
                    tg.create_task(w.run())
        except BaseExceptionGroup as group:
            raise group.exceptions[0] from None

    async def shutdown(self) -> None:
        """Stop polling; the steps in flight finish first (within the
        graceful shutdown time), then the calls."""
        for w in (self.steps, self.calls):
            await w.shutdown()

    async def __aenter__(self) -> Self:
        async with contextlib.AsyncExitStack() as stack:
            for w in (self.calls, self.steps):
                await stack.enter_async_context(w)
            self._stack = stack.pop_all()
        return self

    async def __aexit__(self, *exc: object) -> None:
        stack, self._stack = self._stack, None
        if stack is not None:
            await stack.aclose()  # the steps, then the calls


def calls_queue(task_queue: str) -> str:
    """The task queue of the calls of runs started on *task_queue*.

    .. versionadded:: 0.1.0
    """
    return f"{task_queue}{CALLS_SUFFIX}"


def worker(
    client: Client,
    machines: Sequence[Hostable] | Mapping[str, Hostable],
    *,
    task_queue: str = DEFAULT_TASK_QUEUE,
    max_concurrent_activities: int = 100,
    max_concurrent_calls: int = 100,
    max_concurrent_workflow_tasks: int = 100,
    max_cached_workflows: int = 1000,
    failures: Iterable[type[Any]] = (),
    deployment: str | None = None,
    graceful_shutdown: timedelta = timedelta(seconds=30),
) -> PipelineWorker:
    """A worker hosting *machines* (graphs and swarms) on *task_queue*.

    *machines* are registered by their names (or under the keys of a
    mapping).  *max_concurrent_activities* bounds the steps this worker
    runs at once (nodes, branches, a swarm agent's turns), across all
    runs; *max_concurrent_calls* the agents' model calls and tool calls
    (on the calls queue: see :class:`PipelineWorker`).  *failures*: your
    failure types (attrs classes) that steps return, so they travel by
    name and the client rebuilds them (others arrive as
    :class:`~pipeline.failures.RemoteFailure`).  *deployment*: turn on
    Temporal's worker versioning under this deployment name, with
    :func:`build_id` as the build id and runs pinned to their build.
    *graceful_shutdown*: how long steps in flight may finish when the
    worker stops (then they are cancelled, and retried elsewhere).

    The agents whose calls this worker makes are those that exist when it
    is made (see :mod:`pipeline.temporal`): make it after importing the
    modules that define your graphs.

    *client* must use ``DATA_CONVERTER`` (see
    :func:`~pipeline.temporal.connect`).

    Raises:
        ValueError: a name is taken in this process by another machine, or
            two failure types share a name.
        TypeError: something other than a graph or a swarm.

    .. versionadded:: 0.1.0
    """
    hosted = _hosted(machines)
    for h in hosted:
        register(h)
    activity = StepActivity(
        Kinds(failures),
        Agents(a for a in known_agents() if isinstance(a, Agent)),
    )
    versioning = None
    if deployment is not None:
        versioning = WorkerDeploymentConfig(
            version=WorkerDeploymentVersion(deployment, build_id(machines)),
            use_worker_versioning=True,
            default_versioning_behavior=VersioningBehavior.PINNED,
        )
    steps = Worker(
        client,
        task_queue=task_queue,
        workflows=[PipelineWorkflow],
        activities=[activity.step],
        max_concurrent_activities=max_concurrent_activities,
        max_concurrent_workflow_tasks=max_concurrent_workflow_tasks,
        max_cached_workflows=max_cached_workflows,
        workflow_runner=_runner(),
        deployment_config=versioning,
        graceful_shutdown_timeout=graceful_shutdown,
    )
    calls = Worker(
        client,
        task_queue=calls_queue(task_queue),
        activities=[activity.call],
        max_concurrent_activities=max_concurrent_calls,
        deployment_config=versioning,
        graceful_shutdown_timeout=graceful_shutdown,
    )
    return PipelineWorker(steps, calls)


def replayer(
    machines: Sequence[Hostable] | Mapping[str, Hostable],
) -> Replayer:
    """A Temporal replayer for runs of *machines*: replays recorded
    histories (``await replayer(...).replay_workflows(histories)``) through
    the workflow code of this version, in the same sandbox as a worker; a
    history the code would not reproduce raises
    ``temporalio.workflow.NondeterminismError``.

    Check recorded histories in CI before deploying a change to gates,
    limits or the library itself.

    .. versionadded:: 0.1.0
    """
    for h in _hosted(machines):
        register(h)
    return Replayer(
        workflows=[PipelineWorkflow],
        workflow_runner=_runner(),
        data_converter=DATA_CONVERTER,
    )
