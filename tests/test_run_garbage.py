"""A checkpointed run leaves no reference cycle behind: its store, journal
and records are freed as the run ends, not by the garbage collector (whose
collections a cycle a run feeds; see docs/performance.md)."""

from __future__ import annotations

import gc
import weakref

from collections.abc import Iterator

import pytest

from pipeline import Agent, Context, Message, graph, stores, tool
from pipeline.testing import Reply, ScriptedModel


@tool
async def echo(text: str) -> str:
    """Return the text."""
    return text


@pytest.fixture
def no_collector() -> Iterator[None]:
    """The cyclic garbage collector off (only reference counts free)."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@pytest.mark.usefixtures("no_collector")
async def test_a_checkpointed_agent_run_frees_its_store_by_itself() -> None:
    model = ScriptedModel(
        Reply.tool_call("echo", {"text": "hi"}), Reply.text("done")
    )
    agent = Agent("a", model, tools=[echo], max_turns=3)
    g = (
        graph.builder(Context)
        .node("a", agent)
        .entry("a")
        .edge("a", graph.END)
        .build()
    )
    store = stores.MemoryStore()
    freed = weakref.ref(store)
    out = await g.run(
        Context.of(Message.user("go")), store=store, thread_id="t"
    )
    assert out.unwrap().done
    assert len(await store.records("t")) == 4
    del store
    assert freed() is None
