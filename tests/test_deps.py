"""Typed dependencies for tools: ``RunContext[Deps]``, ``Agent(deps_type=)``.

A tool whose first parameter is a ``RunContext[Deps]`` gets the run's
dependencies there; the parameter is not in its schema, and the
dependencies are never checkpointed, traced or put in events (a resumed
run gets the ones it is resumed with).
"""

from __future__ import annotations

import json

from collections.abc import Iterable
from pathlib import Path

import attrs
import pytest

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

from pipeline import Agent, Context, Message, Role, RunContext, run, tool
from pipeline.errors import ConstructionError, MissingDeps
from pipeline.events import Event, stream
from pipeline.graph import END, builder
from pipeline.stores import SQLiteStore
from pipeline.testing import Reply, ScriptedModel


MARK = "pw-5e1f0c-never-shown"  # what the dependencies hold


class Crash(BaseException):
    """The process dies here (nothing may catch it)."""


@attrs.define(repr=False)
class Db:
    """A stand-in database handle: rows, a password, the calls it saw."""

    label: str
    rows: dict[str, str]
    password: str = MARK
    crash_after: int | None = None  # calls it answers before dying
    seen: list[str] = attrs.Factory(list)

    def get(self, key: str) -> str:
        if self.crash_after is not None and len(self.seen) >= self.crash_after:
            raise Crash
        self.seen.append(key)
        return f"{self.label}:{self.rows.get(key, '?')}"

    def __repr__(self) -> str:  # the kind of repr a real handle might have
        return f"Db({self.label}, password={self.password})"


@tool
async def lookup(ctx: RunContext[Db], key: str) -> str:
    """Look a key up in the database.

    Args:
        key: the key
    """
    return ctx.deps.get(key)


@tool
def lookup_sync(ctx: RunContext[Db], key: str) -> str:
    """The same, from a plain function (it runs in a worker thread)."""
    return ctx.deps.get(key)


@tool
def add(a: int, b: int = 0) -> int:
    """Add two numbers."""
    return a + b


def ask(text: str = "what is k?") -> list[Message]:
    return [Message.user(text)]


def scripted(*keys: str, answer: str = "done") -> ScriptedModel:
    return ScriptedModel(
        *(Reply.tool_call("lookup", {"key": k}, call_id=k) for k in keys),
        Reply.text(answer),
    )


def results(messages: Iterable[Message]) -> list[str]:
    return [m.content for m in messages if m.role is Role.TOOL]


def files_in(folder: Path) -> bytes:
    """Every byte the store wrote (the database and its journal)."""
    return b"".join(p.read_bytes() for p in folder.iterdir())


# -- the tool -------------------------------------------------------------------


def test_the_context_is_not_in_the_schema() -> None:
    assert lookup.takes_deps
    assert not add.takes_deps
    assert lookup.parameters == {
        "type": "object",
        "properties": {"key": {"type": "string", "description": "the key"}},
        "required": ["key"],
        "additionalProperties": False,
    }
    assert "ctx" not in json.dumps(lookup.spec.parameters)


async def test_the_function_stays_callable() -> None:
    db = Db("t", {"k": "v"})
    assert await lookup.fn(RunContext(db), "k") == "t:v"
    assert lookup_sync.fn(RunContext(db), "k") == "t:v"
    assert add.fn(2, 3) == 5
    assert db.seen == ["k", "k"]


def test_a_context_must_come_first() -> None:
    def late(key: str, ctx: RunContext[Db]) -> str:
        return key

    with pytest.raises(ConstructionError, match=r"must come first \('ctx'"):
        tool(late)


async def test_a_tool_called_without_deps_raises() -> None:
    with pytest.raises(MissingDeps, match="'lookup'"):
        await lookup.call('{"key": "k"}')
    assert await add.call('{"a": 1}') == ("1", False)


def test_the_context_repr_hides_the_deps() -> None:
    assert MARK not in repr(RunContext(Db("t", {})))


# -- an agent's run --------------------------------------------------------------


async def test_run_gives_the_deps_to_the_tools() -> None:
    db = Db("prod", {"k": "v", "j": "w"})
    with scripted("k", "j") as model:
        agent = Agent("a", model, tools=[lookup, add], deps_type=Db)
        out = (await agent.run(ask(), deps=db)).unwrap()
    assert results(out.messages) == ["prod:v", "prod:w"]
    assert db.seen == ["k", "j"]


async def test_sync_tools_get_them_too() -> None:
    db = Db("prod", {"k": "v"})
    model = ScriptedModel(
        Reply.tool_call("lookup_sync", {"key": "k"}), Reply.text("ok")
    )
    agent = Agent("a", model, tools=[lookup_sync], deps_type=Db)
    out = (await agent.run(ask(), deps=db)).unwrap()
    assert results(out.messages) == ["prod:v"]


