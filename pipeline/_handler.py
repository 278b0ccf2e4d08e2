"""`Handler[In, Out, Err]`: an immutable async step, and its operators.

A handler wraps ``async (In) -> Result[Out, Err]``.  Operators build larger
handlers without mutating their operands:

* ``a >> b`` (:meth:`Handler.then`): sequential; a failure short-circuits.
* ``a & b`` (:meth:`Handler.both`): all must succeed, concurrently.
* ``a | b`` (:meth:`Handler.otherwise`): first success wins.

Python's precedence applies: ``a >> b & c | d`` is ``((a >> b) & c) | d``,
and ``repr`` prints the parentheses.

Execution never recurses along a chain: ``>>`` flattens into one tuple of
steps run by a loop, so a 10,000-step chain uses one frame per nesting
level, not per step.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import (
    TYPE_CHECKING,
    Any,
    Generic,
    Protocol,
    TypeAlias,
    TypeVar,
    TypeVarTuple,
    cast,
    final,
    overload,
)

import anyio
import attrs

from pyrsistent import PVector, pvector
from returns.result import Failure, Result, Success

from ._context import Context, MergeStrategy, merge_branches
from .errors import AllFailed, PipelineError


if TYPE_CHECKING:
    from ._context import MetaMerge

In = TypeVar("In")
Out = TypeVar("Out")
Out2 = TypeVar("Out2")
Err = TypeVar("Err")
Err2 = TypeVar("Err2")
Nxt = TypeVar("Nxt")
Pre = TypeVar("Pre")
In_contra = TypeVar("In_contra", contravariant=True)
Out_co = TypeVar("Out_co", covariant=True)
Err_co = TypeVar("Err_co", covariant=True)
X_co = TypeVar("X_co", covariant=True)
Outs = TypeVarTuple("Outs")

Call: TypeAlias = Callable[[In], Awaitable[Result[Out, Err]]]
"""The function a handler wraps: ``async (In) -> Result[Out, Err]``."""

AnyCall: TypeAlias = Callable[[Any], Awaitable[Result[Any, Any]]]
Builder: TypeAlias = Callable[[Sequence[AnyCall]], AnyCall]


# Children and their (middleware-wrapped) calls live in persistent vectors, so
# ``chain >> step`` shares the chain's vectors instead of copying them: a
# 10,000-step chain builds in linear time.
Children: TypeAlias = "PVector[Handler[Any, Any, Any]]"
Calls: TypeAlias = "PVector[AnyCall]"
_NO_CHILDREN: Children = pvector()
_NO_CALLS: Calls = pvector()


class Middleware(Protocol[X_co]):
    """Wraps the call of one handler; the wrapper runs on every execution.

    A middleware may add failures of type *X_co* (a timeout adds
    :class:`~pipeline.errors.TimedOut`); one that adds none is a
    ``Middleware[Never]``.  *name* is the name of the wrapped handler.
    """

    def __call__(
        self, call: Call[In, Out, Err], name: str, /
    ) -> Call[In, Out, Err | X_co]: ...


_OPS = {"then": " >> ", "both": " & ", "race": " | "}


def _mw_name(mw: object) -> str:
    return getattr(mw, "__name__", None) or repr(mw)


@attrs.frozen(eq=False, repr=False)
class Handler(Generic[In_contra, Out_co, Err_co]):
    """An immutable async step from *In* to ``Result[Out, Err]``.

    Make one with :func:`pipeline.handler` or :func:`pipeline.safe`, combine
    them with ``>>``, ``&``, ``|`` and the combinators, and call it:
    ``await h(x)`` returns a ``Result``.

    .. versionadded:: 0.1.0
    """

    _call: Call[In_contra, Out_co, Err_co] = attrs.field(alias="call")
    name: str
    # Keyword-only, so that subclasses (agents, graphs, swarms) may add
    # positional fields of their own.
    _kind: str = attrs.field(alias="kind", default="leaf", kw_only=True)
    _children: Children = attrs.field(
        alias="children", default=_NO_CHILDREN, kw_only=True
    )
    _calls: Calls = attrs.field(alias="calls", default=_NO_CALLS, kw_only=True)
    _build: Builder | None = attrs.field(
        alias="build", default=None, kw_only=True
    )
    _middleware: tuple[Middleware[Any], ...] = attrs.field(
        alias="middleware", default=(), kw_only=True
    )
    _named: bool = attrs.field(alias="named", default=True, kw_only=True)
    _detail: str = attrs.field(alias="detail", default="", kw_only=True)

    def __call__(
        self, value: In_contra, /
    ) -> Awaitable[Result[Out_co, Err_co]]:
        """Run the handler on *value*."""
        return self._call(value)

    # -- operators ---------------------------------------------------------

    def __rshift__(
        self: Handler[In, Out, Err], other: Handler[Out, Nxt, Err2]
    ) -> Handler[In, Nxt, Err | Err2]:
        """Run *self*, then feed its success to *other* (named twin: ``then``).

        A failure of *self* short-circuits: *other* does not run.

        >>> from returns.result import Success
        >>> @handler
        ... async def inc(x: int) -> Result[int, str]:
        ...     return Success(x + 1)
        >>> anyio.run((inc >> inc), 1)
        <Success: 3>

        .. versionadded:: 0.1.0
        """
        if not isinstance(other, Handler):
            return NotImplemented
        return _compose("then", (self, other))

    then = __rshift__

    @overload
    def __and__(  # type: ignore[overload-overlap]  # contexts merge
        self: Handler[Context, Context, Err],
        other: Handler[Context, Context, Err2],
    ) -> Handler[Context, Context, Err | Err2]: ...

    @overload
    def __and__(
        self: Handler[In, Out, Err], other: Handler[In, Out2, Err2]
    ) -> Par[In, Err | Err2, Out, Out2]: ...

    def __and__(
        self: Handler[In, Out, Err], other: Handler[In, Out2, Err2]
    ) -> Handler[Any, Any, Err | Err2]:
        """Run both concurrently; all must succeed (named twin: ``both``).

        The first failure cancels the siblings and is returned.  Context
        handlers merge into one context (see
        :func:`~pipeline.merge_branches`); other values form a flat tuple:
        ``a & b & c`` gives ``(a_out, b_out, c_out)``.

        .. versionadded:: 0.1.0
        """
        if not isinstance(other, Handler):
            return NotImplemented
        return _par((self, other))

    both = __and__

    def __or__(
        self: Handler[In, Out, Err], other: Handler[In, Out2, Err2]
    ) -> Race[In, Out | Out2, Err | Err2]:
        """Race both; the first success wins (named twin: ``otherwise``).

        Losers are cancelled and their cleanup finishes before the result
        is returned.  If every branch fails, the failure is an
        :class:`~pipeline.errors.AllFailed` listing each branch's failure in
        definition order.

        .. versionadded:: 0.1.0
        """
        if not isinstance(other, Handler):
            return NotImplemented
        return _race((self, other))

    otherwise = __or__

    # -- middleware and naming ---------------------------------------------

    def use(
        self: Handler[In, Out, Err], *middleware: Middleware[Err2]
    ) -> Handler[In, Out, Err | Err2]:
        """Wrap every child of this handler in *middleware*.

        The first middleware given (or added by an earlier ``use``) is the
        outermost.  On a composite each child is wrapped as a whole, on every
        execution (every step of a chain, every iteration of a loop); on a
        leaf the handler itself is wrapped.

        .. versionadded:: 0.1.0
        """
        if not middleware:
            return self
        if self._kind == "leaf":
            return _use_node(self, middleware)
        return _make(
            self._kind,
            self._children,
            self._build,
            self.name,
            self._middleware + middleware,
            named=self._named,
            detail=self._detail,
        )

    def named(self: Handler[In, Out, Err], name: str) -> Handler[In, Out, Err]:
        """Return this handler under *name* (used in reprs and failure paths).

        A named composite is a unit: operators do not flatten it.
        """
        if self._kind == "leaf":
            return Handler(self._call, name)
        return _make(
            self._kind,
            self._children,
            self._build,
            name,
            self._middleware,
            named=True,
            detail=self._detail,
        )

    @property
    def children(self) -> Sequence[Handler[Any, Any, Any]]:
        """The handlers this one is built from (empty for a leaf)."""
        return self._children

    @property
    def kind(self) -> str:
        """``leaf``, ``then``, ``both``, ``race``, ``use`` or a combinator."""
        return self._kind

    def __repr__(self) -> str:
        body = _expr(self, top=True)
        if self._named and self._kind != "leaf":
            body = f"{self.name} = {body}"
        return f"{type(self).__name__}({body})"


@final
class Par(
    Handler[In_contra, tuple[*Outs], Err_co],
    Generic[In_contra, Err_co, *Outs],
):
    """The flat fan-out ``a & b & c``: a handler returning a typed tuple.

    ``Par[In, Err, A, B]`` is a ``Handler[In, tuple[A, B], Err]``; adding a
    branch with ``&`` extends the tuple instead of nesting it.

    .. versionadded:: 0.1.0
    """

    __slots__ = ()

    def __and__(  # type: ignore[override]  # flattening refines the base
        self: Par[In, Err, *Outs], other: Handler[In, Nxt, Err2]
    ) -> Par[In, Err | Err2, *Outs, Nxt]:
        if not isinstance(other, Handler):
            return NotImplemented
        return _par((self, other))

    both = __and__  # type: ignore[assignment]  # as __and__


@final
class Race(
    Handler[In_contra, Out_co, AllFailed[Err_co]],
    Generic[In_contra, Out_co, Err_co],
):
    """The flat race ``a | b | c``: first success wins.

    ``Race[In, Out, Err]`` is a ``Handler[In, Out, AllFailed[Err]]``; adding a
    branch with ``|`` extends the race instead of nesting it.

    .. versionadded:: 0.1.0
    """

    __slots__ = ()

    def __or__(  # type: ignore[override]  # flattening refines the base
        self: Race[In, Out, Err], other: Handler[In, Out2, Err2]
    ) -> Race[In, Out | Out2, Err | Err2]:
        if not isinstance(other, Handler):
            return NotImplemented
        return _race((self, other))

    otherwise = __or__  # type: ignore[assignment]  # as __or__


# -- construction -----------------------------------------------------------


def _identity(calls: Sequence[AnyCall]) -> AnyCall:
    return calls[0]


def _apply(
    call: AnyCall, middleware: Sequence[Middleware[Any]], name: str
) -> AnyCall:
    for mw in reversed(middleware):
        call = mw(call, name)
    return call


def _make(
    kind: str,
    children: Children,
    build: Builder | None,
    name: str,
    middleware: tuple[Middleware[Any], ...] = (),
    *,
    named: bool,
    detail: str = "",
    cls: type[Handler[Any, Any, Any]] = Handler,
    calls: Calls | None = None,
) -> Handler[Any, Any, Any]:
    assert build is not None  # noqa: S101  # composites always have one
    if calls is None:
        calls = pvector(_apply(c._call, middleware, c.name) for c in children)
    return cls(
        build(calls),
        name,
        kind=kind,
        children=children,
        calls=calls,
        build=build,
        middleware=middleware,
        named=named,
        detail=detail,
    )


def composite(
    kind: str,
    children: Sequence[Handler[Any, Any, Any]],
    build: Builder,
    *,
    name: str | None = None,
    detail: str = "",
) -> Handler[Any, Any, Any]:
    """Make a composite handler (used by the combinators)."""
    return _make(
        kind,
        pvector(children),
        build,
        name or kind,
        named=name is not None,
        detail=detail,
    )


def _use_node(
    h: Handler[Any, Any, Any], mw: tuple[Middleware[Any], ...]
) -> Handler[Any, Any, Any]:
    return _make("use", pvector((h,)), _identity, h.name, mw, named=False)


def _join(
    parts: Sequence[Handler[Any, Any, Any]],
    flattens: Callable[[Handler[Any, Any, Any], int], bool],
) -> tuple[Children, Calls]:
    """Children and calls of ``parts[0] op parts[1] op ...``, flattened."""
    children, calls = _NO_CHILDREN, _NO_CALLS
    for i, p in enumerate(parts):
        if not flattens(p, i):
            children = children.append(p)
            calls = calls.append(p._call)
        elif not children and not p._middleware:
            children, calls = p._children, p._calls  # share, do not copy
        else:
            kids = p._children
            if p._middleware:  # keep it on each child, as a unit
                kids = pvector(_use_node(c, p._middleware) for c in kids)
            children = children.extend(kids)
            calls = calls.extend(p._calls)
    return children, calls


def _anonymous_then(h: Handler[Any, Any, Any], _: int) -> bool:
    # Sequencing is associative, so either side of >> may flatten.
    return h._kind == "then" and not h._named


def _compose(
    kind: str, parts: Sequence[Handler[Any, Any, Any]]
) -> Handler[Any, Any, Any]:
    children, calls = _join(parts, _anonymous_then)
    return _make(
        kind, children, then_builder(kind), kind, named=False, calls=calls
    )


AnyPar: TypeAlias = "Par[Any, Any, *tuple[Any, ...]]"


def _left_par(h: Handler[Any, Any, Any], i: int) -> bool:
    # Only a Par on the left extends: its static type says so.
    return i == 0 and type(h) is Par


def _left_race(h: Handler[Any, Any, Any], i: int) -> bool:
    return i == 0 and type(h) is Race


def _par(parts: Sequence[Handler[Any, Any, Any]]) -> AnyPar:
    children, calls = _join(parts, _left_par)
    made = _make(
        "both",
        children,
        both_builder("both", None),
        "both",
        named=False,
        cls=Par,
        calls=calls,
    )
    return cast("AnyPar", made)


def _race(parts: Sequence[Handler[Any, Any, Any]]) -> Race[Any, Any, Any]:
    children, calls = _join(parts, _left_race)
    made = _make(
        "race",
        children,
        race_builder("race"),
        "race",
        named=False,
        cls=Race,
        calls=calls,
    )
    return cast("Race[Any, Any, Any]", made)


# -- execution --------------------------------------------------------------


def _bad_result(r: object, where: str) -> TypeError:
    msg = (
        f"handler at {where} returned {r!r}; a handler must return a "
        "returns.result.Result (Success or Failure)"
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
        raise _bad_result(r, segment)
    err = r.failure()
    if isinstance(err, PipelineError):
        return Failure(err.at(segment))
    return r


def then_builder(label: str) -> Builder:
    """Runner factory for a sequence: a loop, not a chain of binds."""

    def build(calls: Sequence[AnyCall]) -> AnyCall:
        async def run_then(value: Any) -> Result[Any, Any]:
            for i, call in enumerate(calls):
                r = await call(value)
                if type(r) is not Success:
                    return located(r, f"{label}[{i}]")
                value = r.unwrap()
            return Success(value)

        return run_then

    return build


def collapse(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The one exception inside nested single-member groups, else *group*."""
    exc: BaseException = group
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


