"""map_reduce: split a value, work on the pieces with a fixed pool, reduce."""

from __future__ import annotations

import inspect
import itertools
import math

from collections.abc import (
    AsyncIterable,
    Awaitable,
    Callable,
    Iterable,
    Sequence,
    Sized,
)
from typing import Any, Never, TypeAlias, TypeVar, final

import anyio
import attrs

from returns.result import Failure, Result, Success

from ._concurrency import Earliest, Siblings, checkpoint_if_cancelled, run_pool
from ._depth import MAX_DEPTH
from ._handler import Handler, composite
from ._runners import AnyCall, bad_result, located
from ._serde import canonical, checksum
from ._step import WAITED, Step, current_step, run_apart, run_later
from .errors import ConstructionError, Suspended
from .failures import FanOutLimitExceeded


S = TypeVar("S")
I = TypeVar("I")  # noqa: E741  # the item type, as in the seed
O = TypeVar("O")  # noqa: E741
E = TypeVar("E")
E2 = TypeVar("E2")
E3 = TypeVar("E3")
R = TypeVar("R")

DEFAULT_CONCURRENCY = 16
DEFAULT_MAX_ITEMS = 10_000

Items: TypeAlias = Iterable[I] | AsyncIterable[I]
"""A split's items: a sequence, or any (async) iterable, read lazily."""

Split: TypeAlias = (
    Items[I]
    | Result[Items[I], E3]
    | Awaitable[Items[I] | Result[Items[I], E3]]
)
"""What *split* may return: the items, a ``Result`` of them, or either
awaited (an ``async def`` split); the items may be an iterator or an
async iterator (an ``async def`` generator), read no further than
*max_items* + 1."""

__all__ = ("map_reduce",)


def map_reduce(
    split: Callable[[S], Split[I, E3]],
    worker: Handler[I, O, E],
    reduce: Callable[
        [S, tuple[Result[O, E], ...]],
        Result[R, E2] | Awaitable[Result[R, E2]],
    ],
    *,
    max_concurrency: int = DEFAULT_CONCURRENCY,
    max_items: int = DEFAULT_MAX_ITEMS,
    fail_fast: bool = False,
    name: str | None = None,
) -> Handler[S, R, E | E2 | E3 | FanOutLimitExceeded]:
    """Split *S* into items, run *worker* on each, reduce the results.

    *split* returns the items, or a ``Result`` of them: a failing split is
    the failure of the whole (located under ``name[split]``), nothing runs.
    *split* and *reduce* may be ``async def`` functions; the items may be
    any iterable or async iterable (a generator, endless even), of which
    no more than *max_items* + 1 are read.

    A fixed pool of ``min(max_concurrency, len(items))`` tasks takes the
    items in order from one shared iterator, so at most *max_concurrency*
    workers run at once however many items there are.  *reduce* receives
    the input and every item's ``Result`` in input order.  A failing item
    does not stop the others, unless *fail_fast*: then the first failure
    cancels the rest and is returned (reduce is not called).  More than
    *max_items* items is a :class:`~pipeline.failures.FanOutLimitExceeded`
    failure before any worker starts (its *width* is the sequence's
    length, or *max_items* + 1 for an iterator: the rest is never read).  When *reduce* returns the state type,
    the result is a ``Handler[S, S, ...]``: a graph node.

    .. versionadded:: 0.1.0
    """
    for arg, count in (
        ("max_concurrency", max_concurrency),
        ("max_items", max_items),
    ):
        if isinstance(count, bool) or not isinstance(count, int):
            msg = f"map_reduce({arg}=...): must be an int, not a {type(count).__name__}"
            raise ConstructionError(msg)
    if max_concurrency < 1:
        msg = f"map_reduce(max_concurrency={max_concurrency}): must be >= 1"
        raise ConstructionError(msg)
    if max_items < 0:
        msg = f"map_reduce(max_items={max_items}): must be >= 0"
        raise ConstructionError(msg)
    label = name or "map_reduce"
    spec = MapReduce(
        split, reduce, max_concurrency, max_items, fail_fast, label
    )
    detail = f"max_concurrency={max_concurrency}"
    return composite("map_reduce", (worker,), spec, name=label, detail=detail)


