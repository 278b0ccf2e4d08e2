"""map_reduce: split a value, work on the pieces with a fixed pool, reduce."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar, final

import anyio
import attrs

from returns.result import Failure, Result, Success

from ._handler import AnyCall, Handler, composite, located, run_pool
from .errors import ConstructionError, FanOutLimitExceeded


S = TypeVar("S")
I = TypeVar("I")  # noqa: E741  # the item type, as in the seed
O = TypeVar("O")  # noqa: E741
E = TypeVar("E")
E2 = TypeVar("E2")
R = TypeVar("R")

DEFAULT_CONCURRENCY = 16
DEFAULT_MAX_ITEMS = 10_000

__all__ = ("map_reduce",)


def map_reduce(
    split: Callable[[S], Sequence[I]],
    worker: Handler[I, O, E],
    reduce: Callable[[S, tuple[Result[O, E], ...]], Result[R, E2]],
    *,
    max_concurrency: int = DEFAULT_CONCURRENCY,
    max_items: int = DEFAULT_MAX_ITEMS,
    fail_fast: bool = False,
    name: str | None = None,
) -> Handler[S, R, E | E2 | FanOutLimitExceeded]:
    """Split *S* into items, run *worker* on each, reduce the results.

    A fixed pool of ``min(max_concurrency, len(items))`` tasks takes the
    items in order from one shared iterator, so at most *max_concurrency*
    workers run at once however many items there are.  *reduce* receives the input and
    every item's ``Result`` in input order.  A failing item does not stop
    the others, unless *fail_fast*: then the first failure cancels the rest
    and is returned (reduce is not called).  More than *max_items* items is
    a :class:`~pipeline.errors.FanOutLimitExceeded` failure before any
    worker starts.  When *reduce* returns the state type, the result is a
    ``Handler[S, S, ...]``: a graph node.

    .. versionadded:: 0.1.0
    """
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

    split: Callable[[Any], Sequence[Any]]
    reduce: Callable[[Any, tuple[Result[Any, Any], ...]], Result[Any, Any]]
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

    def __call__(self, calls: Sequence[AnyCall]) -> AnyCall:
        work = calls[0]
        split, reduce, label = self.split, self.reduce, self.label
        fail_fast, max_concurrency = self.fail_fast, self.max_concurrency

        async def run_map_reduce(state: Any) -> Result[Any, Any]:
            items = list(split(state))
            n = len(items)
            refused = self.refuse(n)
            if refused is not None:
                return refused
            results: list[Any] = [None] * n
            failed: list[tuple[int, Result[Any, Any]]] = []

            async def one(i: int, scope: anyio.CancelScope) -> None:
                r = await work(items[i])
                if type(r) is not Success:
                    r = located(r, f"{label}[{i}]")
                    if fail_fast:
                        if not failed or i < failed[0][0]:
                            failed[:] = [(i, r)]
                        scope.cancel()
                results[i] = r

            await run_pool(min(max_concurrency, n), iter(range(n)), one)
            if failed:
                return failed[0][1]
            return reduce(state, tuple(results))

        return run_map_reduce