_MISSING: Any = object()

T = TypeVar("T")


async def run_pool(
    workers: int,
    items: Iterator[T],
    work: Callable[[T, anyio.CancelScope], Awaitable[None]],
) -> None:
    """Run *work* on every item with at most *workers* at a time.

    A fixed pool of tasks pulls from one shared iterator: spawning a task
    per item costs far more than the items themselves (and would not bound
    concurrency).  *work* may cancel the pool through the scope it is given.
    Exceptions propagate as themselves (a lone exception is not grouped).
    """
    if workers < 1:
        return

    try:
        async with anyio.create_task_group() as tg:
            scope = tg.cancel_scope

            async def worker() -> None:
                # Once cancelled (say, fail-fast), take no new item.
                while not scope.cancel_called:
                    item = next(items, _MISSING)
                    if item is _MISSING:
                        return
                    await work(item, scope)

            for _ in range(workers):
                tg.start_soon(worker)
    except BaseExceptionGroup as group:
        raise collapse(group) from None


Aggregate: TypeAlias = Callable[[Any, tuple[Any, ...]], Result[Any, Any]]


def _default_aggregate(
    strategy: MergeStrategy = MergeStrategy.KEEP_NEW,
    custom: MetaMerge | None = None,
) -> Aggregate:
    def aggregate(value: Any, outs: tuple[Any, ...]) -> Result[Any, Any]:
        # The static type of ``a & b`` decides merge-or-tuple; at run time
        # the values say the same thing: contexts merge while every output
        # so far (left to right) is a context, then the rest is a tuple.
        if not isinstance(value, Context):
            return Success(outs)
        k = 0
        while k < len(outs) and isinstance(outs[k], Context):
            k += 1
        if k < 2:  # fewer than two contexts: nothing to merge
            return Success(outs)
        merged = merge_branches(
            value,
            outs[:k],
            strategy,
            custom,  # type: ignore[arg-type]
        )
        if k == len(outs):
            return Success(merged)
        return Success((merged, *outs[k:]))

    return aggregate


