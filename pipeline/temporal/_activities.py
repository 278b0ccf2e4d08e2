"""The step activity: one step of a hosted machine, on a worker.

The workflow decides *what* runs next (the fold); this activity runs it:
a graph's node (with its edge, which decides where to go next), one
branch of a fan-out, or an agent's turn at a swarm's conversation.  It
is the machine's own step, exactly as a run in process calls it, on a
snapshot rebuilt from the codec's document; the next snapshot goes back
checked as a commit is.  A ``Failure`` is a value (never retried); an
exception is retried by Temporal under the node's retry policy.

Folds nested in the step (an agent's turns inside a node, the agent's
turns of a swarm step) save each record through the fold engine's
boundary, as inside a checkpointed run; here a record is an update to
the run's workflow, in its history before the nested fold goes on.  An
attempt that takes a step over (after a crash) asks the workflow what
was saved and continues from there: a turn whose record was saved, and
the tool calls in it, never run again.

An agent's model calls and its own tools' calls are not made in the
step: each is an update to the workflow, which makes it as the call
activity (:mod:`pipeline.temporal._calls`), retried under its own policy.

While the step (or a call) runs the activity heartbeats, so a worker that
dies is noticed within the heartbeat timeout and the work retried on
another worker.
"""

from __future__ import annotations

import asyncio
import contextlib

from collections.abc import Iterator
from typing import Any, final

import attrs

from returns.result import Failure, Success
from temporalio import activity
from temporalio.client import WorkflowHandle
from temporalio.exceptions import ApplicationError

from .._offload import offloading, reset
from .._serde import canonical
from ..errors import InvalidAnswer, Suspended
from ..failures import InvalidState, RunPaused
from ..fold import Boundary, Journal, Snapshot, enter, leave, suspension
from . import _mapped
from ._calls import Agents, StepCalls, make_call
from ._failures import Kinds
from ._hosted import Hosted, hosting
from ._mapped import mapped
from ._wire import (
    CALL_ACTIVITY,
    MAX_PAYLOAD,
    PROGRESS,
    SAVED,
    STEP_ACTIVITY,
    CallDone,
    CallTask,
    Progress,
    Saved,
    StepDone,
    StepTask,
    decode,
    encode_delta,
    too_big,
)


async def _beat(interval: float) -> None:
    while True:
        await asyncio.sleep(interval)
        activity.heartbeat()


@final
class _ToWorkflow(Journal[Any]):
    """The journal of a step in flight: nested records go to the workflow."""

    __slots__ = ("base", "handle", "task")

    def __init__(
        self,
        hosted: Hosted,
        base: Snapshot[Any],
        task: str,
        handle: WorkflowHandle[Any, Any],
    ) -> None:
        super().__init__(hosted.codec, base.thread_id, base, base.version)
        self.base = base
        self.task = task
        self.handle = handle

    async def write(
        self, snap: Snapshot[Any], doc: Any, data: bytes
    ) -> Failure[Any] | None:
        """Never called: the step's own snapshot is the activity's answer."""
        del snap, doc, data
        msg = "a step's own record is its activity's result"
        raise AssertionError(msg)

    async def save_progress(
        self, boundary: Boundary, key: str, doc: Any, author: str = ""
    ) -> Failure[Any] | None:
        """Send one nested record to the workflow; return once it is in
        the run's history (*author*: the workflow's answer record names
        who answered already).

        Raises:
            ApplicationError: the workflow refused it (this attempt no
                longer owns the step) or could not be reached; the attempt
                fails and Temporal retries it.
        """
        del author
        state = None
        if boundary.track is not None:
            tracked = attrs.evolve(self.base, state=boundary.track())
            sent = encode_delta(self.codec, tracked, self.base)
            if isinstance(sent, InvalidState):
                return Failure(sent)
            state = sent
        size = len(canonical(doc))
        if state is not None:
            size += len(canonical(state.doc))
        if size > MAX_PAYLOAD:
            return Failure(too_big(self.task, size))
        try:
            await self.handle.execute_update(
                PROGRESS, Progress(self.task, key, doc, state)
            )
        except Exception as exc:  # the SDK's RPC and update errors
            msg = f"progress of step {self.task} not saved ({type(exc).__name__})"
            raise ApplicationError(msg, type="pipeline.ProgressLost") from exc
        return None


@contextlib.contextmanager
def _heartbeating() -> Iterator[None]:
    """Heartbeat in the background (if the activity has a heartbeat
    timeout) while the block runs."""
    timeout = activity.info().heartbeat_timeout
    if not timeout:
        yield
        return
    beat = asyncio.create_task(_beat(timeout.total_seconds() / 3))
    try:
        yield
    finally:
        beat.cancel()


def _here(machine: str, fingerprint: str) -> Hosted:
    """The machine hosted here under that name and fingerprint.

    Raises:
        ApplicationError: another version of the machine (or none) is
            hosted here: a worker that hosts this one takes the retry.
    """
    hosted = hosting(machine, fingerprint)
    if isinstance(hosted, str):
        raise ApplicationError(hosted, type="pipeline.NotHosted")
    return hosted


def _resumed(
    base: Snapshot[Any], saved: Saved
) -> tuple[dict[str, tuple[Any, ...]], object]:
    """The progress a step starts from (what it saved before it paused,
    carried by a resumed snapshot, then what earlier attempts of this task
    saved) and the answer for the nested fold that paused, if any."""
    progress: dict[str, tuple[Any, ...]] = dict(base.progress)
    for k, docs in saved.progress.items():
        progress[k] = (*progress.get(k, ()), *docs)
    pending = base.pending
    answered = base.progress and pending is not None and pending.answered
    return progress, (pending.answer if answered and pending else None)


