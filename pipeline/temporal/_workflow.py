"""The workflow: the fold engine's run loop, with steps as activities.

One workflow type (``pipeline.run``) runs every hosted graph and swarm.
It drives the engine's own loop (:func:`pipeline.fold.drive`: limits,
gates, observers, in that order, exactly as in process) over a machine
whose step schedules activities:

* a graph's node, or a swarm agent's turn at the conversation: one
  activity (:mod:`pipeline.temporal._activities`);
* a fan-out: one activity per branch, at most ``GraphLimits.concurrency`` at a
  time, taken in order; the branches' outputs are merged here, by the
  graph's own pure merge (:meth:`GraphMachine.fan_in`).

What runs in the workflow itself must be deterministic: the loop, the
gates (decisions over the transition they are shown) and the merge.
Observers run here too, but not while a worker replays history (they see
each snapshot once per worker that computes it).

An interrupt waits for the ``pipeline.answer`` update, which carries the
answer as the stores keep it; the current snapshot is the
``pipeline.snapshot`` query.  A run whose history passed its bound
continues as new from its latest snapshot.
"""

from __future__ import annotations

import asyncio

from collections.abc import Callable
from datetime import timedelta
from typing import Any, Final, final

from temporalio import workflow
from temporalio.exceptions import ApplicationError


with workflow.unsafe.imports_passed_through():
    import attrs

    from returns.result import Failure, Success

    from ..errors import InvalidAnswer
    from ..failures import InvalidState, RunPaused, RunStopped
    from ..fold import (
        Decision,
        Gate,
        Hooks,
        Interrupt,
        Pending,
        Snapshot,
        Status,
        Transition,
        drive,
        kept_answer,
    )
    from ._failures import Kinds
    from ._hosted import Hosted, hosting
    from ._mapped import Mapped, mapped
    from ._wire import (
        ANSWER,
        CALL,
        CALL_ACTIVITY,
        CALLS_SUFFIX,
        PROGRESS,
        SAVED,
        SNAPSHOT,
        STEP_ACTIVITY,
        WAIT,
        WORKFLOW,
        Answer,
        CallDone,
        CallTask,
        FailureDoc,
        ItemDone,
        NodeOptions,
        Progress,
        RunOptions,
        RunRequest,
        Saved,
        SnapshotDoc,
        StepDone,
        StepTask,
        Waited,
        decode,
        encode,
    )


_KINDS: Final = Kinds()
_MISSING: Any = object()


@final
class _InFlight:
    """The steps in flight, and what the folds nested in them saved."""

    __slots__ = ("calls", "progress", "states", "tasks")

    def __init__(self) -> None:
        self.tasks: set[str] = set()
        self.progress: dict[str, dict[str, list[dict[str, Any]]]] = {}
        self.states: dict[str, SnapshotDoc] = {}
        # The calls each step made, by key (None: in flight).
        self.calls: dict[str, dict[str, CallDone | None]] = {}

    def save(self, saved: Progress) -> None:
        chains = self.progress.setdefault(saved.task, {})
        chains.setdefault(saved.key, []).append(saved.doc)
        if saved.state is not None:
            self.states[saved.task] = saved.state

    def done(self, task: str) -> None:
        self.tasks.discard(task)
        self.progress.pop(task, None)
        self.states.pop(task, None)
        self.calls.pop(task, None)


