"""Run scopes: one run's budget, tracing and secrets, shared by every branch.

>>> import anyio
>>> from returns.result import Result, Success
>>> from pipeline import Budget, handler, run
>>> @handler
... async def double(n: int) -> Result[int, str]:
...     return Success(n * 2)
>>> async def main() -> None:
...     done = await run(double, 21, budget=Budget(model_calls=10))
...     print(done.result, done.usage.model_calls)
>>> anyio.run(main)
<Success: 42> 0

:func:`~pipeline.scope` opens a scope around any code (a graph resumed from a store,
a :func:`~pipeline.stream`); :func:`~pipeline.run` runs one handler in a scope and
returns its result with the usage.  Inside a scope, every model call and
tool call, in whatever branch of ``&``, ``|``, a fan-out, a swarm or
:func:`~pipeline.map_reduce`, is checked against the budget before it
starts and recorded when it ends; with a tracer provider (given, or the
global one), runs, graph nodes, handoffs, agent turns, model calls and
tool calls are spans (see :doc:`/tracing`).  Outside a scope nothing is checked or traced and
nothing is paid for it.

The scope travels in a context variable, which anyio copies into every
task a task group starts (on asyncio and trio alike): branches share their
parent's scope, and their spans are children of the span that started
them.
"""

from __future__ import annotations

import contextvars
import os
import sys

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Generic, TypeVar, final

import anyio
import attrs

from returns.result import Failure, Result, Success

from ._usage import RunUsage
from .budgets import Budget, Ledger
from .failures import BudgetExceeded
from .models import CachedModel, Fallback
from .secrets import Resolver, reset_resolver, use_resolver


if TYPE_CHECKING:
    from opentelemetry.trace import Span, TracerProvider

    from ._handler import Handler
    from ._messages import ToolCall
    from ._tracing import Tracing
    from .failures import ModelError
    from .models._types import (
        DeltaSink,
        Model,
        ModelRequest,
        ModelResponse,
    )

In = TypeVar("In")
Out = TypeVar("Out")
Err = TypeVar("Err")
Out_co = TypeVar("Out_co", covariant=True)
Err_co = TypeVar("Err_co", covariant=True)

__all__ = ()

ToolHook = Callable[
    ["ToolCall", Callable[[], Awaitable[tuple[str, bool]]]],
    Awaitable[tuple[str, bool]],
]
"""Runs one tool call around its span (see :func:`pipeline.tools.run_tools`)."""


@final
class Scope:
    """An open scope: its usage so far (:attr:`usage`).

    .. versionadded:: 0.1.0
    """

    __slots__ = ("_closed", "_span", "ledger", "name", "tracing")

    def __init__(
        self, name: str, ledger: Ledger, tracing: Tracing | None
    ) -> None:
        self.name = name
        self.ledger = ledger
        self.tracing = tracing
        self._span: Span | None = None
        self._closed: RunUsage | None = None

    @property
    def usage(self) -> RunUsage:
        """What the run spent so far (fixed once the scope is closed)."""
        if self._closed is not None:
            return self._closed
        return self.ledger.usage(anyio.current_time())

    @property
    def budget(self) -> Budget | None:
        """The budget this scope enforces (enclosing scopes' too)."""
        return self.ledger.budget

    async def generate(
        self,
        model: Model,
        request: ModelRequest,
        on_delta: DeltaSink | None,
    ) -> Result[ModelResponse, ModelError | BudgetExceeded]:
        """One model call: checked, traced and counted."""
        if type(model) is Fallback:
            # Each model a fallback calls is checked, traced and counted on
            # its own (through this scope), never the chain as one call.
            return await model.each(request, on_delta, self.generate)
        if type(model) is CachedModel:
            # A hit is no call: nothing is checked or counted; a miss's call
            # is, through this scope.
            return await model.through(
                request, on_delta, self.generate, self._cache_lookup
            )
        name = model.name
        refused = self.ledger.start_model_call(name, anyio.current_time())
        if refused is not None:
            return Failure(refused)
        tracing = self.tracing
        if tracing is None:
            answer = await model.generate(request, on_delta=on_delta)
        else:
            with tracing.model_call(name, request) as span:
                answer = await model.generate(request, on_delta=on_delta)
                if type(answer) is Success:
                    tracing.model_result(span, answer.unwrap())
                else:
                    tracing.outcome(span, answer)
        if type(answer) is Success:
            usage = answer.unwrap().usage
            self.ledger.spend(name, usage.input_tokens, usage.output_tokens)
        return answer

    def _cache_lookup(self, name: str, hit: bool) -> None:
        if self.tracing is not None:
            self.tracing.model_cache_lookup(name, hit)

    def start_tools(self, n: int) -> BudgetExceeded | None:
        """Reserve *n* tool calls about to start (all or none)."""
        return self.ledger.start_tool_calls(n, anyio.current_time())

    def start_repair(self) -> BudgetExceeded | None:
        """Reserve one re-ask of the model to fix its final answer."""
        return self.ledger.start_repair(anyio.current_time())

    def malformed_tool_calls(self, n: int) -> None:
        """Count *n* tool calls the model got wrong (repairs, which a
        :class:`~pipeline.Budget` may bound)."""
        self.ledger.malformed_tool_calls(n)

    @property
    def tool_hook(self) -> ToolHook | None:
        """The function that runs each tool call inside its span, or
        ``None`` without tracing."""
        return self.tracing.tool_call if self.tracing is not None else None

    def close(self, failure: object = None) -> RunUsage:
        """Fix the usage; end the root span (with *failure*, if any)."""
        if self._closed is None:
            self._closed = self.ledger.usage(anyio.current_time())
            if self._span is not None and self.tracing is not None:
                self.tracing.finish_run(self._span, self._closed, failure)
        return self._closed