@final
@attrs.frozen
class MapReduce:
    """A map_reduce's parts, and (called with its worker's call) the call
    that runs it in process.

    Kept as the handler's builder, so that an engine that runs the items
    elsewhere (:mod:`pipeline.temporal`: one activity per item) finds the
    split, the reduce and the limits.
    """

    split: Callable[[Any], Any]
    reduce: Callable[[Any, tuple[Result[Any, Any], ...]], Any]
    max_concurrency: int
    max_items: int
    fail_fast: bool
    label: str

    def refuse(self, n: int) -> Failure[FanOutLimitExceeded] | None:
        """Why *n* items may not start (too many), or ``None``."""
        if n > self.max_items:
            return Failure(
                FanOutLimitExceeded(n, self.max_items, path=(self.label,))
            )
        return None

    async def items(self, state: Any) -> Result[list[Any], Any]:
        """The split's items (awaited if it is ``async def``), or its
        failure, located under ``label[split]``, or the refusal of more
        than *max_items* (read no further than that)."""
        out = await _settled(self.split(state))
        if type(out) is Failure:
            return located(out, f"{self.label}[split]")
        given: Iterable[Any] | AsyncIterable[Any] = _unwrapped(out)
        limit = self.max_items
        if isinstance(given, Sized):
            refused = self.refuse(len(given))
            if refused is not None:
                return refused
        if isinstance(given, AsyncIterable):
            got = await _taken(given, limit + 1)
        else:
            it = iter(given)
            got = list(itertools.islice(it, limit + 1))
            close = getattr(it, "close", None)
            if close is not None:  # a generator's finally runs now
                close()
        return self.refuse(len(got)) or Success(got)

    async def reduced(
        self, state: Any, results: tuple[Result[Any, Any], ...]
    ) -> Result[Any, Any]:
        """What the reduce makes of the results (awaited if ``async``)."""
        out = await _settled(self.reduce(state, results))
        if type(out) not in (Success, Failure):
            raise bad_result(out, f"{self.label} reduce")
        return out  # type: ignore[no-any-return]

    def __call__(self, calls: Sequence[AnyCall]) -> AnyCall:
        work = calls[0]
        label, fail_fast = self.label, self.fail_fast

        async def run_map_reduce(state: Any) -> Result[Any, Any]:
            await checkpoint_if_cancelled()
            split_out = await self.items(state)
            if type(split_out) is not Success:
                return split_out
            items = split_out.unwrap()
            n = len(items)
            results = await _work_through(
                work, items, label, min(self.max_concurrency, n), fail_fast
            )
            if not isinstance(results, tuple):
                return results  # the first failure, fail-fast
            return await self.reduced(state, results)

        return run_map_reduce


async def _taken(items: AsyncIterable[Any], n: int) -> list[Any]:
    """The first *n* of *items* (fewer if it ends); an async generator is
    closed after."""
    got: list[Any] = []
    it = aiter(items)
    try:
        while len(got) < n:
            try:
                got.append(await anext(it))
            except StopAsyncIteration:
                break
    finally:
        close = getattr(it, "aclose", None)
        if close is not None:
            await close()
    return got


async def _settled(value: Any) -> Any:
    """*value*, awaited if it is awaitable (an ``async def`` split or reduce)."""
    if inspect.isawaitable(value):
        return await value
    return value


def _unwrapped(items: Any) -> Any:
    """The items of a split that returned a ``Success`` or the items."""
    return items.unwrap() if type(items) is Success else items


async def _work_through(
    work: AnyCall,
    items: list[Any],
    label: str,
    workers: int,
    fail_fast: bool,
) -> tuple[Result[Any, Any], ...] | Result[Any, Any]:
    """Every item's result in order, or the first failure if *fail_fast*.

    In the step of a checkpointed run, each item asks its questions
    apart: one that asks waits, the others go on, and the step pauses once
    all settled, keeping the outputs (JSON values) of the items that
    finished: they do not run again when the step does.  An item's own
    step (its key, a digest of it) is made only when the item looks at
    it, or when items may wait or have outputs kept from before.
    """
    results: list[Any] = [None] * len(items)
    failed: Earliest[Result[Any, Any]] = Earliest()
    step = current_step()
    base = "" if step is None else step.items_key(label)
    keyed = step is not None and (step.may_wait() or step.holds(base))
    ran = [False] * len(items)  # which items ran in this attempt
    waited = False

    async def one(i: int, siblings: Siblings) -> None:
        nonlocal waited
        if step is None:
            r = await work(items[i])
        else:
            r = await _in_step(step, base, i, items, work, keyed, ran)
            if r is WAITED:
                waited = True
                return
        if type(r) is not Success:
            r = located(r, f"{label}[{i}]")
            if fail_fast:
                await failed.settle(i, r, siblings)
        results[i] = r

    await run_pool(workers, iter(range(len(items))), one)
    if failed.found:
        return failed.value()
    if waited:
        assert step is not None  # noqa: S101  # only items of a step wait
        await _pause(step, _finished(base, items, results, ran))
    return tuple(results)


