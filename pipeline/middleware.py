"""Built-in middleware: retry, timeout and logging.

Attach with :meth:`Handler.use <pipeline.Handler.use>`; on a composite the
middleware wraps each child, on every execution, first added outermost::

    flaky.use(retry(attempts=3, backoff=0.1), timeout(2.0))
"""

from __future__ import annotations

import logging as _logging
import random as _random
import time

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Never, TypeVar, final

import anyio
import attrs

from returns.result import Failure, Result, Success

from ._handler import Call, Middleware


if TYPE_CHECKING:
    from tenacity import RetryCallState
from .errors import ConstructionError
from .failures import BudgetExceeded, TimedOut
from .runs import tracing_now


In = TypeVar("In")
Out = TypeVar("Out")
Err = TypeVar("Err")

__all__ = (
    "Backoff",
    "Log",
    "Retry",
    "Timeout",
    "Trace",
    "log",
    "retry",
    "timeout",
    "trace",
)

_LOGGER = _logging.getLogger("pipeline")


@final
@attrs.frozen
class Backoff:
    """Exponential backoff: ``initial * multiplier**(attempt-1)``, capped.

    *jitter* adds a uniform random fraction of each delay (0.1 = up to 10%);
    pass *seed* for a reproducible schedule.

    .. versionadded:: 0.1.0
    """

    initial: float = 0.0
    multiplier: float = 2.0
    maximum: float = 30.0
    jitter: float = 0.0
    seed: int | None = None

    def delays(self, attempts: int) -> list[float]:
        """The delays before attempts 2..*attempts*, for docs and tests."""
        rng = _random.Random(self.seed)  # noqa: S311  # jitter, not crypto
        return [self.delay(n, rng) for n in range(1, attempts)]

    def delay(self, attempt: int, rng: _random.Random) -> float:
        """The delay after attempt number *attempt* (1 for the first).

        *rng* draws the jitter.
        """
        base = min(
            self.initial * self.multiplier ** (attempt - 1), self.maximum
        )
        if self.jitter and base:
            base += base * self.jitter * rng.random()
        return base


@final
@attrs.frozen(repr=False)
class Retry(Middleware[Never]):
    """The middleware :func:`retry` makes: re-runs a failing call.

    .. versionadded:: 0.1.0
    """

    attempts: int
    backoff: Backoff
    when: Callable[[Any], bool] | None
    sleep: Callable[[float], Awaitable[None]]

    @property
    def __name__(self) -> str:
        return f"retry(attempts={self.attempts})"

    def __repr__(self) -> str:
        return self.__name__

    def __call__(
        self, call: Call[In, Out, Err], _name: str, /
    ) -> Call[In, Out, Err]:
        # tenacity is imported when a retry is first wired, not at start-up.
        from tenacity import (  # noqa: PLC0415
            AsyncRetrying,
            retry_if_result,
            stop_after_attempt,
        )

        attempts, backoff, when = self.attempts, self.backoff, self.when
        sleep = self.sleep

        def should_retry(r: Result[Any, Any]) -> bool:
            if type(r) is Success:
                return False
            failure = r.failure()
            if isinstance(failure, BudgetExceeded):
                return False  # a spent budget stays spent
            return when is None or bool(when(failure))

        def last(state: RetryCallState) -> Result[Out, Err]:
            assert state.outcome is not None  # noqa: S101  # tenacity sets it
            return state.outcome.result()  # type: ignore[no-any-return]

        async def run_retry(value: In) -> Result[Out, Err]:
            rng = _random.Random(backoff.seed)  # noqa: S311  # jitter only
            retrying = AsyncRetrying(
                stop=stop_after_attempt(attempts),
                wait=lambda s: backoff.delay(s.attempt_number, rng),
                retry=retry_if_result(should_retry),
                sleep=sleep,
                retry_error_callback=last,
            )
            return await retrying(call, value)

        return run_retry


def retry(
    attempts: int = 3,
    *,
    backoff: Backoff | float = 0.0,
    when: Callable[[Any], bool] | None = None,
    sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
) -> Retry:
    """Re-run a failing handler up to *attempts* times in all.

    *backoff* is a :class:`Backoff` or the initial delay in seconds
    (doubling each time).  *when* receives each failure value and says
    whether to retry it (default: every failure;
    :class:`~pipeline.failures.BudgetExceeded` is never retried: a spent
    budget stays spent).  The last failure is
    returned when attempts run out.  Exceptions are not retried: they
    propagate, and so does cancellation, including during the backoff
    sleep.  Backed by :mod:`tenacity`; the wait uses *sleep*
    (:func:`anyio.sleep` by default, so it works on asyncio and trio and
    under trio's ``MockClock``; tests may pass a recording fake).

    .. versionadded:: 0.1.0
    """
    if attempts < 1:
        msg = f"retry(attempts={attempts}): attempts must be at least 1"
        raise ConstructionError(msg)
    policy = backoff if isinstance(backoff, Backoff) else Backoff(backoff)
    return Retry(attempts, policy, when, sleep)


