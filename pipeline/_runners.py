"""How composites run: the runner factories behind ``>>``, ``&`` and ``|``.

A *builder* takes the (middleware-wrapped) calls of a composite's children
and returns the one call that runs them.  Runners are flat loops, never a
chain of binds: a 10,000-step chain runs in one frame.  Failures leaving a
composite are located under ``label[index]`` (see :func:`located`).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, TypeAlias

from returns.result import Failure, Result, Success

from ._concurrency import Earliest, Siblings, checkpoint_if_cancelled, run_all
from ._context import Context, MergeStrategy, MetaMerge, merge_branches
from .failures import AllFailed, PipelineError


AnyCall: TypeAlias = Callable[[Any], Coroutine[Any, Any, Result[Any, Any]]]
"""A handler's call with its types erased: what runners compose."""

MakeRunner: TypeAlias = Callable[[Sequence[AnyCall]], AnyCall]
"""Makes a composite's call from its children's calls."""

Aggregate: TypeAlias = Callable[[Any, tuple[Any, ...]], Result[Any, Any]]
"""Combines the input and the branch outputs of an all-must-succeed."""

__all__ = (
    "Aggregate",
    "AnyCall",
    "MakeRunner",
    "bad_result",
    "both_builder",
    "located",
    "merge_contexts",
    "ok",
    "race_builder",
    "then_builder",
    "tuple_of_outputs",
)


def bad_result(r: object, where: str) -> TypeError:
    """The error for a handler at *where* that returned no ``Result``."""
    msg = (
        f"handler at {where} returned an object of type "
        f"{type(r).__name__}; a handler must return a returns.result.Result "
        "(Success or Failure)"
    )
    return TypeError(msg)


def ok(r: Result[object, object]) -> bool:
    """Whether *r* is a ``Success``.

    A plain ``bool`` on purpose: ``isinstance(r, Success)`` narrows *r* to
    ``Success[Any]`` and mypy silently forgets the value type.
    """
    return type(r) is Success


def located(r: Result[Any, Any], segment: str) -> Result[Any, Any]:
    """Return the failure *r*, located under *segment* if it has a path."""
    if type(r) is not Failure:
        raise bad_result(r, segment)
    err = r.failure()
    if isinstance(err, PipelineError):
        return Failure(err.at(segment))
    return r


def then_builder(label: str) -> MakeRunner:
    """Runner factory for a sequence: a loop, not a chain of binds."""

    def build(calls: Sequence[AnyCall]) -> AnyCall:
        async def run_then(value: Any) -> Result[Any, Any]:
            # A caller that is already cancelled runs no step: steps that
            # never suspend would otherwise all run and return a value.
            await checkpoint_if_cancelled()
            for i, call in enumerate(calls):
                r = await call(value)
                if type(r) is not Success:
                    return located(r, f"{label}[{i}]")
                value = r.unwrap()
            return Success(value)

        return run_then

    return build


def tuple_of_outputs(_: object, outs: tuple[Any, ...]) -> Result[Any, Any]:
    """The aggregate of ``&``: the branch outputs as a tuple, always.

    ``a & b`` is a :class:`~pipeline.Par` whatever the outputs are (the
    static type says so; merging contexts is :func:`~pipeline.must`'s).
    """
    return Success(outs)


def merge_contexts(
    label: str,
    strategy: MergeStrategy = MergeStrategy.KEEP_NEW,
    custom: Mapping[str, MetaMerge] | None = None,
) -> Aggregate:
    """The aggregate of :func:`~pipeline.must` without one: merge contexts.

    ``must``'s signature only takes context branches without an
    *aggregate*, so every output is a context; one that is not (a typing
    lie through ``Any`` or ``cast``) is a :class:`TypeError` naming it.
    """

    def aggregate(value: Any, outs: tuple[Any, ...]) -> Result[Any, Any]:
        for i, out in enumerate((value, *outs)):
            if type(out) is not Context:
                where = "the input" if i == 0 else f"{label}[{i - 1}]"
                msg = (
                    f"{label}: {where} is of type {type(out).__name__}, not "
                    "Context; without aggregate=, must() merges contexts"
                )
                raise TypeError(msg)
        return Success(merge_branches(value, outs, strategy, custom))

    return aggregate


_MISSING: Any = object()


def both_builder(label: str, aggregate: Aggregate) -> MakeRunner:
    """Runner factory for all-must-succeed in one task group."""
    agg = aggregate

    def build(calls: Sequence[AnyCall]) -> AnyCall:
        async def run_both(value: Any) -> Result[Any, Any]:
            # Spawning is a checkpoint on every backend: a caller that is
            # already cancelled sees its cancellation, never a result.
            await checkpoint_if_cancelled()
            outs = [_MISSING] * len(calls)
            failed: Earliest[Result[Any, Any]] = Earliest()

            async def branch(i: int, siblings: Siblings) -> None:
                r = await calls[i](value)
                if type(r) is Success:
                    outs[i] = r.unwrap()
                else:
                    where = f"{label}[{i}]"
                    await failed.settle(i, located(r, where), siblings)

            await run_all(len(calls), branch)
            if failed.found:
                return failed.value()
            return agg(value, tuple(outs))

        return run_both

    return build


def race_builder(label: str) -> MakeRunner:
    """Runner factory for first-success: losers are cancelled and awaited."""

    def build(calls: Sequence[AnyCall]) -> AnyCall:
        async def run_race(value: Any) -> Result[Any, Any]:
            await checkpoint_if_cancelled()
            failures: list[Any] = [_MISSING] * len(calls)
            winner: Earliest[Any] = Earliest()

            async def branch(i: int, siblings: Siblings) -> None:
                r = await calls[i](value)
                if type(r) is Success:
                    await winner.settle(i, r.unwrap(), siblings)
                else:
                    failures[i] = located(r, f"{label}[{i}]").failure()

            await run_all(len(calls), branch)
            if winner.found:
                return Success(winner.value())
            return Failure(AllFailed(tuple(failures), path=(label,)))

        return run_race

    return build