async def _in_step(
    step: Step,
    base: str,
    i: int,
    items: list[Any],
    work: AnyCall,
    keyed: bool,
    ran: list[bool],
) -> Any:
    """Item *i* in the step of a checkpointed run: its output kept before,
    or its result now (noted in *ran*), or ``WAITED``.

    Unless *keyed* (items may wait, or outputs are kept), nothing is kept
    under the item's key and it does not wait: its step is made only if
    it asks for it (see :func:`~pipeline._step.run_later`).
    """
    item = items[i]
    if not keyed:
        ran[i] = True
        return await run_later(
            lambda: step.child(_item_key(base, i, item), i),
            lambda: work(item),
        )
    key = _item_key(base, i, item)
    kept = _kept(step.docs(key))
    if kept is not _NOTHING:
        return Success(kept)
    ran[i] = True
    return await run_apart(step.child(key, i), lambda: work(item))


def _finished(
    base: str, items: list[Any], results: list[Any], ran: list[bool]
) -> dict[str, dict[str, Any]]:
    """The outputs to keep when the step pauses: of the items that ran
    and finished in this attempt, each (a JSON value) under its key (an
    output that is no JSON value is not kept: the item runs again)."""
    finished: dict[str, dict[str, Any]] = {}
    for i, r in enumerate(results):
        if ran[i] and type(r) is Success and _plain(value := r.unwrap()):
            finished[_item_key(base, i, items[i])] = {"out": value}
    return finished


async def _pause(step: Step, finished: dict[str, dict[str, Any]]) -> Never:
    """Items wait at questions: keep the *finished* outputs (all in one
    record, only now: a map_reduce whose items ask nothing commits nothing
    more than before), then pause the step."""
    if finished:
        failed: object = None
        with anyio.CancelScope(shield=True):
            failed = await step.save_all(finished)
        if failed is not None:
            raise Suspended(failed)  # the run fails with the refusal
    raise Suspended


_NOTHING: Any = object()


def _item_key(base: str, i: int, item: Any) -> str:
    """Where item *i* keeps its output: by position, and (for an item
    that is a JSON value) by a digest of it, so that a split giving other
    items when the step runs again never takes another item's output."""
    try:
        digest = checksum(canonical(item))[:12]
    except (ValueError, TypeError, RecursionError):
        return f"{base}/{i}"
    return f"{base}/{i}@{digest}"


def _kept(docs: tuple[Any, ...]) -> Any:
    """The output an item kept, or ``_NOTHING``."""
    doc = docs[-1] if docs else None
    if isinstance(doc, dict) and "out" in doc:
        return doc["out"]
    return _NOTHING


_SCALARS = (str, int, bool, type(None))


def _plain(value: Any) -> bool:
    """Whether *value* comes back from JSON as it is: ``None``, ``bool``,
    ``int``, finite ``float``, ``str``, and lists and dicts (``str`` keys)
    of those, no deeper than a record may nest."""
    stack = [(value, 0)]
    while stack:
        x, depth = stack.pop()
        kind = type(x)
        if kind in _SCALARS:
            continue
        if kind is float:
            if not math.isfinite(x):
                return False
            continue
        if depth >= MAX_DEPTH - 8:  # room for the record around it
            return False
        if kind is list:
            stack.extend((v, depth + 1) for v in x)
        elif kind is dict:
            if not all(type(k) is str for k in x):
                return False
            stack.extend((v, depth + 1) for v in x.values())
        else:
            return False
    return True