@final
class _Remote:
    """The hosted machine, with its step run as activities."""

    __slots__ = (
        "flying",
        "hosted",
        "last",
        "mapped",
        "options",
        "paused",
        "sent",
        "stepped",
    )

    def __init__(
        self, hosted: Hosted, options: RunOptions, flying: _InFlight
    ) -> None:
        self.hosted = hosted
        self.options = options
        self.flying = flying
        self.mapped: dict[str, Mapped | None] = {}
        self.last: Snapshot[Any] | None = None
        self.sent: SnapshotDoc | None = None
        # The snapshot a step paused at (a fold nested in it asked).
        self.paused: Snapshot[Any] | None = None
        self.stepped: Callable[[], None] = _nothing  # a step starts

    @property
    def name(self) -> str:
        return self.hosted.name

    @property
    def fingerprint(self) -> str:
        return self.hosted.fingerprint

    @property
    def codec(self) -> Any:
        return self.hosted.codec

    def gated(self, snap: Snapshot[Any], /) -> bool:
        return bool(self.hosted.machine.gated(snap))

    def doc(self, snap: Snapshot[Any]) -> SnapshotDoc | InvalidState:
        """*snap* as sent (encoded once per snapshot)."""
        if snap is self.last and self.sent is not None:
            return self.sent
        sent = encode(self.codec, snap)
        if isinstance(sent, SnapshotDoc):
            self.last, self.sent = snap, sent
        return sent

    async def _activity(self, task: StepTask, node: str) -> StepDone:
        o = self.options.for_node(node)
        key = task.key
        self.flying.tasks.add(key)
        try:
            return await self._execute(task, node, o)
        finally:
            self.flying.done(key)

    async def _single(
        self, snap: Snapshot[Any], task: StepTask, node: str
    ) -> Any:
        """One step as one activity; a pause inside it pauses the run."""
        key = task.key
        self.flying.tasks.add(key)
        try:
            done = await self._execute(task, node, self.options.for_node(node))
            if done.paused is None:
                return self._back(snap, done)
            # As in process: the run waits at this step, with what the
            # step saved; the answer resumes the fold that asked.
            progress: dict[str, tuple[Any, ...]] = dict(snap.progress)
            for k, docs in self.flying.progress.get(key, {}).items():
                progress[k] = (*progress.get(k, ()), *docs)
            self.paused = attrs.evolve(
                snap,
                version=snap.version + 1,
                parent=snap.version,
                status=Status.INTERRUPTED,
                pending=Pending(
                    snap.node, snap.next, done.paused, payload=done.payload
                ),
                progress=progress,
            )
            return Failure(RunPaused(done.paused, path=(self.name,)))
        finally:
            self.flying.done(key)

    async def _execute(
        self, task: StepTask, node: str, o: NodeOptions
    ) -> StepDone:
        done: StepDone = await workflow.execute_activity(
            STEP_ACTIVITY,
            task,
            result_type=StepDone,
            summary=node,
            **_timing(o),
        )
        return done

    def _back(self, base: Snapshot[Any], done: StepDone) -> Any:
        """The snapshot a step grew from *base*, or its failure."""
        sent = done.snapshot
        if done.failure is not None or sent is None:
            return Failure(done.failure or FailureDoc("RemoteFailure"))
        back = self.codec.apply(base, sent.doc, sent.version, sent.parent)
        return back.unwrap() if type(back) is Success else back

    async def step(self, snap: Snapshot[Any], limits: Any, /) -> Any:
        self.stepped()
        sent = self.doc(snap)
        if isinstance(sent, InvalidState):
            return Failure(sent)
        hosted = self.hosted
        if hosted.kind == "swarm" or (
            snap.join is None and len(snap.next) == 1
        ):
            node = snap.next[0]
            task = StepTask(hosted.name, hosted.fingerprint, sent)
            if node not in self.mapped:
                self.mapped[node] = mapped(hosted, node)
            m = self.mapped[node]
            if m is not None:
                return await self._map_reduce(snap, task, m)
            return await self._single(snap, task, node)
        refused = hosted.machine.refuse_fanout(snap, limits)
        if refused is not None:
            return refused
        outs = await self._branches(snap, sent, limits.concurrency)
        if type(outs) is Failure:
            return outs
        new = hosted.machine.fan_in(snap, outs)
        if type(new) is Failure:
            return new
        checked = self.doc(new)
        if isinstance(checked, InvalidState):
            return Failure(checked)
        return new

    async def _map_reduce(
        self, snap: Snapshot[Any], task: StepTask, m: Mapped
    ) -> Any:
        """A map_reduce node: split, every item as an activity (a fixed
        pool of ``max_concurrency`` takes them in order; under
        ``fail_fast`` a failure stops new ones), then reduce."""
        node = m.node
        counted = await self._activity(attrs.evolve(task, part="split"), node)
        if counted.failure is not None:
            return Failure(counted.failure)
        items: list[ItemDone | None] = [None] * counted.count
        stop: list[FailureDoc] = []
        halt: list[int] = []  # under fail_fast: the items that failed
        todo = iter(range(counted.count))

        async def worker() -> None:
            for i in todo:
                if stop or halt:
                    return
                done = await self._activity(
                    attrs.evolve(task, part="item", index=i), node
                )
                if done.failure is not None or done.item is None:
                    stop.append(done.failure or FailureDoc("RemoteFailure"))
                    return
                items[i] = done.item
                if m.spec.fail_fast and done.item.failure is not None:
                    halt.append(i)  # the reduce step reports it
                    return

        workers = min(m.spec.max_concurrency, counted.count)
        await asyncio.gather(*(worker() for _ in range(workers)))
        if stop:
            return Failure(stop[0])
        done = await self._activity(
            attrs.evolve(task, part="reduce", items=tuple(items)), node
        )
        return self._back(snap, done)

    async def _branches(
        self, snap: Snapshot[Any], sent: SnapshotDoc, concurrency: int
    ) -> Any:
        """Every branch as an activity: a fixed pool of *concurrency*
        workers takes them in order (as in process); after a failure no
        new branch starts, and the first branch's failure wins."""
        hosted = self.hosted
        names = snap.next
        outs: list[Any] = [_MISSING] * len(names)
        failed: list[tuple[int, Any]] = []
        todo = iter(enumerate(names))

        async def worker() -> None:
            for i, name in todo:
                if failed:
                    return
                task = StepTask(hosted.name, hosted.fingerprint, sent, name)
                out = self._back(snap, await self._activity(task, name))
                if type(out) is Failure:
                    if not failed or i < failed[0][0]:
                        failed[:] = [(i, out)]
                    return
                outs[i] = out.state

        await asyncio.gather(
            *(worker() for _ in range(min(len(names), concurrency)))
        )
        if failed:
            return failed[0][1]
        return tuple(outs)


