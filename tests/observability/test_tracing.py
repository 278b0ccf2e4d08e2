"""OpenTelemetry spans from the SDK's in-memory exporter, one composition
form at a time: the tree of span names is the contract."""

from __future__ import annotations

import os
import subprocess
import sys

from collections.abc import Iterator, Sequence
from typing import Any

import anyio
import attrs
import pytest

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind, StatusCode
from returns.result import Failure, Result, Success

from pipeline import (
    Agent,
    Context,
    Graph,
    Message,
    Usage,
    graph,
    handler,
    map_reduce,
    run,
    scope,
    swarm,
    tool,
)
from pipeline.agents import as_tool
from pipeline.graph import END
from pipeline.middleware import trace as traced
from pipeline.testing import Reply, ScriptedModel


Tree = tuple[str, tuple[Any, ...]]


@attrs.frozen
class Traced:
    """A tracer provider of our own and what it exported."""

    provider: TracerProvider
    exporter: InMemorySpanExporter

    def spans(self) -> tuple[ReadableSpan, ...]:
        return self.exporter.get_finished_spans()

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.name.startswith(prefix)]

    def trees(self) -> list[Tree]:
        """Every root's tree of names; siblings sorted (branches race)."""
        spans = self.spans()
        children: dict[int | None, list[ReadableSpan]] = {}
        for s in spans:
            parent = s.parent.span_id if s.parent is not None else None
            children.setdefault(parent, []).append(s)

        def build(s: ReadableSpan) -> Tree:
            assert s.context is not None
            kids = children.get(s.context.span_id, [])
            return (s.name, tuple(sorted(build(k) for k in kids)))

        return sorted(build(s) for s in children.get(None, []))


@pytest.fixture(name="otel")
def _otel() -> Iterator[Traced]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield Traced(provider, exporter)
    provider.shutdown()


def answer(name: str, text: str = "ok", tokens: int = 3) -> Agent:
    """An agent answering once."""
    model = ScriptedModel(Reply.text(text, usage=Usage(tokens, 1)), name=name)
    return Agent(name, model)


@tool
async def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: one
        b: the other
    """
    return a + b


def calculator() -> Agent:
    """An agent that calls a tool, then answers."""
    model = ScriptedModel(
        Reply.tool_call("add", {"a": 1, "b": 2}),
        Reply.text("3", usage=Usage(10, 2)),
        name="calc",
    )
    return Agent("calc", model, tools=[add])


def leaf(name: str) -> Tree:
    return (name, ())


def agent_tree(name: str, *turns: Tree) -> Tree:
    return (f"invoke_agent {name}", tuple(sorted(turns)))


def turn(agent: str, *inside: Tree) -> Tree:
    return (f"turn {agent}", tuple(sorted(inside)))


def one_turn(agent: str, model: str) -> Tree:
    return agent_tree(agent, turn(agent, leaf(f"chat {model}")))


HI = Context.of(Message.user("hi"))


async def test_agent_turns_model_and_tool_calls(otel: Traced) -> None:
    """An agent is invoke_agent > turn > chat / execute_tool, under the run."""
    done = await run(calculator(), HI, tracer_provider=otel.provider)
    assert type(done.result) is Success
    assert otel.trees() == [
        (
            "run calc",
            (
                agent_tree(
                    "calc",
                    turn("calc", leaf("chat calc"), leaf("execute_tool add")),
                    turn("calc", leaf("chat calc")),
                ),
            ),
        )
    ]


async def test_genai_attributes(otel: Traced) -> None:
    """Model, tool and agent spans carry the GenAI semantic conventions."""
    await run(calculator(), HI, tracer_provider=otel.provider)
    chats = otel.named("chat ")
    assert [c.kind for c in chats] == [SpanKind.CLIENT, SpanKind.CLIENT]
    last = dict(chats[-1].attributes or {})
    assert last == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "scripted",
        "gen_ai.request.model": "calc",
        "gen_ai.response.finish_reasons": ("stop",),
        "gen_ai.usage.input_tokens": 10,
        "gen_ai.usage.output_tokens": 2,
    }
    first = dict(chats[0].attributes or {})
    assert first["gen_ai.response.finish_reasons"] == ("tool_calls",)
    (tool_span,) = otel.named("execute_tool")
    assert dict(tool_span.attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "add",
        "gen_ai.tool.call.id": "call_0",
        "gen_ai.tool.type": "function",
    }
    (agent_span,) = otel.named("invoke_agent")
    assert dict(agent_span.attributes or {}) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "calc",
    }
    (root,) = otel.named("run ")
    attributes = dict(root.attributes or {})
    assert attributes["gen_ai.usage.input_tokens"] == 11
    assert attributes["gen_ai.usage.output_tokens"] == 3
    assert attributes["pipeline.usage.model_calls"] == 2
    assert attributes["pipeline.usage.tool_calls"] == 1


async def test_sequence_both_and_race(otel: Traced) -> None:
    """>>, & and |: every branch's agent is a child of the run's span."""
    refusing = Agent(
        "d", ScriptedModel(Reply.error("no", status=400), name="d")
    )
    pipeline = (answer("a") >> (answer("b") & answer("c"))) | refusing
    done = await run(pipeline, HI, tracer_provider=otel.provider, name="p")
    assert type(done.result) is Success
    assert otel.trees() == [
        (
            "run p",
            tuple(sorted(one_turn(n, n) for n in ("a", "b", "c", "d"))),
        )
    ]
    (lost,) = otel.named("invoke_agent d")
    assert lost.status.status_code is StatusCode.ERROR


async def test_map_reduce_items_are_children(otel: Traced) -> None:
    """Each map_reduce worker's agent run is a child of the run span."""
    worker = answer("w")
    model = ScriptedModel(Reply.text("ok"), cycle=True, name="w")
    worker = Agent("w", model)

    def split(ctx: Context) -> list[Context]:
        return [ctx, ctx, ctx]

    def reduce(
        ctx: Context, results: tuple[Result[Context, Any], ...]
    ) -> Result[Context, Any]:
        return Success(ctx.append(Message.assistant(str(len(results)))))

    mr = map_reduce(split, worker, reduce, max_concurrency=2)
    await run(mr, HI, tracer_provider=otel.provider, name="mr")
    assert otel.trees() == [("run mr", (one_turn("w", "w"),) * 3)]


