"""The step activity: one step of a hosted machine, on a worker.

The workflow decides *what* runs next (the fold); this activity runs it:
a graph's node (with its edge, which decides where to go next), one
branch of a fan-out, or an agent's turn at a swarm's conversation.  It
is the machine's own step, exactly as a run in process calls it, on a
snapshot rebuilt from the codec's document; the next snapshot goes back
checked as a commit is.  A ``Failure`` is a value (never retried); an
exception is retried by Temporal under the node's retry policy.

While the step runs the activity heartbeats, so a worker that dies is
noticed within the node's heartbeat timeout and the step retried on
another worker.
"""

from __future__ import annotations

import asyncio

from typing import Any, final

import attrs

from returns.result import Failure, Success
from temporalio import activity
from temporalio.exceptions import ApplicationError

from ..errors import InvalidState
from ._failures import Kinds
from ._hosted import Hosted, hosting
from ._wire import STEP_ACTIVITY, StepDone, StepTask, decode, encode_delta


async def _beat(interval: float) -> None:
    while True:
        await asyncio.sleep(interval)
        activity.heartbeat()


@final
class StepActivity:
    """The step activity of one worker (*kinds*: the failure types it
    sends by name)."""

    __slots__ = ("kinds",)

    def __init__(self, kinds: Kinds) -> None:
        self.kinds = kinds

    @activity.defn(name=STEP_ACTIVITY)
    async def step(self, task: StepTask) -> StepDone:
        """Run the step *task* names; its next snapshot or its failure."""
        hosted = hosting(task.machine, task.fingerprint)
        if isinstance(hosted, str):
            # Another version of the machine (or none) is hosted here: let
            # a worker that hosts this one take the retry.
            raise ApplicationError(hosted, type="pipeline.NotHosted")
        timeout = activity.info().heartbeat_timeout
        beat = (
            asyncio.create_task(_beat(timeout.total_seconds() / 3))
            if timeout
            else None
        )
        try:
            return await self._run(hosted, task)
        finally:
            if beat is not None:
                beat.cancel()

    async def _run(self, hosted: Hosted, task: StepTask) -> StepDone:
        loaded = decode(hosted.codec, task.snapshot)
        if type(loaded) is not Success:
            return StepDone(failure=self.kinds.encode(loaded.failure()))
        snap = loaded.unwrap()
        out: Any
        if task.branch is None:
            out = await hosted.machine.step(snap, hosted.limits)
        else:
            out = await hosted.machine.branch(snap, task.branch)
            if type(out) is not Failure:
                out = attrs.evolve(snap, state=out, node=task.branch)
        if type(out) is Failure:
            return StepDone(failure=self.kinds.encode(out.failure()))
        sent = encode_delta(hosted.codec, out, snap)
        if isinstance(sent, InvalidState):
            return StepDone(failure=self.kinds.encode(sent))
        return StepDone(snapshot=sent)
