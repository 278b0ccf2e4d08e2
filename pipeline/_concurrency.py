"""The concurrency kit every runner shares.

* :func:`run_all`: one task per branch, in one task group.
* :func:`run_pool`: a fixed pool of tasks working through one iterator.
* :class:`Siblings`: how a branch cancels the other branches of its group
  (and only them).
* :class:`Earliest`: the value of the earliest branch (in definition order)
  among those that reported in the same scheduling round: the failure of a
  fail-fast fan-out, the winner of a race.
* :func:`collapse`: the one exception inside nested single-member groups.
* :func:`checkpoint_if_cancelled`: raise the caller's cancellation, if it
  has one pending, before a composite runs anything.

Exceptions leave these helpers as themselves: a lone exception is never
wrapped in an :class:`ExceptionGroup`.  A branch that ends in a
cancellation that is not the group's (a *stray* one: it awaited a future
something else cancelled) makes the group raise it once every branch has
stopped, as a lone handler would: the group never returns with a branch
that did not finish.

Why each branch runs in a shielded scope of its own, which the group
cancels explicitly: on asyncio, anyio (4.16 and older) hands the cancel
requests a *branch* task received over to the task group's scope when a
branch's scope exits inside a cancelled group, and the group's scope then
"uncancels" the *host* task that many times more: a native
``Task.cancel()`` of the caller (``asyncio.timeout``, ``wait_for``) landing
then was erased, and ``a & b`` returned a value to a cancelled caller.  A
shielded branch scope that is cancelled whenever the branch must stop keeps
every such count inside the branch's own task.  See
``docs/upstream/anyio-taskgroup-cancel.md``.
"""

from __future__ import annotations

import asyncio
import sys
import weakref

from collections.abc import (
    Awaitable,
    Callable,
    Coroutine,
    Generator,
    Iterator,
    Mapping,
)
from typing import Any, Generic, TypeVar, cast, final

import anyio


T = TypeVar("T")

__all__ = (
    "Earliest",
    "Siblings",
    "checkpoint_if_cancelled",
    "collapse",
    "run_all",
    "run_pool",
)


def new_lock() -> anyio.Lock:
    """``anyio.Lock(fast_acquire=True)``, made by the running library's own
    class once one was seen: anyio looks the library up (sniffio, then
    the running task) at every lock made, about as long as making it.
    trio names itself in sniffio's thread-local while it runs; anyio runs
    nothing else that leaves it unset but asyncio."""
    name = _trio_name()
    made = _LOCKS.get(name)
    if made is not None:
        return made(fast_acquire=True)
    lock = anyio.Lock(fast_acquire=True)
    if type(lock).__module__.startswith("anyio._backends."):  # not an adapter
        _LOCKS[name] = type(lock)
    return lock


_LOCKS: dict[str | None, Callable[..., anyio.Lock]] = {}
"""The lock class of each library seen (by sniffio's thread-local name)."""


def _trio_name() -> str | None:
    """sniffio's thread-local name of the library running (trio sets it
    while it runs; ``None`` elsewhere, and without trio imported)."""
    if "trio" not in sys.modules:
        return None
    import sniffio  # noqa: PLC0415 (trio depends on it; anyio may not)

    name: str | None = sniffio.thread_local.name
    return name


def asyncio_scope() -> anyio.CancelScope:
    """``anyio.CancelScope()`` on asyncio (the caller knows it runs there),
    made by anyio's asyncio class once one was seen (see
    :func:`new_lock`)."""
    made = _SCOPES[0]
    if made is not None:
        return made()
    scope = anyio.CancelScope()
    _SCOPES[0] = type(scope)
    return scope


_SCOPES: list[Callable[[], anyio.CancelScope] | None] = [None]
"""anyio's asyncio cancel scope class, once seen."""