async def test_with_deps_binds_them_and_run_overrides() -> None:
    bound_db, given_db = Db("bound", {"k": "1"}), Db("given", {"k": "2"})
    model = ScriptedModel(
        Reply.tool_call("lookup", {"key": "k"}),
        Reply.text("one"),
        Reply.tool_call("lookup", {"key": "k"}),
        Reply.text("two"),
    )
    agent = Agent("a", model, tools=[lookup], deps_type=Db)
    bound = agent.with_deps(bound_db)
    first = (await bound.run(ask())).unwrap()
    second = (await bound.run(ask(), deps=given_db)).unwrap()
    assert results(first.messages) == ["bound:1"]
    assert results(second.messages) == ["given:2"]
    assert bound.name == agent.name
    with pytest.raises(MissingDeps):  # the agent itself is unchanged
        await agent.run(ask())


async def test_a_run_without_deps_fails_before_any_model_call() -> None:
    model = ScriptedModel(strict=False)
    agent = Agent("a", model, tools=[add, lookup], deps_type=Db)
    with pytest.raises(MissingDeps, match="'lookup'") as caught:
        await agent.run(ask())
    assert caught.value.tool == "lookup"
    assert model.requests == []


async def test_an_agent_without_deps_runs_as_before() -> None:
    model = ScriptedModel(
        Reply.tool_call("add", {"a": 2, "b": 3}), Reply.text("5")
    )
    out = (await Agent("a", model, tools=[add]).run(ask())).unwrap()
    assert results(out.messages) == ["5"]


async def test_a_bound_agent_is_a_handler() -> None:
    db = Db("h", {"k": "v"})
    with scripted("k") as model:
        agent = Agent("a", model, tools=[lookup], deps_type=Db)
        out = (await agent.with_deps(db)(Context.of(*ask()))).unwrap()
    assert results(out.messages) == ["h:v"]


# -- never traced, never in events -------------------------------------------------


async def test_deps_never_reach_a_span_or_an_event() -> None:
    db = Db("traced", {"k": "v"})
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with scripted("k") as model:
        agent = Agent("a", model, tools=[lookup], deps_type=Db).with_deps(db)
        done = await run(agent, Context.of(*ask()), tracer_provider=provider)
    assert results(done.result.unwrap().messages) == ["traced:v"]
    spans = exporter.get_finished_spans()
    assert "execute_tool lookup" in [s.name for s in spans]
    seen = [
        repr(
            (
                s.name,
                dict(s.attributes or {}),
                [e.attributes for e in s.events],
            )
        )
        for s in spans
    ]
    assert all(MARK not in text and "Db(" not in text for text in seen)
    provider.shutdown()

    events: list[Event] = []
    with scripted("k") as model:
        agent = Agent("a", model, tools=[lookup], deps_type=Db).with_deps(db)
        async with stream(agent, Context.of(*ask())) as flow:
            events.extend([e async for e in flow])
    assert len(events) > 2
    assert all(MARK not in repr(e) for e in events)


# -- checkpointed: not stored, a resumed run gets new ones -----------------------------


async def test_a_resumed_run_uses_the_new_deps(tmp_path: Path) -> None:
    """The second tool call dies with the first deps; the run resumes from
    SQLite with new deps, which the replayed turn's tool call gets.  The
    store never holds the dependencies."""
    path = tmp_path / "runs.db"
    model = ScriptedModel(
        Reply.tool_call("lookup", {"key": "a"}, call_id="c1"),
        Reply.tool_call("lookup", {"key": "b"}, call_id="c2"),
        Reply.tool_call("lookup", {"key": "b"}, call_id="c2"),  # replayed
        Reply.text("done"),
    )
    agent = Agent("desk", model, tools=[lookup], deps_type=Db)

    old = Db("old", {"a": "1", "b": "2"}, crash_after=1)
    g = (
        builder(Context)
        .node("desk", agent.with_deps(old))
        .entry("desk")
        .edge("desk", END)
        .build(name="desk")
    )
    with pytest.raises(Crash):
        async with SQLiteStore(path) as store:
            await g.run(Context.of(*ask()), store=store, thread_id="t1")
    assert old.seen == ["a"]

    new = Db("new", {"a": "1", "b": "2"}, password="other-" + MARK)
    g = (
        builder(Context)
        .node("desk", agent.with_deps(new))
        .entry("desk")
        .edge("desk", END)
        .build(name="desk")
    )
    async with SQLiteStore(path) as store:
        out = await g.resume(store, "t1")
    final = out.unwrap().state
    assert results(final.messages) == ["old:1", "new:2"]
    assert new.seen == ["b"]
    model.assert_consumed()
    stored = files_in(tmp_path)
    assert MARK.encode() not in stored
    assert b"Db(" not in stored
