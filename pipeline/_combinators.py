"""Named combinators: sequential, must, first, or_else, loop, for_each, switch, if_.

Each builds a composite :class:`~pipeline.Handler`; none mutates its inputs.
Arguments that can never run (no branches, a non-positive limit) raise
:class:`~pipeline.errors.ConstructionError` when the combinator is built.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Generic, Never, TypeVar, final, overload

import anyio
import attrs

from returns.result import Failure, Result, Success

from ._concurrency import checkpoint_if_cancelled
from ._context import Context, MergeStrategy, MetaMerge, MetaValue
from ._handler import Handler, composite
from ._runners import (
    AnyCall,
    MakeRunner,
    bad_result,
    both_builder,
    located,
    merge_contexts,
    race_builder,
    then_builder,
)
from .errors import ConstructionError
from .failures import AllFailed, ConditionError, LimitExceeded


A = TypeVar("A")
B = TypeVar("B")
C = TypeVar("C")
D = TypeVar("D")
F = TypeVar("F")
G = TypeVar("G")
T = TypeVar("T")
V = TypeVar("V")
In = TypeVar("In")
Out = TypeVar("Out")
Out2 = TypeVar("Out2")
R = TypeVar("R")
Err = TypeVar("Err")
Err2 = TypeVar("Err2")
E1 = TypeVar("E1")
E2 = TypeVar("E2")
E3 = TypeVar("E3")
E4 = TypeVar("E4")
E5 = TypeVar("E5")
CE = TypeVar("CE")
T_co = TypeVar("T_co", covariant=True)
V_co = TypeVar("V_co", covariant=True)
T_contra = TypeVar("T_contra", contravariant=True)
CE_co = TypeVar("CE_co", covariant=True)

DEFAULT_LOOP_LIMIT = 1000
"""Iterations an open-ended :func:`loop` may run before it fails."""

_CHECKPOINT_EVERY = 1024  # iterations between cancellation checkpoints

__all__ = (
    "DEFAULT_LOOP_LIMIT",
    "Condition",
    "Item",
    "condition",
    "first",
    "for_each",
    "if_",
    "loop",
    "metadata_equals",
    "must",
    "noop",
    "sequential",
    "switch",
    "when",
)


# -- sequential -------------------------------------------------------------


@overload
def sequential(
    h1: Handler[A, B, E1], /, *, name: str | None = None
) -> Handler[A, B, E1]: ...
@overload
def sequential(
    h1: Handler[A, B, E1], h2: Handler[B, C, E2], /, *, name: str | None = None
) -> Handler[A, C, E1 | E2]: ...
@overload
def sequential(
    h1: Handler[A, B, E1],
    h2: Handler[B, C, E2],
    h3: Handler[C, D, E3],
    /,
    *,
    name: str | None = None,
) -> Handler[A, D, E1 | E2 | E3]: ...
@overload
def sequential(
    h1: Handler[A, B, E1],
    h2: Handler[B, C, E2],
    h3: Handler[C, D, E3],
    h4: Handler[D, F, E4],
    /,
    *,
    name: str | None = None,
) -> Handler[A, F, E1 | E2 | E3 | E4]: ...
@overload
def sequential(
    h1: Handler[A, B, E1],
    h2: Handler[B, C, E2],
    h3: Handler[C, D, E3],
    h4: Handler[D, F, E4],
    h5: Handler[F, G, E5],
    /,
    *,
    name: str | None = None,
) -> Handler[A, G, E1 | E2 | E3 | E4 | E5]: ...
@overload
def sequential(
    *handlers: Handler[T, T, Err], name: str | None = None
) -> Handler[T, T, Err]: ...


def sequential(
    *handlers: Handler[Any, Any, Any], name: str | None = None
) -> Handler[Any, Any, Any]:
    """Run *handlers* one after another, like ``h1 >> h2 >> ...``.

    Typed for up to five differently-typed steps; beyond five every step
    must map a type to itself (``Handler[T, T, E]``).  Named, the sequence
    is a unit in reprs and failure paths.

    .. versionadded:: 0.1.0
    """
    if not handlers:
        msg = "sequential() needs at least one handler"
        raise ConstructionError(msg)
    label = name or "sequential"
    return composite("then", handlers, then_builder(label), name=label)


# -- must -------------------------------------------------------------------


@overload
def must(
    h1: Handler[Context, Context, E1],
    h2: Handler[Context, Context, E2],
    /,
    *,
    merge: MergeStrategy = MergeStrategy.KEEP_NEW,
    custom: Mapping[str, MetaMerge] | None = None,
    name: str | None = None,
) -> Handler[Context, Context, E1 | E2]: ...
@overload
def must(
    h1: Handler[Context, Context, E1],
    h2: Handler[Context, Context, E2],
    h3: Handler[Context, Context, E3],
    /,
    *,
    merge: MergeStrategy = MergeStrategy.KEEP_NEW,
    custom: Mapping[str, MetaMerge] | None = None,
    name: str | None = None,
) -> Handler[Context, Context, E1 | E2 | E3]: ...
@overload
def must(
    h1: Handler[Context, Context, E1],
    h2: Handler[Context, Context, E2],
    h3: Handler[Context, Context, E3],
    h4: Handler[Context, Context, E4],
    /,
    *,
    merge: MergeStrategy = MergeStrategy.KEEP_NEW,
    custom: Mapping[str, MetaMerge] | None = None,
    name: str | None = None,
) -> Handler[Context, Context, E1 | E2 | E3 | E4]: ...
@overload
def must(
    h1: Handler[Context, Context, E1],
    h2: Handler[Context, Context, E2],
    h3: Handler[Context, Context, E3],
    h4: Handler[Context, Context, E4],
    h5: Handler[Context, Context, E5],
    /,
    *,
    merge: MergeStrategy = MergeStrategy.KEEP_NEW,
    custom: Mapping[str, MetaMerge] | None = None,
    name: str | None = None,
) -> Handler[Context, Context, E1 | E2 | E3 | E4 | E5]: ...
@overload
def must(
    *branches: Handler[Context, Context, Err],
    merge: MergeStrategy = MergeStrategy.KEEP_NEW,
    custom: Mapping[str, MetaMerge] | None = None,
    name: str | None = None,
) -> Handler[Context, Context, Err]: ...
@overload
def must(
    *branches: Handler[In, Out, Err],
    aggregate: Callable[[In, tuple[Out, ...]], Result[R, Err2]],
    name: str | None = None,
) -> Handler[In, R, Err | Err2]: ...


def must(
    *branches: Handler[Any, Any, Any],
    aggregate: Callable[[Any, tuple[Any, ...]], Result[Any, Any]]
    | None = None,
    merge: MergeStrategy = MergeStrategy.KEEP_NEW,
    custom: Mapping[str, MetaMerge] | None = None,
    name: str | None = None,
) -> Handler[Any, Any, Any]:
    """Run *branches* concurrently; all must succeed.

    The first failure cancels the other branches and is returned; the
    *aggregate* function is not called then.  Without *aggregate*, context
    branches are merged: the messages each added, in definition order, and
    their metadata changes resolved by *merge* (and per-key *custom*
    functions).  *aggregate* receives the input and the outputs in
    definition order.

    .. versionadded:: 0.1.0
    """
    if not branches:
        msg = "must() needs at least one branch"
        raise ConstructionError(msg)
    label = name or "must"
    agg = aggregate or merge_contexts(label, merge, custom)
    return composite("both", branches, both_builder(label, agg), name=label)


def first(
    *branches: Handler[In, Out, Err], name: str | None = None
) -> Handler[In, Out, AllFailed[Err]]:
    """Race *branches*; the first success wins (like ``a | b | ...``).

    Losers are cancelled, and their cleanup has finished when this returns.
    If every branch fails, the failure lists each one in definition order.

    .. versionadded:: 0.1.0
    """
    if not branches:
        msg = "first() needs at least one branch"
        raise ConstructionError(msg)
    label = name or "first"
    return composite("race", branches, race_builder(label), name=label)


def or_else(
    *handlers: Handler[In, Out, Err],
    on: tuple[type[Any], ...] | None = None,
    name: str | None = None,
) -> Handler[In, Out, AllFailed[Err]]:
    """Try *handlers* one after another: the next runs only when the one
    before failed with a type listed in *on* (default: any failure).

    Unlike ``a | b`` (:func:`first`), which runs every branch at once and
    pays for each, the next handler starts only after the previous one
    failed, so only what ran is paid for.  The first success is returned.
    Otherwise the failure is :class:`~pipeline.failures.AllFailed` holding
    each attempt's failure in order: every handler's when each failed with
    a listed type, or fewer when one failed with a type not in *on* (that
    one is last, and no handler after it ran).

    .. versionadded:: 0.1.0
    """
    if not handlers:
        msg = "or_else() needs at least one handler"
        raise ConstructionError(msg)
    if on is not None and (not on or not all(isinstance(t, type) for t in on)):
        msg = "or_else(on=...) must be a non-empty tuple of failure types"
        raise ConstructionError(msg)
    label = name or "or_else"
    return composite(
        "or_else", handlers, _or_else_builder(label, on), name=label
    )


def _or_else_builder(
    label: str, on: tuple[type[Any], ...] | None
) -> MakeRunner:
    def build(calls: Sequence[AnyCall]) -> AnyCall:
        async def run_or_else(value: Any) -> Result[Any, Any]:
            await checkpoint_if_cancelled()
            failures: list[Any] = []
            for i, call in enumerate(calls):
                r = await call(value)
                if type(r) is Success:
                    return r
                err = located(r, f"{label}[{i}]").failure()
                failures.append(err)
                if on is not None and not isinstance(err, on):
                    break
            return Failure(AllFailed(tuple(failures), path=(label,)))

        return run_or_else

    return build


# -- loop and for_each --------------------------------------------------------


def loop(
    body: Handler[T, T, Err],
    *,
    times: int = 0,
    while_: Callable[[T, int], bool] | None = None,
    limit: int = DEFAULT_LOOP_LIMIT,
    name: str | None = None,
) -> Handler[T, T, Err | LimitExceeded]:
    """Run *body* repeatedly, feeding each output to the next iteration.

    *times* > 0 runs at most that many iterations.  ``times=0`` runs until
    *while_* says stop, but never more than *limit* iterations: reaching
    the limit is a :class:`~pipeline.failures.LimitExceeded` failure.
    *while_* receives the current value and the number of completed
    iterations, and is checked before every iteration, the first included.
    A failing iteration stops the loop with its failure.

    The loop is a ``while`` loop, not recursion: a million iterations run in
    constant stack and memory.

    .. versionadded:: 0.1.0
    """
    if times < 0:
        msg = f"loop(times={times}): times must be >= 0 (0 = until while_)"
        raise ConstructionError(msg)
    if limit < 1:
        msg = f"loop(limit={limit}): the limit must be at least 1"
        raise ConstructionError(msg)
    if times == 0 and while_ is None:
        msg = (
            "loop(times=0) runs until while_ says stop, but no while_ was "
            "given: pass times=N or a while_ predicate"
        )
        raise ConstructionError(msg)
    label = name or "loop"
    detail = f"times={times}" if times else f"limit={limit}"
    return composite(
        "loop",
        (body,),
        _loop_builder(label, times, while_, limit),
        name=label,
        detail=detail,
    )


def _loop_builder(
    label: str,
    times: int,
    while_: Callable[[Any, int], bool] | None,
    limit: int,
) -> MakeRunner:
    def build(calls: Sequence[AnyCall]) -> AnyCall:
        body = calls[0]

        async def run_loop(value: Any) -> Result[Any, Any]:
            # Already cancelled: run no iteration (a body that never
            # suspends would otherwise run to the end).
            await checkpoint_if_cancelled()
            i = 0
            while True:
                if times and i >= times:
                    return Success(value)
                if while_ is not None and not while_(value, i):
                    return Success(value)
                if not times and i >= limit:
                    return Failure(LimitExceeded(limit, i, path=(label,)))
                r = await body(value)
                if type(r) is not Success:
                    return located(r, f"{label}[{i}]")
                value = r.unwrap()
                i += 1
                if not i % _CHECKPOINT_EVERY:
                    # Let cancellation and other tasks in, even when the body
                    # never suspends.
                    await anyio.lowlevel.checkpoint()

        return run_loop

    return build


@final
@attrs.frozen
class Item(Generic[T_co, V_co]):
    """What :func:`for_each`'s body receives: the state and the value.

    .. versionadded:: 0.1.0
    """

    state: T_co
    value: V_co
    index: int


def for_each(
    values: Iterable[V] | Callable[[T], Iterable[V]],
    body: Handler[Item[T, V], T, Err],
    *,
    name: str | None = None,
) -> Handler[T, T, Err]:
    """Run *body* once per value, in order, threading the state through.

    The body sees each value as ``item.value`` (the Go seed put it in the
    metadata key ``range_value``; with contexts, ``item.state.set(
    "range_value", item.value)`` does the same).  *values* is either a
    fixed collection (copied when the combinator is built) or a function of
    the input state.  No values: the input passes through unchanged.

    .. versionadded:: 0.1.0
    """
    fixed: tuple[Any, ...] | None = None
    source: Callable[[Any], Iterable[Any]] | None = None
    if callable(values):
        source = values
    else:
        fixed = tuple(values)
    label = name or "for_each"
    detail = f"{len(fixed)} values" if fixed is not None else "values=fn"

    def build(calls: Sequence[AnyCall]) -> AnyCall:
        step = calls[0]

        async def run_for_each(state: Any) -> Result[Any, Any]:
            await checkpoint_if_cancelled()
            items = tuple(source(state)) if source is not None else fixed
            assert items is not None  # noqa: S101  # one of the two is set
            for i, v in enumerate(items):
                r = await step(Item(state, v, i))
                if type(r) is not Success:
                    return located(r, f"{label}[{i}]")
                state = r.unwrap()
            return Success(state)

        return run_for_each

    return composite("for_each", (body,), build, name=label, detail=detail)


# -- conditions, switch and if ------------------------------------------------


@final
@attrs.frozen
class Condition(Generic[T_contra, CE_co]):
    """A test on a value: ``async (T) -> Result[bool, CE]``.

    Make one with :func:`when` (a plain predicate), :func:`metadata_equals`
    or :func:`condition` (any async check that may fail).

    .. versionadded:: 0.1.0
    """

    check: Callable[[T_contra], Awaitable[Result[bool, CE_co]]]
    name: str

    def __repr__(self) -> str:
        return f"Condition({self.name})"


def when(
    predicate: Callable[[T], bool], *, name: str | None = None
) -> Condition[T, Never]:
    """A condition from a synchronous predicate (which must not raise).

    .. versionadded:: 0.1.0
    """

    async def check(value: T) -> Result[bool, Never]:
        return Success(bool(predicate(value)))

    label = name or str(getattr(predicate, "__name__", "predicate"))
    return Condition(check, label)


def condition(
    check: Callable[[T], Awaitable[Result[bool, CE]]],
    *,
    name: str | None = None,
) -> Condition[T, CE]:
    """A condition from an async check that may fail (e.g. an LLM judge).

    .. versionadded:: 0.1.0
    """
    label = name or str(getattr(check, "__name__", "condition"))
    return Condition(check, label)


def metadata_equals(key: str, value: MetaValue) -> Condition[Context, Never]:
    """True when the context's metadata has *key* equal to *value*.

    A missing key is false.  Values compare with ``==`` after the same
    freezing as :meth:`Context.set` (lists compare equal to tuples), and
    ``1 == 1.0`` holds, unlike the Go seed; ``True`` never equals ``1``.

    .. versionadded:: 0.1.0
    """
    probe = Context().set(key, value).metadata[key]

    async def check(ctx: Context) -> Result[bool, Never]:
        if key not in ctx.metadata:
            return Success(False)
        got = ctx.metadata[key]
        same = got == probe and (type(got) is bool) == (type(probe) is bool)
        return Success(same)

    return Condition(check, f"metadata[{key!r}] == {value!r}")


def _check_case(case: object, i: int) -> None:
    if not (
        isinstance(case, tuple)
        and len(case) == 2
        and isinstance(case[0], Condition)
        and isinstance(case[1], Handler)
    ):
        msg = f"switch() case {i} must be a (Condition, Handler) pair, got {case!r}"
        raise ConstructionError(msg)


@overload
def switch(
    *cases: tuple[Condition[T, CE], Handler[T, Out, Err]],
    default: Handler[T, Out2, Err2],
    name: str | None = None,
) -> Handler[T, Out | Out2, Err | Err2 | ConditionError[CE]]: ...
@overload
def switch(
    *cases: tuple[Condition[T, CE], Handler[T, Out, Err]],
    default: None = None,
    name: str | None = None,
) -> Handler[T, T | Out, Err | ConditionError[CE]]: ...


def switch(
    *cases: tuple[Condition[Any, Any], Handler[Any, Any, Any]],
    default: Handler[Any, Any, Any] | None = None,
    name: str | None = None,
) -> Handler[Any, Any, Any]:
    """Run the handler of the first case whose condition holds.

    Cases are ``(condition, handler)`` pairs, tried in order; a condition
    that fails stops the switch with a
    :class:`~pipeline.failures.ConditionError`.  No match runs *default*;
    no match and no default passes the input through unchanged.

    .. versionadded:: 0.1.0
    """
    if not cases and default is None:
        msg = "switch() needs at least one case or a default"
        raise ConstructionError(msg)
    for i, case in enumerate(cases):
        _check_case(case, i)
    label = name or "switch"
    conditions = tuple(c for c, _ in cases)
    children = [h for _, h in cases]
    if default is not None:
        children.append(default)
    detail = ", ".join(c.name for c in conditions)
    has_default = default is not None

    def build(calls: Sequence[AnyCall]) -> AnyCall:
        n = len(conditions)

        async def run_switch(value: Any) -> Result[Any, Any]:
            for i in range(n):
                test = await conditions[i].check(value)
                if type(test) is not Success:
                    if type(test) is not Failure:
                        raise bad_result(test, f"{label} condition {i}")
                    cause = test.failure()
                    return Failure(ConditionError(i, cause, path=(label,)))
                if test.unwrap():
                    r = await calls[i](value)
                    return (
                        r
                        if type(r) is Success
                        else located(r, f"{label}[{i}]")
                    )
            if has_default:
                r = await calls[n](value)
                return (
                    r
                    if type(r) is Success
                    else located(r, f"{label}[default]")
                )
            return Success(value)

        return run_switch

    return composite("switch", children, build, name=label, detail=detail)


@overload
def if_(
    cond: Condition[T, CE],
    then: Handler[T, Out, Err],
    else_: Handler[T, Out2, Err2],
    *,
    name: str | None = None,
) -> Handler[T, Out | Out2, Err | Err2 | ConditionError[CE]]: ...
@overload
def if_(
    cond: Condition[T, CE],
    then: Handler[T, Out, Err],
    else_: None = None,
    *,
    name: str | None = None,
) -> Handler[T, T | Out, Err | ConditionError[CE]]: ...


def if_(
    cond: Condition[Any, Any],
    then: Handler[Any, Any, Any],
    else_: Handler[Any, Any, Any] | None = None,
    *,
    name: str | None = None,
) -> Handler[Any, Any, Any]:
    """Run *then* when *cond* holds, else *else_* (or pass the input on).

    .. versionadded:: 0.1.0
    """
    return switch((cond, then), default=else_, name=name or "if")


def noop() -> Handler[T, T, Never]:
    """The identity handler: succeeds with its input (``>>``'s unit).

    .. versionadded:: 0.1.0
    """
    return _NOOP


async def _noop(value: Any) -> Result[Any, Never]:
    return Success(value)


_NOOP: Handler[Any, Any, Never] = Handler(_noop, "noop")