def _nothing() -> None:
    pass


def _timing(o: NodeOptions) -> dict[str, Any]:
    """An activity's timeouts and retry policy, from its options."""
    return {
        "start_to_close_timeout": timedelta(seconds=o.start_to_close),
        "heartbeat_timeout": (
            None if o.heartbeat is None else timedelta(seconds=o.heartbeat)
        ),
        "schedule_to_close_timeout": (
            None
            if o.schedule_to_close is None
            else timedelta(seconds=o.schedule_to_close)
        ),
        "retry_policy": o.retry.policy(),
    }


def _error(failure: object) -> BaseException:
    if isinstance(failure, FailureDoc):
        return _KINDS.error_for(failure)
    return _KINDS.error(failure)


@final
@workflow.defn(name=WORKFLOW)
class PipelineWorkflow:
    """Runs a hosted graph or swarm (see the module's docstring).

    .. versionadded:: 0.1.0
    """

    def __init__(self) -> None:
        self._codec: Any = None
        self._current: Snapshot[Any] | None = None
        self._answer: Answer | None = None
        self._waiting = False
        # Answers received, answers settled (taken or refused), refusals.
        self._answers = 0
        self._settled = 0
        self._refused: dict[int, str] = {}
        self._waited: Snapshot[Any] | None = None
        self._ended = False
        self._moving = False
        self._flying = _InFlight()
        self._options = RunOptions()
        # The typed Interrupt a gate paused the run with (checks answers
        # before they are taken into the run's history).
        self._asked: Interrupt[Any, Any] | None = None

    @workflow.run
    async def run(self, request: RunRequest) -> SnapshotDoc:
        """Fold the machine from the request's snapshot to its end."""
        hosted = hosting(request.machine, request.fingerprint)
        if isinstance(hosted, str):
            # Not a failure of the run: this worker hosts another version
            # (or nothing) under the name.  The task is retried, and taken
            # by a worker that hosts the run's version.
            raise RuntimeError(hosted)  # noqa: TRY004  # not a bad argument
        self._codec = hosted.codec
        self._options = request.options
        loaded = decode(hosted.codec, request.snapshot)
        if type(loaded) is not Success:
            raise _error(loaded.failure())
        snap = self._current = loaded.unwrap()
        machine = _Remote(hosted, request.options, self._flying)
        bound = request.options.history_bound

        async def after(new: Snapshot[Any]) -> None:
            self._current = new
            info = workflow.info()
            if new.next and (
                info.get_current_history_length() >= bound
                or info.is_continue_as_new_suggested()
            ):
                sent = machine.doc(new)
                if isinstance(sent, InvalidState):  # pragma: no cover
                    raise _error(sent)  # (the step's own check passed)
                self._moving = True  # waiters ask the next run
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(attrs.evolve(request, snapshot=sent))

        hooks = Hooks(
            tuple(self._watched(g) for g in hosted.hooks.gates),
            (*(_live(o) for o in hosted.hooks.observers), after),
        )
        try:
            return await self._fold(machine, hosted, hooks, snap)
        finally:
            self._ended = True

    async def _fold(
        self,
        machine: _Remote,
        hosted: Hosted,
        hooks: Hooks[Any],
        snap: Snapshot[Any],
    ) -> SnapshotDoc:
        answer = kept_answer(snap.pending)
        machine.stepped = self._settle
        while True:
            try:
                result = await drive(
                    machine,
                    snap,
                    None,
                    hosted.limits,
                    hooks,
                    None,
                    hosted.max_steps,
                    answer,
                )
            except InvalidAnswer as exc:
                if self._waited is None or self._settled == self._answers:
                    raise  # not the answer's fault: a bug in a gate
                # The gate refused the answer: wait for another one.
                self._refused[self._answers] = str(exc)
                self._settle()
                snap, answer = await self._wait(self._waited)
                continue
            self._settle()
            if type(result) is not Success:
                failure = result.failure()
                if machine.paused is not None and isinstance(
                    failure, RunPaused
                ):
                    snap, machine.paused = machine.paused, None
                    snap, answer = await self._wait(snap)
                    continue
                raise _error(failure)
            snap = result.unwrap()
            if snap.status is Status.INTERRUPTED:
                snap, answer = await self._wait(snap)
                continue
            if snap.status is Status.STOPPED:
                raise _error(RunStopped(snap.reason, path=(hosted.name,)))
            sent = machine.doc(snap)
            if isinstance(sent, InvalidState):
                raise _error(sent)
            self._current = snap
            return sent

    def _watched(self, gate: Gate[Any]) -> Gate[Any]:
        """*gate*, noting the typed :class:`Interrupt` it asks with."""

        async def watched(t: Transition[Any]) -> Decision:
            decision = await gate(t)
            if isinstance(decision, Interrupt) and decision.kind is not None:
                self._asked = decision
            return decision

        return watched

    def _settle(self) -> None:
        """The answers received so far are taken (or refused)."""
        self._settled = self._answers

    async def _wait(self, snap: Snapshot[Any]) -> tuple[Snapshot[Any], object]:
        """Show the paused snapshot; wait for the answer; the answered one."""
        self._waited = snap
        self._current = snap
        self._waiting = True
        await workflow.wait_condition(lambda: self._answer is not None)
        assert self._answer is not None  # noqa: S101  # waited for it
        stored = self._answer.value
        self._answer = None
        self._asked = None
        self._waiting = False
        assert snap.pending is not None  # noqa: S101  # paused runs have one
        answered = attrs.evolve(
            snap,
            version=snap.version + 1,
            parent=snap.version,
            status=Status.RUNNING,
            pending=attrs.evolve(snap.pending, answer=stored, answered=True),
        )
        self._current = answered
        return answered, kept_answer(answered.pending)  # None too is an answer

    @workflow.query(name=SNAPSHOT)
    def snapshot(self) -> SnapshotDoc:
        """The run's latest snapshot, as the codec writes it."""
        if self._current is None:
            msg = "the run has not started"
            raise RuntimeError(msg)
        sent = encode(self._codec, self._current)
        if isinstance(sent, InvalidState):
            raise RuntimeError(str(sent))  # noqa: TRY004  # not a bad argument
        return sent

    @workflow.update(name=WAIT)
    async def wait(self) -> Waited:
        """Wait until the run waits for an answer (or ends); its snapshot
        then (``None``: the run continues as new, ask that one)."""
        await workflow.wait_condition(
            lambda: self._waiting or self._ended or self._moving
        )
        if self._moving and not self._waiting:
            return Waited()
        return Waited(self.snapshot())

    @workflow.update(name=PROGRESS)
    def progress(self, saved: Progress) -> None:
        """Keep one record of a fold nested in a step in flight."""
        self._flying.save(saved)

    @progress.validator
    def _owns_step(self, saved: Progress) -> None:
        if saved.task not in self._flying.tasks:
            msg = "that step is not in flight"
            raise ValueError(msg)

    @workflow.update(
        name=CALL, unfinished_policy=workflow.HandlerUnfinishedPolicy.ABANDON
    )
    async def call(self, task: CallTask) -> CallDone:
        """Make one call an agent of a step in flight asked for, as the
        call activity; a call made before under its key is not made
        again (its answer is given, once it has one)."""
        calls = self._flying.calls.setdefault(task.task, {})
        key = task.key
        if key in calls:  # asked by an earlier attempt of the step
            await workflow.wait_condition(
                lambda: calls.get(key, True) is not None
            )
            done = calls.get(key)
            if done is not None:
                return done
        calls[key] = None
        try:
            made: CallDone = await workflow.execute_activity(
                CALL_ACTIVITY,
                task,
                result_type=CallDone,
                task_queue=workflow.info().task_queue + CALLS_SUFFIX,
                summary=f"{task.agent.partition('@')[0]}: {task.tool or 'model'}",
                **_timing(self._options.for_call(task)),
            )
        except BaseException:
            calls.pop(key, None)  # not made: an attempt may ask again
            raise
        calls[key] = made
        return made

    @call.validator
    def _owns_call(self, task: CallTask) -> None:
        if task.task not in self._flying.tasks:
            msg = "that step is not in flight"
            raise ValueError(msg)

    @workflow.query(name=SAVED)
    def saved(self, task: str) -> Saved:
        """What the folds nested in step *task* saved so far."""
        return Saved(
            dict(self._flying.progress.get(task, {})),
            self._flying.states.get(task),
        )

    @workflow.update(name=ANSWER)
    async def answer(self, answer: Answer) -> None:
        """Answer the interrupt the run waits at; once the run took it
        (or its gate refused it: the run waits again)."""
        self._answers += 1
        n = self._answers
        self._answer = answer
        await workflow.wait_condition(lambda: self._settled >= n)
        refused = self._refused.pop(n, None)
        if refused is not None:
            raise ApplicationError(
                refused, type="InvalidAnswer", non_retryable=True
            )

    @answer.validator
    def _can_answer(self, answer: Answer) -> None:
        if not self._waiting or self._answer is not None:
            msg = "the run is not waiting for an answer"
            raise ValueError(msg)
        asked, waited = self._asked, self._waited
        pending = None if waited is None else waited.pending
        if (
            asked is not None
            and pending is not None
            and waited is not None
            and not waited.progress
            and asked.question == pending.question
        ):
            # Checked before the update is accepted: a refused answer
            # never enters the run's history.
            try:
                asked.structure(self._codec.converter, answer.value)
            except InvalidAnswer as exc:
                raise ApplicationError(
                    str(exc), type="InvalidAnswer", non_retryable=True
                ) from None


def _live(observe: Any) -> Any:
    """*observe*, skipped while history is replayed."""

    async def live(snap: Snapshot[Any]) -> None:
        if not workflow.unsafe.is_replaying():
            await observe(snap)

    return live