async def test_middleware_trace_spans_handlers(otel: Traced) -> None:
    """The trace middleware adds a span per child handler execution."""

    @handler(name="inc")
    async def inc(n: int) -> Result[int, str]:
        return Success(n + 1)

    @handler(name="bad")
    async def bad(n: int) -> Result[int, str]:
        return Failure(f"no {n}")

    chained = (inc >> inc >> bad).use(traced())
    done = await run(chained, 1, tracer_provider=otel.provider, name="c")
    assert done.result == Failure("no 3")
    assert otel.trees() == [
        (
            "run c",
            (leaf("handler bad"), leaf("handler inc"), leaf("handler inc")),
        )
    ]
    (failed,) = otel.named("handler bad")
    assert failed.status.status_code is StatusCode.ERROR
    assert dict(failed.attributes or {})["error.type"] == "str"
    (root,) = otel.named("run ")
    assert root.status.status_code is StatusCode.ERROR


@attrs.frozen
class Notes:
    """A graph state: what each node saw."""

    seen: tuple[str, ...] = ()


def graph_with_agents() -> Graph[Notes, Any]:
    @handler(name="start")
    async def start(s: Notes) -> Result[Notes, str]:
        return Success(attrs.evolve(s, seen=(*s.seen, "start")))

    def asked(name: str) -> Any:
        agent = answer(name)

        @handler(name=name)
        async def ask(s: Notes) -> Result[Notes, Any]:
            out = await agent.run((Message.user("go"),))
            if type(out) is not Success:
                return Failure(out.failure())
            return Success(Notes((name,)))

        return ask

    return (
        graph.builder(Notes)
        .node("start", start)
        .node("x", asked("x"))
        .node("y", asked("y"))
        .node("end", start)
        .entry("start")
        .fan_out("start", ["x", "y"], join="end", merge=_merge)
        .edge("end", END)
        .build(name="g")
    )


def _merge(base: Notes, outs: Sequence[Notes]) -> Notes:
    return Notes(tuple(n for o in outs for n in o.seen))


async def test_graph_nodes_and_fan_out(otel: Traced) -> None:
    """A graph is a span; each step a node span; fan-out branches nest."""
    done = await run(
        graph_with_agents(), Notes(), tracer_provider=otel.provider
    )
    assert done.result == Success(Notes(("x", "y", "start")))
    assert otel.trees() == [
        (
            "run g",
            (
                (
                    "graph g",
                    (
                        leaf("node end"),
                        leaf("node start"),
                        (
                            "node x,y",
                            (
                                ("branch x", (one_turn("x", "x"),)),
                                ("branch y", (one_turn("y", "y"),)),
                            ),
                        ),
                    ),
                ),
            ),
        )
    ]
    (fan,) = otel.named("node x,y")
    assert dict(fan.attributes or {}) == {
        "pipeline.node": ("x", "y"),
        "pipeline.step": 2,
    }