def both_builder(label: str, aggregate: Aggregate | None) -> Builder:
    """Runner factory for all-must-succeed in one task group."""
    agg = aggregate or _default_aggregate()

    def build(calls: Sequence[AnyCall]) -> AnyCall:
        async def run_both(value: Any) -> Result[Any, Any]:
            # Spawning is a checkpoint on every backend: a caller that is
            # already cancelled sees its cancellation, never a result.
            await anyio.lowlevel.checkpoint_if_cancelled()
            outs = [_MISSING] * len(calls)
            failed: list[tuple[int, Result[Any, Any]]] = []

            async def branch(
                i: int, call: AnyCall, scope: anyio.CancelScope
            ) -> None:
                r = await call(value)
                if type(r) is Success:
                    outs[i] = r.unwrap()
                    return
                r = located(r, f"{label}[{i}]")
                # The first failure cancels the rest.  Failures that land in
                # the same scheduling round, before the cancellation can, are
                # simultaneous: the earliest branch in definition order wins,
                # so the result does not depend on the scheduler.
                if not failed or i < failed[0][0]:
                    failed[:] = [(i, r)]
                scope.cancel()

            try:
                async with anyio.create_task_group() as tg:
                    for i, call in enumerate(calls):
                        tg.start_soon(branch, i, call, tg.cancel_scope)
            except BaseExceptionGroup as group:
                raise collapse(group) from None
            if failed:
                return failed[0][1]
            return agg(value, tuple(outs))

        return run_both

    return build