_SCOPE: contextvars.ContextVar[Scope | None] = contextvars.ContextVar(
    "pipeline_scope", default=None
)


current: Callable[[], Scope | None] = _SCOPE.get
"""The innermost open scope, if any (a context variable's own read: no
frame of ours on the path every run takes)."""


def tracing_now() -> Tracing | None:
    """The tracing in force, if any (checked once per fold: nothing is paid
    per step without it)."""
    found = _SCOPE.get()
    return found.tracing if found is not None else None


_GLOBAL: list[Tracing] = []
"""The tracing made for the global provider last seen (one tracer per
provider, not one per run)."""


def _global_tracing() -> Tracing | None:
    """Tracing with OpenTelemetry's global tracer provider, or ``None`` when
    only the API's no-op one is there (checked once per scope: an untraced
    run pays nothing per step).  Without the API imported (and no
    ``OTEL_PYTHON_TRACER_PROVIDER``), no one can have set a provider: the
    API is not imported for nothing."""
    if "opentelemetry.trace" not in sys.modules and not _in_environ(
        "OTEL_PYTHON_TRACER_PROVIDER"
    ):
        return None
    import opentelemetry.trace as api  # noqa: PLC0415  # the otel extra

    provider = api.get_tracer_provider()
    if isinstance(provider, (api.ProxyTracerProvider, api.NoOpTracerProvider)):
        return None
    if _GLOBAL and _GLOBAL[0].provider is provider:
        return _GLOBAL[0]
    from ._tracing import Tracing  # noqa: PLC0415

    made = Tracing(provider)
    _GLOBAL[:] = [made]
    return made


def _in_environ(name: str) -> bool:
    """``name in os.environ``, read now (a variable set or unset since is
    seen), without the ``KeyError`` that ``os.environ``'s ``in`` raises and
    catches for a name it lacks (about 0.7 us, twice a run): its own
    mapping asked directly, under the key it encodes *name* to.  Anything
    else standing in for ``os.environ`` is asked as itself."""
    env = os.environ
    if type(env) is os._Environ:  # exactly the stdlib's
        return env.encodekey(name) in vars(env)["_data"]
    return name in env


def traced_by_default() -> bool:
    """Whether a run starting now is outside every scope while
    OpenTelemetry's global tracer provider is set (``logfire.configure()``,
    ``set_tracer_provider``, ``opentelemetry-instrument``): the entry points
    users call (``Graph.run``/``fold``/``resume``, ``Swarm`` the same,
    ``Agent.run``) then open a :func:`scope` of their own, so that such a
    run is traced.  A handler called on its own (``await graph(state)``)
    is not: wrap it in a scope."""
    return _SCOPE.get() is None and _global_tracing() is not None


