"""OpenTelemetry spans for runs, folds, steps, model and tool calls.

Follows the OpenTelemetry GenAI semantic conventions where they have a
name for the thing (``invoke_agent``, ``chat``, ``execute_tool`` and the
``gen_ai.*`` attributes); the rest is under ``pipeline.*``.  Imported only
when a tracer provider is given or set globally, so that ``import
pipeline`` does not pay for OpenTelemetry.  Spans never carry message content, arguments or
exception messages (they may hold secrets): names, counts, token usage,
finish reasons and error *types* only.
"""

from __future__ import annotations

from ._extras import require


require(
    "tracing (pipeline.runs.scope(tracer_provider=...))",
    "the OpenTelemetry API",
    "otel",
    ("opentelemetry.trace",),
)

from collections.abc import Awaitable, Callable, Coroutine, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, TypeVar, cast, final

from opentelemetry.trace import (
    SpanKind,
    Status,
    StatusCode,
    get_current_span,
    use_span,
)
from returns.result import Failure

from ._version import __version__


if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer, TracerProvider
    from opentelemetry.util.types import AttributeValue

    from ._messages import ToolCall
    from ._usage import RunUsage
    from .models._types import ModelRequest, ModelResponse

__all__ = ("Tracing",)

_Step = Callable[[Any, Any], Awaitable[Any]]
R = TypeVar("R")


def failed(span: Span, kind: str) -> None:
    """Mark *span* failed with the error type *kind* (never a message)."""
    span.set_attribute("error.type", kind)
    span.set_status(Status(StatusCode.ERROR, kind))


def failure_of(result: object) -> object | None:
    """The failure value inside *result*, if it is a ``Failure`` (a step
    returns a snapshot or a ``Failure``; a run a ``Result``)."""
    if type(result) is Failure:
        return cast("Failure[object]", result).failure()
    return None


def _kind(failure: object) -> str:
    return type(failure).__name__


def model_id(name: str) -> tuple[str, str]:
    """``openai:gpt-4o`` as ``("openai", "gpt-4o")``."""
    provider, sep, model = name.partition(":")
    return (provider, model) if sep else ("", name)