async def test_failing_branch_is_marked(otel: Traced) -> None:
    """A fan-out branch that fails marks its branch, node and graph spans."""

    @handler(name="ok")
    async def fine(s: Notes) -> Result[Notes, str]:
        return Success(s)

    @handler(name="bad")
    async def bad(s: Notes) -> Result[Notes, str]:
        return Failure("no")

    g = (
        graph.builder(Notes)
        .node("start", fine)
        .node("x", fine)
        .node("y", bad)
        .node("end", fine)
        .entry("start")
        .fan_out("start", ["x", "y"], join="end", merge=_merge)
        .edge("end", END)
        .build(name="g")
    )
    done = await run(g, Notes(), tracer_provider=otel.provider)
    assert type(done.result) is Failure
    status = {s.name: s.status.status_code for s in otel.spans()}
    assert status["branch y"] is StatusCode.ERROR
    assert status["node x,y"] is StatusCode.ERROR
    assert status["graph g"] is StatusCode.ERROR
    assert status["branch x"] is not StatusCode.ERROR
    assert status["node start"] is not StatusCode.ERROR


async def test_swarm_handoff(otel: Traced) -> None:
    """A swarm's steps are nodes; a handoff is a span in the next step."""
    front = ScriptedModel(Reply.tool_call("transfer_to_back"), name="front")
    back = ScriptedModel(Reply.text("done"), name="back")
    team = (
        swarm.builder()
        .agent("front", Agent("front", front), handoffs=["back"])
        .agent("back", Agent("back", back))
        .entry("front")
        .build(name="team")
    )
    done = await run(team, HI, tracer_provider=otel.provider)
    assert type(done.result) is Success
    assert otel.trees() == [
        (
            "run team",
            (
                (
                    "swarm team",
                    (
                        (
                            "node back",
                            (leaf("handoff back"), one_turn("back", "back")),
                        ),
                        ("node front", (one_turn("front", "front"),)),
                    ),
                ),
            ),
        )
    ]
    (hand,) = otel.named("handoff")
    assert dict(hand.attributes or {}) == {
        "pipeline.handoff.source": "front",
        "pipeline.handoff.target": "back",
        "pipeline.handoff.count": 1,
    }


async def test_agent_as_tool_nests_under_the_tool_call(otel: Traced) -> None:
    """An agent used as a tool runs inside its execute_tool span."""
    helper = answer("helper")
    boss_model = ScriptedModel(
        Reply.tool_call("helper", {"prompt": "help"}),
        Reply.text("thanks"),
        name="boss",
    )
    boss = Agent("boss", boss_model, tools=[as_tool(helper)])
    await run(boss, HI, tracer_provider=otel.provider)
    assert otel.trees() == [
        (
            "run boss",
            (
                agent_tree(
                    "boss",
                    turn(
                        "boss",
                        leaf("chat boss"),
                        (
                            "execute_tool helper",
                            (one_turn("helper", "helper"),),
                        ),
                    ),
                    turn("boss", leaf("chat boss")),
                ),
            ),
        )
    ]


async def test_failures_mark_spans_with_their_type(otel: Traced) -> None:
    """A model failure marks the chat, turn, agent and run spans failed."""
    model = ScriptedModel(Reply.error("boom", status=500), name="m")
    done = await run(Agent("a", model), HI, tracer_provider=otel.provider)
    assert type(done.result) is Failure
    for span in otel.spans():
        assert span.status.status_code is StatusCode.ERROR, span.name
        assert dict(span.attributes or {})["error.type"] == "ModelError"
        assert "boom" not in (span.status.description or "")


async def test_cancellation_is_recorded_and_propagates(otel: Traced) -> None:
    """A cancelled run's spans end, failed with the cancellation's type."""

    @handler(name="slow")
    async def slow(n: int) -> Result[int, str]:
        await anyio.sleep_forever()
        return Success(n)  # pragma: no cover

    with anyio.move_on_after(0.01):
        await run(slow.use(traced()), 1, tracer_provider=otel.provider)
    spans = otel.spans()
    assert [s.name for s in spans] == ["handler slow", "run slow"]
    for span in spans:
        assert span.status.status_code is StatusCode.ERROR


async def test_no_scope_no_spans_and_no_global_provider(
    otel: Traced,
) -> None:
    """Without a scope nothing is traced; the global provider is never set."""
    before = trace.get_tracer_provider()
    await calculator()(HI)
    assert otel.spans() == ()
    with scope(tracer_provider=otel.provider, name="s"):
        await answer("a")(HI)
    assert trace.get_tracer_provider() is before
    assert [s.name for s in otel.spans()][-1] == "run s"


async def test_nested_scope_keeps_tracing(otel: Traced) -> None:
    """A scope without a provider inside a traced one still traces."""
    with scope(tracer_provider=otel.provider, name="outer"):
        with scope(name="inner") as inner:
            await answer("a")(HI)
        assert inner.usage.model_calls == 1
    assert otel.trees() == [
        ("run outer", (("run inner", (one_turn("a", "a"),)),))
    ]


