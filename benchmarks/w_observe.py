"""Scopes: what budgets and tracing cost per agent turn and per graph node.

Each variant is measured beside the same work without a scope (the
"baseline" of the pair), in the same run: the overhead column is the cost
of the scope.  Tracing uses the OpenTelemetry SDK with a span processor
that hands every finished span to an exporter that drops it, so span
creation, attributes and the processor are all paid.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from returns.result import Result, Success

from benchmarks._harness import Case, Settings, measure
from pipeline import Agent, Budget, Message, Price, graph, handler, scope, tool
from pipeline.testing import Reply, ScriptedModel


class _Drop(SpanExporter):
    """Accepts every span and keeps none."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        del spans
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None


def _provider() -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_Drop()))
    return provider


_BUDGET = Budget(
    tokens=10**12,
    cost=10**9,
    model_calls=10**9,
    tool_calls=10**9,
    wall_time=10**9,
    prices={"scripted:scripted": Price(1.0, 2.0)},
)


@tool
async def echo(text: str) -> str:
    """Return the text."""
    return text


def _agent_run(
    turns: int, *, budget: Budget | None, provider: TracerProvider | None
) -> Callable[[], Awaitable[int]]:
    steps = [Reply.tool_call("echo", {"text": "hi"}) for _ in range(turns - 1)]

    async def run() -> int:
        model = ScriptedModel(*steps, Reply.text("done"))
        agent = Agent("bench", model, tools=[echo], max_turns=turns)
        if budget is None and provider is None:
            out = await agent.run([Message.user("go")])
        else:
            with scope(budget=budget, tracer_provider=provider):
                out = await agent.run([Message.user("go")])
        return out.unwrap().turns

    return run


def _graph_run(
    n: int, *, provider: TracerProvider | None
) -> Callable[[], Awaitable[int]]:
    @handler(name="inc")
    async def inc(x: int) -> Result[int, str]:
        return Success(x + 1)

    builder: Any = graph.builder(int)
    for i in range(n):
        builder = builder.node(f"n{i}", inc)
    builder = builder.entry("n0")
    for i in range(n - 1):
        builder = builder.edge(f"n{i}", f"n{i + 1}")
    g = builder.edge(f"n{n - 1}", graph.END).build(name="chain")
    limits = graph.GraphLimits(max_steps=n + 1)

    async def run() -> int:
        if provider is None:
            out = await g.run(0, limits=limits)
        else:
            with scope(tracer_provider=provider):
                out = await g.run(0, limits=limits)
        return int(out.unwrap().state)

    return run


def cases(settings: Settings, *, quick: bool) -> list[Case]:
    """Agent turns with a budget and with tracing, against no scope; graph
    nodes with tracing, against no scope."""
    provider = _provider()
    out: list[Case] = []
    for turns in [10, 50] if quick else [10, 50, 200]:
        plain = _agent_run(turns, budget=None, provider=None)
        for variant, run in (
            ("agent+budget", _agent_run(turns, budget=_BUDGET, provider=None)),
            ("agent+trace", _agent_run(turns, budget=None, provider=provider)),
        ):
            for impl, timed in (("baseline", plain), ("pipeline", run)):
                out.append(
                    measure(
                        "W7",
                        variant,
                        impl,
                        size=turns,
                        unit="turn",
                        run=timed,
                        expected=turns,
                        settings=settings,
                    )
                )
    for n in [10, 100] if quick else [10, 100, 1000]:
        for impl, timed in (
            ("baseline", _graph_run(n, provider=None)),
            ("pipeline", _graph_run(n, provider=provider)),
        ):
            out.append(
                measure(
                    "W1",
                    "graph+trace",
                    impl,
                    size=n,
                    unit="node",
                    run=timed,
                    expected=n,
                    settings=settings,
                )
            )
    provider.shutdown()
    return out