@final
@attrs.frozen(repr=False)
class Timeout(Middleware[TimedOut]):
    """The middleware :func:`timeout` makes: a deadline per execution.

    .. versionadded:: 0.1.0
    """

    seconds: float

    @property
    def __name__(self) -> str:
        return f"timeout({self.seconds})"

    def __repr__(self) -> str:
        return self.__name__

    def __call__(
        self, call: Call[In, Out, Err], name: str, /
    ) -> Call[In, Out, Err | TimedOut]:
        seconds = self.seconds
        path = (name,)

        async def run_timeout(value: In) -> Result[Out, Err | TimedOut]:
            with anyio.move_on_after(seconds):
                return await call(value)
            return Failure(TimedOut(seconds, path=path))

        return run_timeout


def timeout(seconds: float) -> Timeout:
    """Fail with :class:`~pipeline.failures.TimedOut` after *seconds*.

    The handler is cancelled at the deadline (anyio's
    :func:`~anyio.move_on_after`); cancellation from outside still
    propagates as cancellation.

    .. versionadded:: 0.1.0
    """
    if not seconds > 0:
        msg = f"timeout({seconds!r}): seconds must be positive"
        raise ConstructionError(msg)
    return Timeout(float(seconds))


@final
@attrs.frozen(repr=False)
class Log(Middleware[Never]):
    """The middleware :func:`log` makes: start and finish records.

    .. versionadded:: 0.1.0
    """

    logger: _logging.Logger
    level: int
    failure_level: int

    @property
    def __name__(self) -> str:
        return "log"

    def __repr__(self) -> str:
        return "log"

    def __call__(
        self, call: Call[In, Out, Err], name: str, /
    ) -> Call[In, Out, Err]:
        logger, level, failure_level = (
            self.logger,
            self.level,
            self.failure_level,
        )

        async def run_logged(value: In) -> Result[Out, Err]:
            start = time.perf_counter()
            outcome = "raised"
            if logger.isEnabledFor(level):
                logger.log(
                    level,
                    "%s started",
                    name,
                    extra={
                        "pipeline_handler": name,
                        "pipeline_event": "start",
                    },
                )
            try:
                r = await call(value)
                outcome = "success" if type(r) is Success else "failure"
                return r
            finally:
                lvl = level if outcome == "success" else failure_level
                if logger.isEnabledFor(lvl):
                    logger.log(
                        lvl,
                        "%s finished: %s",
                        name,
                        outcome,
                        extra={
                            "pipeline_handler": name,
                            "pipeline_event": "finish",
                            "pipeline_outcome": outcome,
                            "pipeline_duration_s": time.perf_counter() - start,
                        },
                    )

        return run_logged


def log(
    logger: _logging.Logger | None = None,
    *,
    level: int = _logging.DEBUG,
    failure_level: int = _logging.WARNING,
) -> Log:
    """Log each execution's start and finish with structured extras.

    Records carry ``pipeline_handler``, ``pipeline_event`` (``start`` or
    ``finish``), ``pipeline_outcome`` (``success``, ``failure`` or
    ``raised``, which includes cancellation) and ``pipeline_duration_s``.
    Failure values are not logged (they may hold user data).

    .. versionadded:: 0.1.0
    """
    return Log(logger or _LOGGER, level, failure_level)


@final
@attrs.frozen(repr=False)
class Trace(Middleware[Never]):
    """The middleware :func:`trace` makes: a span per execution.

    .. versionadded:: 0.1.0
    """

    @property
    def __name__(self) -> str:
        return "trace"

    def __repr__(self) -> str:
        return "trace"

    def __call__(
        self, call: Call[In, Out, Err], name: str, /
    ) -> Call[In, Out, Err]:
        async def run_traced(value: In) -> Result[Out, Err]:
            tracing = tracing_now()
            if tracing is None:
                return await call(value)
            with tracing.handler(name) as span:
                r = await call(value)
                tracing.outcome(span, r)
                return r

        return run_traced


def trace() -> Trace:
    """A span per execution (``handler <name>``), in the traced
    :func:`pipeline.scope` it runs in; nothing outside one.

    Spans carry the handler's name and, on failure, the failure's type
    (never a value or message).  Runs, graph nodes, agents, turns, model
    and tool calls have spans without it; this adds the handlers of a
    ``>>``/``&``/``|`` composition.

    .. versionadded:: 0.1.0
    """
    return Trace()