@pytest.fixture(name="global_otel")
def _global_otel(otel: Traced, monkeypatch: pytest.MonkeyPatch) -> Traced:
    """*otel*'s provider set as OpenTelemetry's global one, for this test
    only (the API sets it once per process: its guard is put back after)."""
    once = type(trace._TRACER_PROVIDER_SET_ONCE)()  # reset
    monkeypatch.setattr(trace, "_TRACER_PROVIDER_SET_ONCE", once)
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)
    trace.set_tracer_provider(otel.provider)
    assert trace.get_tracer_provider() is otel.provider
    return otel


async def test_the_global_provider_traces_a_run(global_otel: Traced) -> None:
    """With no provider given, a run traces with the global one."""
    done = await run(calculator(), HI)
    assert done.result.unwrap().last is not None
    assert global_otel.trees() == [
        (
            "run calc",
            (
                agent_tree(
                    "calc",
                    turn("calc", leaf("chat calc"), leaf("execute_tool add")),
                    turn("calc", leaf("chat calc")),
                ),
            ),
        )
    ]


async def test_the_global_provider_traces_a_scope(global_otel: Traced) -> None:
    """``scope()`` alone traces with the global provider, nested scopes
    included."""
    with scope(name="outer") as outer:
        assert outer.tracing is not None
        with scope(name="inner") as inner:
            assert inner.tracing is outer.tracing
            await answer("a")(HI)
    assert global_otel.trees() == [
        ("run outer", (("run inner", (one_turn("a", "a"),)),))
    ]


async def test_an_explicit_provider_wins_over_the_global_one(
    global_otel: Traced,
) -> None:
    """A provider passed in gets every span; the global one gets none."""
    mine = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(mine))
    await run(answer("a"), HI, tracer_provider=provider)
    with scope(tracer_provider=provider, name="s"), scope(name="inner"):
        await answer("b")(HI)
    provider.shutdown()
    assert global_otel.spans() == ()
    assert [s.name for s in mine.get_finished_spans()] == [
        "chat a",
        "turn a",
        "invoke_agent a",
        "run a",
        "chat b",
        "turn b",
        "invoke_agent b",
        "run inner",
        "run s",
    ]


async def test_a_new_global_provider_is_seen_by_the_next_run(
    global_otel: Traced, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The global provider is looked up per scope, not once per process."""
    await run(answer("a"), HI)
    later = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(later))
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)
    await run(answer("b"), HI)
    provider.shutdown()
    assert [s.name for s in global_otel.named("run")] == ["run a"]
    assert [s.name for s in later.get_finished_spans()][-1] == "run b"


async def test_the_no_op_provider_is_untraced(otel: Traced) -> None:
    """With only the API's no-op provider, a scope has no tracing at all
    (the untraced path, decided once per scope)."""
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    with scope(name="s") as opened:
        assert opened.tracing is None
        await answer("a")(HI)
    assert otel.spans() == ()


def test_an_untraced_run_does_not_import_opentelemetry() -> None:
    """No provider given and none set: the API is never imported."""
    code = (
        "import sys, anyio\n"
        "from returns.result import Success\n"
        "from pipeline import handler, run\n"
        "@handler\n"
        "async def one(n: int):\n"
        "    return Success(n)\n"
        "done = anyio.run(run, one, 1)\n"
        "print(done.result, sorted(m for m in sys.modules"
        " if m.startswith('opentelemetry')))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    out = subprocess.run(  # noqa: S603  # our own interpreter
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout
    assert out.strip() == "<Success: 1> []"


async def test_the_global_provider_traces_entry_points_without_a_scope(
    global_otel: Traced,
) -> None:
    """``Agent.run``, ``Graph.run`` and ``resume`` called outside any scope
    open one of their own when a global provider is set (what a
    ``logfire.configure()`` user calls); a graph called as a handler on
    its own does not (documented: wrap it in a scope)."""
    from pipeline import stores  # noqa: PLC0415

    done = await answer("a").run([Message.user("hi")])
    assert done.unwrap().messages
    assert [s.name for s in global_otel.named("run")] == ["run a"]

    @handler(name="bump")
    async def bump(ctx: Context) -> Result[Context, str]:
        return Success(ctx.set("n", 1))

    g = (
        graph.builder(Context)
        .node("bump", bump)
        .entry("bump")
        .edge("bump", END)
        .build(name="g")
    )
    store = stores.MemoryStore()
    ran = await g.run(HI, store=store, thread_id="t")
    assert ran.unwrap().done
    again = await g.resume(store, "t")
    assert again.unwrap().done
    runs = [s.name for s in global_otel.named("run")]
    assert runs == ["run a", "run g", "run g"]
    assert "node bump" in [s.name for s in global_otel.spans()]

    before = len(global_otel.spans())
    await g(HI)  # a graph called as a handler, on its own: not traced
    assert len(global_otel.spans()) == before