def race_builder(label: str) -> Builder:
    """Runner factory for first-success: losers are cancelled and awaited."""

    def build(calls: Sequence[AnyCall]) -> AnyCall:
        async def run_race(value: Any) -> Result[Any, Any]:
            await anyio.lowlevel.checkpoint_if_cancelled()
            failures: list[Any] = [_MISSING] * len(calls)
            winner: list[tuple[int, Any]] = []

            async def branch(
                i: int, call: AnyCall, scope: anyio.CancelScope
            ) -> None:
                r = await call(value)
                if type(r) is Success:
                    # Ties (successes seen before the cancellation lands) go
                    # to the earliest branch in definition order.
                    if not winner or i < winner[0][0]:
                        winner[:] = [(i, r.unwrap())]
                    scope.cancel()
                else:
                    failures[i] = located(r, f"{label}[{i}]").failure()

            try:
                async with anyio.create_task_group() as tg:
                    for i, call in enumerate(calls):
                        tg.start_soon(branch, i, call, tg.cancel_scope)
            except BaseExceptionGroup as group:
                raise collapse(group) from None
            if winner:
                return Success(winner[0][1])
            return Failure(AllFailed(tuple(failures), path=(label,)))

        return run_race

    return build


# -- repr -------------------------------------------------------------------


def _expr(h: Handler[Any, Any, Any], *, top: bool = False) -> str:
    kind = h._kind
    if kind == "leaf" or (h._named and not top):
        return h.name
    kids = h._children
    if kind == "use":
        inner = _paren(kids[0])
    elif kind in _OPS:
        inner = _OPS[kind].join(_paren(c) for c in kids)
    else:
        args = [_expr(c) for c in kids]
        if h._detail:
            args.append(h._detail)
        inner = f"{kind}({', '.join(args)})"
    mw = h._middleware
    if mw:
        inner = f"({inner}).use({', '.join(_mw_name(m) for m in mw)})"
    return inner


def _paren(h: Handler[Any, Any, Any]) -> str:
    text = _expr(h)
    if h._kind in _OPS and not h._named and not h._middleware:
        return f"({text})"
    return text