@final
class StepActivity:
    """The step and call activities of one worker (*kinds*: the failure
    types it sends by name; *agents*: the agents its calls find)."""

    __slots__ = ("agents", "kinds")

    def __init__(self, kinds: Kinds, agents: Agents) -> None:
        self.kinds = kinds
        self.agents = agents

    @activity.defn(name=CALL_ACTIVITY)
    async def call(self, task: CallTask) -> CallDone:
        """Make the model call or tool call *task* names."""
        _here(task.machine, task.fingerprint)
        with _heartbeating():
            return await make_call(self.agents, task, self.kinds)

    @activity.defn(name=STEP_ACTIVITY)
    async def step(self, task: StepTask) -> StepDone:
        """Run the step *task* names; its next snapshot or its failure."""
        hosted = _here(task.machine, task.fingerprint)
        with _heartbeating():
            return await self._run(hosted, task)

    async def _run(self, hosted: Hosted, task: StepTask) -> StepDone:
        loaded = decode(hosted.codec, task.snapshot)
        if type(loaded) is not Success:
            return StepDone(failure=self.kinds.encode(loaded.failure()))
        base = loaded.unwrap()
        info = activity.info()
        assert info.workflow_id is not None  # noqa: S101  # a workflow's
        handle = activity.client().get_workflow_handle(
            info.workflow_id, run_id=info.workflow_run_id
        )
        key = task.key
        saved = Saved()
        if info.attempt > 1:
            # Taking the step over: continue what earlier attempts saved.
            saved = await handle.query(SAVED, key, result_type=Saved)
        snap = base
        if saved.state is not None:
            tracked = hosted.codec.apply(
                base, saved.state.doc, base.version, base.parent
            )
            if type(tracked) is not Success:
                return StepDone(failure=self.kinds.encode(tracked.failure()))
            snap = tracked.unwrap()
        journal = _ToWorkflow(hosted, base, key, handle)
        progress, answer = _resumed(base, saved)
        calls = StepCalls(
            self.agents,
            handle,
            key,
            (hosted.name, hosted.fingerprint),
            self.kinds,
        )
        boundary = Boundary(journal, progress, answer)
        token = enter(boundary)
        offload = offloading(calls)
        try:
            out = await self._step(hosted, task, snap)
        except InvalidAnswer:
            # A nested gate refused the answer it was given: ask again.
            if base.pending is None:
                raise
            return StepDone(
                paused=base.pending.question, payload=base.pending.payload
            )
        except (Suspended, BaseExceptionGroup) as raised:
            # pipeline.interrupt() in the step: its question was saved to
            # the workflow; the run pauses at it.
            return self._asked(task, boundary, raised)
        finally:
            reset(offload)
            leave(token)
        if isinstance(out, StepDone):
            return out
        if type(out) is Failure:
            failure = out.failure()
            if (
                boundary.paused is not None
                and isinstance(failure, RunPaused)
                and task.branch is None
                and not task.part
            ):
                return StepDone(
                    paused=boundary.paused, payload=boundary.payload
                )
            return StepDone(failure=self.kinds.encode(failure))
        sent = encode_delta(hosted.codec, out, base)
        if isinstance(sent, InvalidState):
            return StepDone(failure=self.kinds.encode(sent))
        return StepDone(snapshot=sent)

    def _asked(
        self,
        task: StepTask,
        boundary: Boundary,
        raised: Suspended | BaseExceptionGroup[Any],
    ) -> StepDone:
        """The step paused at a question of its own (or could not record
        it: the store's refusal is the step's failure).  A group holding
        anything else is raised again, as it was."""
        asked = suspension(raised)
        if asked is None:
            raise raised
        if isinstance(asked.failure, Failure):
            return StepDone(failure=self.kinds.encode(asked.failure.failure()))
        question = boundary.paused or ""
        if task.branch is None and not task.part:
            return StepDone(paused=question, payload=boundary.payload)
        where = task.branch or task.part
        return StepDone(
            failure=self.kinds.encode(RunPaused(question, path=(where,)))
        )

    async def _step(
        self, hosted: Hosted, task: StepTask, snap: Snapshot[Any]
    ) -> Any:
        """The machine's step (or the part of it *task* names)."""
        if task.part:
            return await self._part(hosted, task, snap)
        if task.branch is None:
            return await hosted.machine.step(snap, hosted.limits)
        out = await hosted.machine.branch(snap, task.branch)
        if type(out) is Failure:
            return out
        return attrs.evolve(snap, state=out, node=task.branch)

    async def _part(
        self, hosted: Hosted, task: StepTask, snap: Snapshot[Any]
    ) -> Any:
        """One part of a map_reduce node: a finished answer (split, item),
        or the node's next snapshot or failure (reduce)."""
        m = mapped(hosted, snap.next[0])
        if m is None:
            msg = f"node {snap.next[0]!r} is not a distributed map_reduce"
            raise ApplicationError(msg, type="pipeline.NotHosted")
        if task.part == "split":
            return await _mapped.split(m, snap.state, self.kinds)
        if task.part == "item":
            return await _mapped.item(
                m, snap.state, task.index, hosted, self.kinds
            )
        state = await _mapped.reduce(
            m, snap.state, task.items, hosted, self.kinds
        )
        if type(state) is Failure:
            return state
        return hosted.machine.after(snap, m.node, state)