async def generate(
    model: Model,
    request: ModelRequest,
    *,
    on_delta: DeltaSink | None = None,
) -> Result[ModelResponse, ModelError | BudgetExceeded]:
    """Call *model*: through the scope in force, or directly without one."""
    found = _SCOPE.get()
    if found is None:
        return await model.generate(request, on_delta=on_delta)
    return await found.generate(model, request, on_delta)


def handoff(source: str, target: str, count: int) -> None:
    """Trace a swarm's handoff, if tracing."""
    tracing = tracing_now()
    if tracing is not None:
        tracing.handoff(source, target, count)


@contextmanager
def scope(
    *,
    budget: Budget | None = None,
    tracer_provider: TracerProvider | None = None,
    secrets: Resolver | None = None,
    name: str = "run",
) -> Iterator[Scope]:
    """Open a scope for the code in the ``with`` block (in an async function).

    >>> # with scope(budget=Budget(tokens=10_000), tracer_provider=tp) as s:
    >>> #     result = await graph(state)
    >>> # s.usage.total_tokens

    Args:
        budget: limits every model and tool call in the block must fit.
        tracer_provider: an OpenTelemetry ``TracerProvider`` (needs the
            ``typed-pipeline[otel]`` extra).  Without it, a scope nested in
            a traced one keeps tracing, and any other scope traces with
            the global provider (``opentelemetry.trace.set_tracer_provider``,
            ``logfire.configure()``, ``opentelemetry-instrument``) if one is
            set; with none set, nothing is traced and nothing is paid.
        secrets: turns stored secret references back into values (see
            :mod:`pipeline.secrets`); by default ``env:`` references only.
        name: the run's name on its span.

    A scope nested in another charges both budgets: an inner scope cannot
    spend past its parent's limits.

    .. versionadded:: 0.1.0
    """
    parent = _SCOPE.get()
    tracing: Tracing | None
    if tracer_provider is not None:
        from ._tracing import Tracing  # noqa: PLC0415  # the otel extra

        tracing = Tracing(tracer_provider)
    elif parent is not None and parent.tracing is not None:
        tracing = parent.tracing
    else:
        tracing = _global_tracing()
    ledger = Ledger(
        budget,
        anyio.current_time(),
        parent.ledger if parent is not None else None,
    )
    opened = Scope(name, ledger, tracing)
    resolver_token = use_resolver(secrets) if secrets is not None else None
    token = _SCOPE.set(opened)
    try:
        if tracing is None:
            yield opened
        else:
            from opentelemetry.trace import use_span  # noqa: PLC0415

            span = opened._span = tracing.run_span(name)
            with use_span(
                span,
                end_on_exit=False,
                record_exception=False,
                set_status_on_exception=False,
            ):
                try:
                    yield opened
                except BaseException as exc:
                    opened.close(exc)
                    raise
    finally:
        opened.close()
        _SCOPE.reset(token)
        if resolver_token is not None:
            reset_resolver(resolver_token)


@final
@attrs.frozen
class RunResult(Generic[Out_co, Err_co]):
    """A handler's *result* and what the run spent (*usage*).

    .. versionadded:: 0.1.0
    """

    result: Result[Out_co, Err_co]
    usage: RunUsage


async def run(
    target: Handler[In, Out, Err],
    value: In,
    *,
    budget: Budget | None = None,
    tracer_provider: TracerProvider | None = None,
    secrets: Resolver | None = None,
    name: str | None = None,
) -> RunResult[Out, Err]:
    """Run *target* on *value* in a :func:`~pipeline.scope`; return the result with
    the usage.  Graphs, swarms and agents are handlers: run them the same
    way.  A spent budget comes back as a
    :class:`~pipeline.failures.BudgetExceeded` failure from the call that was
    refused (agents, graphs and swarms list it in their failure types).

    .. versionadded:: 0.1.0
    """
    label = name or target.name
    with scope(
        budget=budget,
        tracer_provider=tracer_provider,
        secrets=secrets,
        name=label,
    ) as opened:
        result = await target(value)
        usage = opened.close(
            result.failure() if type(result) is Failure else None
        )
    return RunResult(result, usage)