def checkpoint_if_cancelled() -> Awaitable[None]:
    """Raise the caller's cancellation now if it has one pending (await it).

    :func:`anyio.lowlevel.checkpoint_if_cancelled` sees cancelled anyio
    scopes (and everything on trio), but not a native asyncio
    ``Task.cancel()`` that has not been delivered yet (``asyncio.timeout``,
    ``wait_for`` or a direct ``task.cancel()`` before the call): that one
    only lands at the next real suspension, and a composite whose steps
    never suspend would run them all and return a value to a cancelled
    caller.  On asyncio a task with cancel requests counted
    (``cancelling()``) suspends once instead: that delivers a pending
    request, and anyio's own delivery of a cancelled scope, while one
    already delivered and caught (cleanup code) does not raise again.

    A plain function returning the awaitable: composites call it on every
    entry, and one coroutine frame less is most of its cost.  On asyncio,
    the usual case (nothing cancelled) walks the task's anyio scopes
    here, as anyio's check does (:func:`_in_cancelled_scope`), and
    returns an awaitable that is already done: anyio's check would first
    find the backend again (sniffio, the running loop twice), most of a
    microsecond per call.  A cancelled scope still goes through anyio's
    own check, which delivers it.
    """
    loop = _running_loop()
    if loop is not None:
        task = _current_task(loop)
        if task is not None:
            if task.cancelling():
                return asyncio.sleep(0)
            states = _states if _states is not None else _anyio_states()
            if states is not None and not _in_cancelled_scope(states, task):
                return _READY
    return _scope_checkpoint()


def _in_cancelled_scope(
    states: Mapping[weakref.ref[Any], Any], task: asyncio.Task[Any]
) -> bool:
    """Whether anyio's check would find *task* in a cancelled scope.

    The walk of ``AsyncIOBackend.checkpoint_if_cancelled`` (anyio 4):
    from the task's innermost scope outwards, up to the first shielded
    one.  ``tests/test_entry_check.py`` holds it to anyio's own answer.
    """
    state = states.get(_ref(task))
    if state is None:
        return False
    scope = state.cancel_scope
    while scope is not None:
        if scope.cancel_called:
            return True
        if scope.shield:
            return False
        scope = scope._parent_scope  # noqa: SLF001  # anyio's own walk
    return False


@final
class _Ready:
    """An awaitable that is already done: awaiting it never suspends."""

    __slots__ = ()

    def __await__(self) -> Generator[Any, None, None]:
        return _EXHAUSTED  # an exhausted iterator ends the await at once


_EXHAUSTED = cast("Generator[Any, None, None]", iter(()))
_READY = _Ready()

# Bound once: the check runs on every composite's entry.
_running_loop = asyncio._get_running_loop  # noqa: SLF001  # in asyncio.__all__; None on trio
_current_task = asyncio.current_task
_scope_checkpoint = anyio.lowlevel.checkpoint_if_cancelled
_ref = weakref.ref
_states: Mapping[weakref.ref[Any], Any] | None = None
_ANYIO_ASYNCIO = "anyio._backends._asyncio"
_WALKED = (
    ("TaskState", "cancel_scope"),
    ("CancelScope", "_parent_scope"),
    ("CancelScope", "cancel_called"),
    ("CancelScope", "shield"),
)
"""What :func:`_in_cancelled_scope` reads of anyio's asyncio backend."""


def _anyio_states() -> Mapping[weakref.ref[Any], Any] | None:
    """The task states anyio keeps on asyncio (its own check reads them),
    once anyio has loaded its asyncio backend (``None`` before: anyio's
    check loads it; importing it here would slow ``import pipeline``).

    The dictionary under anyio's ``WeakKeyDictionary``: its ``get()`` is
    one Python frame more, and a plain weak reference hashes and compares
    as the task does.
    """
    global _states  # noqa: PLW0603  # found once
    module = sys.modules.get(_ANYIO_ASYNCIO)
    table = getattr(module, "_task_states", None)
    data = getattr(table, "data", None)
    # The walk reads anyio's private attributes: an anyio whose classes no
    # longer have them keeps anyio's own check (slower, never wrong).
    walkable = all(
        hasattr(getattr(module, cls, None), attr) for cls, attr in _WALKED
    )
    if isinstance(data, dict) and walkable:
        _states = cast("Mapping[weakref.ref[Any], Any]", data)
    return _states


