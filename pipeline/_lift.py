"""Lift ``async def`` functions into handlers."""

from __future__ import annotations

import inspect

from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar, overload

from returns.result import Failure, Result, Success

from ._handler import Handler
from .failures import Raised


In = TypeVar("In")
Out = TypeVar("Out")
Err = TypeVar("Err")
E1 = TypeVar("E1", bound=Exception)
E2 = TypeVar("E2", bound=Exception)
E3 = TypeVar("E3", bound=Exception)

__all__ = ("handler", "safe")


def _describe(fn: object) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    if name is None:
        return repr(fn)
    module = getattr(fn, "__module__", None)
    return f"{module}.{name}" if module else str(name)


def _is_async(fn: object) -> bool:
    if inspect.iscoroutinefunction(fn):  # functions, methods, partials
        return True
    # An object whose class defines ``async def __call__``.
    call = getattr(type(fn), "__call__", None)  # noqa: B004
    return not inspect.isroutine(fn) and inspect.iscoroutinefunction(call)


def _check_async(fn: object, what: str) -> str:
    """Validate *fn* as a one-argument async callable; return its name."""
    if not callable(fn):
        msg = f"{what} needs an async function, got {type(fn).__name__} {fn!r}"
        raise TypeError(msg)
    if not _is_async(fn):
        msg = (
            f"{what} needs an async function (async def); "
            f"{_describe(fn)} is not a coroutine function"
        )
        raise TypeError(msg)
    try:
        inspect.signature(fn).bind(object())
    except TypeError:
        msg = (
            f"{what}: {_describe(fn)} must accept exactly one positional "
            "argument (the handler's input)"
        )
        raise TypeError(msg) from None
    except ValueError:  # builtins without a signature: trust the caller
        pass
    name = getattr(fn, "__name__", None)
    return name if isinstance(name, str) else type(fn).__name__


@overload
def handler(
    fn: Callable[[In], Coroutine[Any, Any, Result[Out, Err]]], /
) -> Handler[In, Out, Err]: ...


@overload
def handler(
    *, name: str
) -> Callable[
    [Callable[[In], Coroutine[Any, Any, Result[Out, Err]]]],
    Handler[In, Out, Err],
]: ...


def handler(
    fn: Callable[[In], Coroutine[Any, Any, Result[Out, Err]]] | None = None,
    /,
    *,
    name: str | None = None,
) -> (
    Handler[In, Out, Err]
    | Callable[
        [Callable[[In], Coroutine[Any, Any, Result[Out, Err]]]],
        Handler[In, Out, Err],
    ]
):
    """Lift ``async def f(x: In) -> Result[Out, Err]`` into a handler.

    >>> from returns.result import Result, Success
    >>> @handler
    ... async def double(x: int) -> Result[int, str]:
    ...     return Success(x * 2)
    >>> double
    Handler(double)

    Exceptions raised by *fn* propagate; use :func:`safe` to turn listed
    exception types into failures.

    Raises:
        TypeError: *fn* is not an ``async`` function of one argument (at
            decoration time, naming the function).

    .. versionadded:: 0.1.0
    """

    def lift(
        f: Callable[[In], Coroutine[Any, Any, Result[Out, Err]]],
    ) -> Handler[In, Out, Err]:
        default = _check_async(f, "@handler")
        return Handler(f, name or default)

    if fn is None:
        return lift
    return lift(fn)


def _check_exceptions(exceptions: tuple[type[BaseException], ...]) -> None:
    if not exceptions:
        msg = "safe() needs at least one exception type to catch"
        raise TypeError(msg)
    for exc in exceptions:
        if not (isinstance(exc, type) and issubclass(exc, Exception)):  # type: ignore[redundant-expr]  # runtime check of untyped callers
            # Cancellation, KeyboardInterrupt and SystemExit must propagate.
            msg = (
                f"safe() only turns Exception subclasses into failures; "
                f"{exc!r} is not one"
            )
            raise TypeError(msg)


@overload
def safe(
    e1: type[E1], /, *, name: str | None = None
) -> Callable[
    [Callable[[In], Awaitable[Out]]], Handler[In, Out, Raised[E1]]
]: ...


@overload
def safe(
    e1: type[E1], e2: type[E2], /, *, name: str | None = None
) -> Callable[
    [Callable[[In], Awaitable[Out]]], Handler[In, Out, Raised[E1 | E2]]
]: ...


@overload
def safe(
    e1: type[E1], e2: type[E2], e3: type[E3], /, *, name: str | None = None
) -> Callable[
    [Callable[[In], Awaitable[Out]]], Handler[In, Out, Raised[E1 | E2 | E3]]
]: ...


@overload
def safe(
    *exceptions: type[Exception], name: str | None = None
) -> Callable[
    [Callable[[In], Awaitable[Out]]], Handler[In, Out, Raised[Exception]]
]: ...


def safe(
    *exceptions: type[Exception], name: str | None = None
) -> Callable[[Callable[[In], Awaitable[Out]]], Handler[In, Out, Raised[Any]]]:
    """Lift ``async def f(x) -> Out``, turning *exceptions* into failures.

    A listed exception becomes ``Failure(Raised(exc, path=(name,)))``; any
    other exception propagates, and so does cancellation (only
    :class:`Exception` subclasses may be listed).

    >>> @safe(ValueError)
    ... async def parse(text: str) -> int:
    ...     return int(text)
    >>> import anyio
    >>> anyio.run(parse, "x").failure().exception
    ValueError("invalid literal for int() with base 10: 'x'")

    .. versionadded:: 0.1.0
    """
    _check_exceptions(exceptions)
    catch = tuple(exceptions)

    def lift(
        f: Callable[[In], Awaitable[Out]],
    ) -> Handler[In, Out, Raised[Any]]:
        label = name or _check_async(f, "safe()")
        if name:
            _check_async(f, "safe()")
        path = (label,)

        async def run_safe(value: In) -> Result[Out, Raised[Any]]:
            try:
                out = await f(value)
            except catch as exc:
                return Failure(Raised(exc, path=path))
            return Success(out)

        return Handler(run_safe, label)

    return lift