@final
class Tracing:
    """Makes this library's spans with a tracer from the given provider."""

    __slots__ = ("provider", "tracer")

    def __init__(self, provider: TracerProvider) -> None:
        self.provider = provider
        self.tracer: Tracer = provider.get_tracer("pipeline", __version__)

    @contextmanager
    def span(
        self,
        name: str,
        attributes: dict[str, AttributeValue],
        kind: SpanKind = SpanKind.INTERNAL,
    ) -> Iterator[Span]:
        """A span current for the block; an exception (cancellation too)
        passing through marks it failed with its type and goes on."""
        span = self.tracer.start_span(name, kind=kind, attributes=attributes)
        with use_span(
            span,
            end_on_exit=True,
            record_exception=False,
            set_status_on_exception=False,
        ):
            try:
                yield span
            except BaseException as exc:  # observed and re-raised
                failed(span, type(exc).__name__)
                raise

    # -- runs -----------------------------------------------------------------

    def run_span(self, name: str) -> Span:
        """The root span of a scope (not yet current)."""
        return self.tracer.start_span(
            f"run {name}", attributes={"pipeline.run.name": name}
        )

    @staticmethod
    def finish_run(span: Span, usage: RunUsage, failure: object) -> None:
        """Record a scope's usage (and failure) on its span and end it."""
        span.set_attributes(
            {
                "gen_ai.usage.input_tokens": usage.input_tokens,
                "gen_ai.usage.output_tokens": usage.output_tokens,
                "pipeline.usage.cost": usage.cost,
                "pipeline.usage.model_calls": usage.model_calls,
                "pipeline.usage.tool_calls": usage.tool_calls,
                "pipeline.usage.repairs": usage.repairs,
            }
        )
        if failure is not None:
            failed(span, _kind(failure))
        span.end()

    # -- folds ----------------------------------------------------------------

    def fold(self, machine: Any) -> AbstractContextManager[Span]:
        """The span of one run of a machine (graph, swarm, agent loop)."""
        kind = getattr(machine, "kind", "fold")
        name: str = machine.name
        if kind == "agent":
            return self.span(
                f"invoke_agent {name}",
                {
                    "gen_ai.operation.name": "invoke_agent",
                    "gen_ai.agent.name": name,
                },
            )
        return self.span(f"{kind} {name}", {f"pipeline.{kind}.name": name})

    def steps(self, machine: Any, step: _Step) -> _Step:
        """*step* wrapped in a span per call: a node, or an agent's turn."""
        tracing = self
        if getattr(machine, "kind", "fold") == "agent":
            agent: str = machine.name

            async def turn(snap: Any, context: Any) -> Any:
                with tracing.span(
                    f"turn {agent}",
                    {
                        "gen_ai.agent.name": agent,
                        "pipeline.turn": snap.step + 1,
                    },
                ) as span:
                    new = await step(snap, context)
                    failure = failure_of(new)
                    if failure is not None:
                        failed(span, _kind(failure))
                    return new

            return turn

        async def node(snap: Any, context: Any) -> Any:
            nodes: tuple[str, ...] = snap.next
            with tracing.span(
                f"node {','.join(nodes)}",
                {"pipeline.node": list(nodes), "pipeline.step": snap.step + 1},
            ) as span:
                new = await step(snap, context)
                failure = failure_of(new)
                if failure is not None:
                    failed(span, _kind(failure))
                return new

        return node

    @staticmethod
    def cache_lookup(hit: bool) -> None:
        """Mark the current span (a node's) with a cache lookup's outcome."""
        get_current_span().set_attribute("pipeline.cache.hit", hit)

    def outcome(self, span: Span, result: object) -> None:
        """Mark a fold's span failed if its result is a failure."""
        failure = failure_of(result)
        if failure is not None:
            failed(span, _kind(failure))

    # -- calls ----------------------------------------------------------------

    def model_call(
        self, name: str, request: ModelRequest
    ) -> AbstractContextManager[Span]:
        """The span of one model call (``chat <model>``, a client span)."""
        provider, model = model_id(name)
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider or "unknown",
            "gen_ai.request.model": model,
        }
        if request.temperature is not None:
            attributes["gen_ai.request.temperature"] = request.temperature
        if request.max_tokens is not None:
            attributes["gen_ai.request.max_tokens"] = request.max_tokens
        return self.span(f"chat {model}", attributes, SpanKind.CLIENT)

    def model_cache_lookup(self, name: str, hit: bool) -> None:
        """A cached model's lookup: a span ``cache <model>`` marked
        ``pipeline.cache.hit`` (a miss's call has its own span after it)."""
        provider, model = model_id(name)
        attributes: dict[str, AttributeValue] = {
            "gen_ai.provider.name": provider or "unknown",
            "gen_ai.request.model": model,
            "pipeline.cache.hit": hit,
        }
        self.tracer.start_span(f"cache {model}", attributes=attributes).end()

    @staticmethod
    def model_result(span: Span, response: ModelResponse) -> None:
        """Record a model call's finish reason and token usage."""
        usage = response.usage
        span.set_attributes(
            {
                "gen_ai.response.finish_reasons": [response.finish_reason],
                "gen_ai.usage.input_tokens": usage.input_tokens,
                "gen_ai.usage.output_tokens": usage.output_tokens,
            }
        )

    async def tool_call(
        self,
        call: ToolCall,
        run: Callable[[], Awaitable[tuple[str, bool]]],
    ) -> tuple[str, bool]:
        """Run one tool call inside its span (``execute_tool <name>``)."""
        with self.span(
            f"execute_tool {call.name}",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": call.name,
                "gen_ai.tool.call.id": call.id,
                "gen_ai.tool.type": "function",
            },
        ) as span:
            content, is_error = await run()
            if is_error:
                failed(span, "tool_error")
            return content, is_error

    def handoff(self, source: str, target: str, count: int) -> None:
        """A swarm's handoff: a span of its own, inside the swarm's step."""
        with self.span(
            f"handoff {target}",
            {
                "pipeline.handoff.source": source,
                "pipeline.handoff.target": target,
                "pipeline.handoff.count": count,
            },
        ):
            pass

    def handler(self, name: str) -> AbstractContextManager[Span]:
        """The span of one execution of a handler (the ``trace`` middleware)."""
        return self.span(f"handler {name}", {"pipeline.handler": name})

    def branch(
        self, name: str, call: Callable[[Any], Awaitable[R]]
    ) -> Callable[[Any], Coroutine[Any, Any, R]]:
        """*call*, one branch of a graph's fan-out, in a span of its own."""
        tracing = self

        async def branched(value: Any) -> R:
            with tracing.span(
                f"branch {name}", {"pipeline.node": name}
            ) as span:
                r = await call(value)
                tracing.outcome(span, r)
                return r

        return branched