def collapse(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The one exception inside nested single-member groups, else *group*.

    Cancellations beside exactly one other exception give way to it, as
    they do on asyncio: on trio a branch's error and the caller's
    ``Cancelled`` end a task group together, and the caller's cancel scope
    would strip the ``Cancelled`` and leave the error wrapped in a group of
    one (the cancellation is not lost: trio raises it again at the next
    checkpoint while the scope stays cancelled).  Call it in async code.
    """
    exc = _lone(group)
    if isinstance(exc, BaseExceptionGroup):
        cancels, others = exc.split(anyio.get_cancelled_exc_class())
        if cancels is not None and others is not None:
            other = _lone(others)
            if not isinstance(other, BaseExceptionGroup):
                return other
    return exc


def _lone(exc: BaseException) -> BaseException:
    """The one exception inside nested single-member groups, else *exc*."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


@final
class Siblings:
    """The branches of one group: any of them may cancel all of them.

    Each branch runs in a shielded scope of its own, made by
    :meth:`scope`; :meth:`cancel` cancels every one of them.  Cancelling
    the caller cancels them too (the runners forward it), but never through
    the task group's own scope (see the module docstring).

    A branch that ends in a cancellation that is not the group's (a
    *stray* one) must not end its task with it: anyio would cancel the task
    group's own scope, which swallows it, and the group would return with
    that branch unfinished.  The branch catches it and hands it to
    :meth:`keep_stray`, which cancels the others; whoever waits for the
    group raises it with :meth:`raise_stray`, as a lone handler would have.
    """

    __slots__ = ("_scopes", "cancel_called", "stray")

    def __init__(self) -> None:
        self._scopes: list[anyio.CancelScope] = []
        self.cancel_called = False
        """Whether :meth:`cancel` was called."""
        self.stray: BaseException | None = None
        """The first stray cancellation a branch ended in, if any."""

    def scope(self) -> anyio.CancelScope:
        """A new branch's scope (already cancelled if the group is)."""
        scope = anyio.CancelScope(shield=True)
        if self.cancel_called:
            scope.cancel()
        self._scopes.append(scope)
        return scope

    def cancel(self) -> None:
        """Cancel every branch (a no-op once called)."""
        if self.cancel_called:
            return
        self.cancel_called = True
        for scope in self._scopes:
            scope.cancel()

    def keep_stray(self, scope: anyio.CancelScope, exc: BaseException) -> None:
        """A cancellation *exc* left the branch whose scope is *scope*.

        Call it from ``except anyio.get_cancelled_exc_class()`` around the
        branch's ``with scope:`` (the group's own cancellations never get
        there: the scope takes them), and do not re-raise.  Unless the
        branch was being stopped anyway (*scope* was cancelled, and this is
        how it stopped), *exc* is stray: kept for :meth:`raise_stray`, and
        the other branches are cancelled.
        """
        if scope.cancel_called:
            return
        if self.stray is None:
            self.stray = exc
        self.cancel()

    def raise_stray(self) -> None:
        """Raise the stray cancellation a branch ended in, if any (call
        once every branch has stopped)."""
        if self.stray is not None:
            raise self.stray


async def _run_group(
    tasks: int,
    body: Callable[[Siblings], Coroutine[Any, Any, None]],
    *,
    lazy: bool = False,
) -> None:
    """Run *tasks* copies of *body* in one task group, as siblings.

    *lazy*: start one copy, and the others only once it first suspends
    (a pool whose items never wait needs one task, not *tasks*: spawning a
    task costs far more than such an item).

    Returns only once every branch finished: a stray cancellation in a
    branch is raised here, after the others were stopped.
    """
    siblings = Siblings()
    remaining = 1 if lazy else tasks
    done = anyio.Event()

    async def branch(first: bool) -> None:
        nonlocal remaining
        scope = siblings.scope()
        try:
            with scope:
                run = body(siblings)
                await (_Eager(run, spawn_rest) if first else run)
        except anyio.get_cancelled_exc_class() as exc:  # not the group's
            siblings.keep_stray(scope, exc)
        finally:
            remaining -= 1
            if not remaining:
                done.set()

    def spawn_rest() -> None:
        nonlocal remaining
        if siblings.cancel_called:
            return
        remaining += tasks - 1
        for _ in range(tasks - 1):
            tg.start_soon(branch, False)

    try:
        async with anyio.create_task_group() as tg:
            for _ in range(remaining):
                tg.start_soon(branch, lazy and tasks > 1)
            try:
                await done.wait()
            finally:
                # Cancelled (natively or by a scope), or a branch raised:
                # stop every branch.  After a clean finish, a no-op.
                if not done.is_set():
                    siblings.cancel()
    except BaseExceptionGroup as group:
        raise collapse(group) from None
    siblings.raise_stray()


@final
class _Eager:
    """Awaits *coro*, calling *then* (once) when it first suspends.

    A plain ``await coro`` with a hook: every value it yields and every
    value or exception sent back passes through unchanged, on asyncio and
    trio alike.
    """

    __slots__ = ("_coro", "_then")

    def __init__(
        self, coro: Coroutine[Any, Any, None], then: Callable[[], None]
    ) -> None:
        self._coro = coro
        self._then = then

    def __await__(self) -> Generator[Any, Any, None]:
        it = self._coro.__await__()
        try:
            sent = it.send(None)
        except StopIteration:
            return
        try:
            self._then()
        except BaseException:
            it.close()  # its finally blocks run; nothing is left suspended
            raise
        while True:
            try:
                value = yield sent
            except GeneratorExit:
                it.close()
                raise
            except BaseException as exc:  # noqa: BLE001  # handed to coro
                try:
                    sent = it.throw(exc)
                except StopIteration:
                    return
            else:
                try:
                    sent = it.send(value)
                except StopIteration:
                    return


async def run_all(
    count: int,
    work: Callable[[int, Siblings], Coroutine[Any, Any, None]],
) -> None:
    """Run ``work(0, s)`` ... ``work(count - 1, s)`` concurrently.

    *s*, the :class:`Siblings`, lets any of them cancel all of them.
    """
    if count < 1:
        return
    indices = iter(range(count))

    async def body(siblings: Siblings) -> None:
        await work(next(indices), siblings)

    await _run_group(count, body)


_DONE = object()


async def run_pool(
    workers: int,
    items: Iterator[T],
    work: Callable[[T, Siblings], Awaitable[None]],
) -> None:
    """Run *work* on every item with at most *workers* at a time.

    A fixed pool of tasks pulls from one shared iterator: spawning a task
    per item costs far more than the items themselves (and would not bound
    concurrency); the other workers start only once the first one waits
    (items that never wait all run in one task).  *work* may stop the pool through the :class:`Siblings`
    it is given: no worker takes a new item after that.
    """
    if workers < 1:
        return

    async def worker(siblings: Siblings) -> None:
        while not siblings.cancel_called:
            item = next(items, _DONE)
            if item is _DONE:
                return
            await work(item, siblings)  # type: ignore[arg-type]  # not _DONE

    await _run_group(workers, worker, lazy=True)


@final
class Earliest(Generic[T]):
    """Keeps the value reported by the lowest branch index.

    Branches report with :meth:`settle`, which then cancels the others.
    Reports that land in the same scheduling round are simultaneous:
    :meth:`settle` lets that round finish before it cancels, and the
    earliest branch in definition order wins, so the outcome does not
    depend on the order in which the scheduler ran them.
    """

    __slots__ = ("_index", "_value")

    def __init__(self) -> None:
        self._index = -1
        self._value: T | None = None

    @property
    def found(self) -> bool:
        """Whether any branch reported."""
        return self._index >= 0

    def value(self) -> T:
        """The earliest branch's value (call only when :attr:`found`)."""
        assert self._index >= 0  # noqa: S101  # callers check found first
        return self._value  # type: ignore[return-value]  # set with _index

    def offer(self, index: int, value: T) -> None:
        """Record *value* for branch *index* unless an earlier one did."""
        if self._index < 0 or index < self._index:
            self._index, self._value = index, value

    async def settle(self, index: int, value: T, siblings: Siblings) -> None:
        """:meth:`offer` *value*, then cancel the other branches.

        Before cancelling, one checkpoint lets the branches that became
        ready in the same round (timeouts due at the same instant) report
        too.
        """
        self.offer(index, value)
        if siblings.cancel_called:
            return
        try:
            await anyio.lowlevel.cancel_shielded_checkpoint()
        finally:
            siblings.cancel()
