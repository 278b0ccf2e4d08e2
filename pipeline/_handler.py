"""`Handler[In, Out, Err]`: an immutable async step, and its operators.

A handler wraps ``async (In) -> Result[Out, Err]``.  Operators build larger
handlers without mutating their operands:

* ``a >> b`` (:meth:`Handler.then`): sequential; a failure short-circuits.
* ``a & b`` (:meth:`Handler.both`): all must succeed, concurrently; the
  outputs form a flat tuple (a :class:`Par`).
* ``a | b`` (:meth:`Handler.otherwise`): first success wins.

Python's precedence applies: ``a >> b & c | d`` is ``((a >> b) & c) | d``,
and ``repr`` prints the parentheses.

Execution never recurses along a chain: ``>>`` flattens into one tuple of
steps run by a loop, so a 10,000-step chain uses one frame per nesting
level, not per step.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from typing import (
    Any,
    Generic,
    Protocol,
    TypeAlias,
    TypeVar,
    TypeVarTuple,
    cast,
    final,
)

import attrs

from pyrsistent import PVector, pvector
from returns.result import Result

from ._runners import (
    AnyCall,
    MakeRunner,
    both_builder,
    race_builder,
    then_builder,
    tuple_of_outputs,
)
from .failures import AllFailed


In = TypeVar("In")
Out = TypeVar("Out")
Out2 = TypeVar("Out2")
Err = TypeVar("Err")
Err2 = TypeVar("Err2")
Nxt = TypeVar("Nxt")
In_contra = TypeVar("In_contra", contravariant=True)
Out_co = TypeVar("Out_co", covariant=True)
Err_co = TypeVar("Err_co", covariant=True)
X_co = TypeVar("X_co", covariant=True)
Outs = TypeVarTuple("Outs")

Call: TypeAlias = Callable[[In], Coroutine[Any, Any, Result[Out, Err]]]
"""The function a handler wraps: ``async (In) -> Result[Out, Err]``.

A coroutine function, so that calling a handler without ``await`` is an
error to mypy (``unused-coroutine``) and pyright (``reportUnusedCoroutine``).
"""


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
    :class:`~pipeline.failures.TimedOut`); one that adds none is a
    ``Middleware[Never]``.  *name* is the name of the wrapped handler.

    .. versionadded:: 0.1.0
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
    _build: MakeRunner | None = attrs.field(
        alias="build", default=None, kw_only=True
    )
    _middleware: tuple[Middleware[Any], ...] = attrs.field(
        alias="middleware", default=(), kw_only=True
    )
    _named: bool = attrs.field(alias="named", default=True, kw_only=True)
    _detail: str = attrs.field(alias="detail", default="", kw_only=True)

    def __call__(
        self, value: In_contra, /
    ) -> Coroutine[Any, Any, Result[Out_co, Err_co]]:
        """Run the handler on *value*: ``await h(value)`` is its ``Result``.

        A coroutine (not just an awaitable): forgetting the ``await`` is a
        type error (mypy ``unused-coroutine``, pyright
        ``reportUnusedCoroutine``).
        """
        return self._call(value)

    # -- operators ---------------------------------------------------------

    def __rshift__(
        self: Handler[In, Out, Err], other: Handler[Out, Nxt, Err2]
    ) -> Handler[In, Nxt, Err | Err2]:
        """Run *self*, then feed its success to *other* (named twin: ``then``).

        A failure of *self* short-circuits: *other* does not run.

        >>> import anyio
        >>> from returns.result import Success
        >>> from pipeline import handler
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

    def __and__(
        self: Handler[In, Out, Err], other: Handler[In, Out2, Err2]
    ) -> Par[In, Err | Err2, Out, Out2]:
        """Run both concurrently; all must succeed (named twin: ``both``).

        The first failure cancels the siblings and is returned.  The outputs
        form a flat tuple, whatever their type (contexts included):
        ``a & b & c`` gives ``(a_out, b_out, c_out)``.  The rule is the
        static type's, never the values': to merge context branches into
        one context, use :func:`~pipeline.must`.
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
        :class:`~pipeline.failures.AllFailed` listing each branch's failure in
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
        """Wrap every *child* of this handler in *middleware*.

        The first middleware given (or added by an earlier ``use``) is the
        outermost.  On a composite each child is wrapped as a whole, on every
        execution (every step of a chain, every iteration of a loop):
        ``(a >> b).use(timeout(1))`` gives each step one second.  On a leaf
        the handler itself is wrapped, as :meth:`wrap` does.
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

    def wrap(
        self: Handler[In, Out, Err], *middleware: Middleware[Err2]
    ) -> Handler[In, Out, Err | Err2]:
        """Wrap this handler *as a whole* in *middleware*.

        The middleware runs once per execution of the whole handler:
        ``(a >> b).wrap(timeout(1))`` gives the two steps one second
        together, and ``(a >> b).wrap(retry(3))`` re-runs the chain from
        ``a``.  The first middleware given is the outermost.  On a leaf,
        the same as :meth:`use`.
        """
        if not middleware:
            return self
        return _use_node(self, middleware)

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
    build: MakeRunner | None,
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
    build: MakeRunner,
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
        both_builder("both", tuple_of_outputs),
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
        names = ", ".join(_mw_name(m) for m in mw)
        if kind == "use":
            # A use-node wraps its one child as a whole: a leaf's ``use``,
            # a composite's ``wrap``.
            verb = "use" if kids[0]._kind == "leaf" else "wrap"
            return f"{inner}.{verb}({names})"
        inner = f"({inner}).use({names})"  # each child wrapped
    return inner


def _paren(h: Handler[Any, Any, Any]) -> str:
    text = _expr(h)
    if h._kind in _OPS and not h._named and not h._middleware:
        return f"({text})"
    return text
