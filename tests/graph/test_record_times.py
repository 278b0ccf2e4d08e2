"""Who and when: every record's commit time, author and fork origin; the
history the CLI prints from them."""

from __future__ import annotations

import io
import json

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import attrs
import pytest

from pipeline import Agent, Graph, ToolCall, events, fold, graph, stores, tool
from pipeline._serde import make_converter
from pipeline.cli import _output as out
from pipeline.cli._events import JsonLines
from pipeline.errors import InvalidAnswer
from pipeline.failures import CheckpointDecodeError
from pipeline.fold._codec import CLOCK
from pipeline.graph import END
from pipeline.stores import Record, record_checksum
from pipeline.testing import Reply, ScriptedModel
from tests.graph.helpers import Counted, step
from tests.graph.test_agent_nodes import Ticket, keep, see
from tests.servers import StoreFactory


T0 = 1_796_300_000.0


def linear(n: int) -> Graph[Counted, str]:
    b: graph.GraphBuilder[Counted, str] = graph.builder(Counted)
    for i in range(n):
        b = b.node(f"n{i}", step(f"n{i}"))
    b = b.entry("n0")
    for i in range(n - 1):
        b = b.edge(f"n{i}", f"n{i + 1}")
    return b.edge(f"n{n - 1}", END).build(version="1")


@pytest.fixture
def ticking() -> Iterator[list[float]]:
    """A commit clock that moves 1.25 s per record; yields what it read."""
    seen: list[float] = []

    def clock() -> float:
        seen.append(T0 + 1.25 * len(seen))
        return seen[-1]

    token = CLOCK.set(clock)
    yield seen
    CLOCK.reset(token)


def utc(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


async def test_records_carry_time_and_forks_their_origin(
    make_store: StoreFactory, ticking: list[float]
) -> None:
    """Every record read back from every store has the time it was
    committed; a fork names its source thread and version, and keeps it."""
    g = linear(3)
    async with make_store() as store:
        await g.run(Counted(), store=store, thread_id="t")
        snaps = (await g.history(store, "t")).unwrap()
        assert [s.committed_at for s in snaps] == [utc(t) for t in ticking]
        assert all(s.origin is None and s.author == "" for s in snaps)

        forked = (
            await g.fork(store, "t", version=1, new_thread_id="f")
        ).unwrap()
        assert forked.origin == ("t", 1)
        await g.resume(store, "f")
        fork_history = (await g.history(store, "f")).unwrap()
        assert [s.origin for s in fork_history] == [("t", 1)] * len(
            fork_history
        )
        assert fork_history[0].committed_at == utc(ticking[len(snaps)])
        assert fork_history[-1].committed_at == utc(ticking[-1])
        assert (await g.load(store, "f")).unwrap().origin == ("t", 1)

        rows = out.history_rows(fork_history)
        assert rows[0]["origin"] == {"thread": "t", "version": 1}
        assert rows[0]["at"] == out.when(utc(ticking[len(snaps)]))
        assert rows[0]["duration"] is None  # no parent in this thread
        assert [r["duration"] for r in rows[1:]] == [1.25] * (len(rows) - 1)
        assert out.history_cells(rows[0])[1] == "fork of t@1"


def _rewritten(record: Record, change: Any) -> Record:
    """*record* with its document changed and its checksum made right."""
    doc = json.loads(record.data)
    change(doc)
    data = json.dumps(doc, separators=(",", ":")).encode()
    return attrs.evolve(
        record,
        data=data,
        checksum=record_checksum(
            record.thread_id, record.version, record.parent, data
        ),
    )


async def _copy(
    source: stores.CheckpointStore,
    target: stores.CheckpointStore,
    change: Any,
) -> None:
    for record in await source.records("t"):
        await target.commit(
            _rewritten(record, change),
            expected_head=None if record.version == 0 else record.version - 1,
        )


async def test_records_written_before_times_read_as_unknown(
    make_store: StoreFactory,
) -> None:
    """A thread written before records carried their time still loads, its
    times unknown (``None``; ``?`` in the history table)."""
    g = linear(2)
    scratch = stores.MemoryStore()
    await g.run(Counted(), store=scratch, thread_id="t")
    async with make_store() as store:
        await _copy(scratch, store, lambda doc: doc.pop("at"))
        snaps = (await g.history(store, "t")).unwrap()
        assert [s.committed_at for s in snaps] == [None] * len(snaps)
        rows = out.history_rows(snaps)
        assert [r["at"] for r in rows] == [None] * len(rows)
        assert out.history_cells(rows[1])[2] == "?"
        done = (await g.load(store, "t")).unwrap()
        assert done.done
        assert done.committed_at is None


async def test_the_checksum_covers_the_time() -> None:
    """A record whose time was changed, checksum left alone, fails it."""
    g = linear(2)
    store = stores.MemoryStore()
    await g.run(Counted(), store=store, thread_id="t")
    first = (await store.records("t"))[0]
    doc = json.loads(first.data)
    doc["at"] += 1
    tampered = attrs.evolve(
        first, data=json.dumps(doc, separators=(",", ":")).encode()
    )
    assert not g.codec.intact(tampered)
    assert g.codec.intact(first)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("at", "yesterday"),
        ("at", 10**20),
        ("by", 7),
        ("from", ["t"]),
        ("from", [1, 2]),
        ("from", ["t", -1]),
    ],
)
async def test_malformed_time_author_or_origin_is_a_decode_error(
    key: str, value: object
) -> None:
    """A time, author or origin of the wrong shape is named, not shown."""
    g = linear(2)
    scratch = stores.MemoryStore()
    await g.run(Counted(), store=scratch, thread_id="t")
    store = stores.MemoryStore()
    await _copy(scratch, store, lambda doc: doc.__setitem__(key, value))
    loaded = await g.load(store, "t", version=0)
    error = loaded.failure()
    assert isinstance(error, CheckpointDecodeError)
    assert str(value) not in error.location


def test_author_is_stored_and_read_back() -> None:
    """An author (of an answer, an edit) goes into the record and back."""
    g = linear(1)
    first = fold.Snapshot.first("t", Counted(), ("n0",), g.fingerprint)
    record = g.codec.encode(attrs.evolve(first, author="ana@example"), None)
    doc = g.codec.parse(record).unwrap()
    assert doc["by"] == "ana@example"
    snap = g.codec.decode([(record, doc)]).unwrap()
    assert snap.author == "ana@example"


def test_nested_records_show_their_path() -> None:
    """A progress record inside a step shows node -> branch -> fold ->
    step instead of the node again; a step's record shows its node."""
    base = fold.Snapshot.first("t", Counted(), ("research",), "fp")
    progress = attrs.evolve(
        base,
        version=1,
        parent=0,
        progress={
            "b:web/f:researcher#0@d1": (
                {"v": 1, "next": ["model"], "node": None},
                {"v": 1, "next": ["tools"], "node": "model"},
            )
        },
    )
    more = attrs.evolve(
        progress,
        version=2,
        parent=1,
        progress={
            **progress.progress,
            "b:web/f:researcher#0@d1/f:lookup#1": (
                {"v": 1, "next": ["model"]},
                {"v": 1, "next": []},
            ),
        },
    )
    after = base.successor(Counted(1), "research", ())
    after = attrs.evolve(after, version=3, parent=2)
    rows = out.history_rows([base, progress, more, after])
    assert [r["path"] for r in rows] == [
        [],
        ["research", "branch web", "researcher", "model"],
        ["research", "branch web", "researcher", "lookup #1", "model"],
        ["research"],
    ]
    assert out.history_cells(rows[1])[5] == (
        "research → branch web → researcher → model"
    )


@tool
async def lookup(q: str) -> str:
    """Look *q* up."""
    return f"found {q}"


async def test_an_agent_nodes_turns_show_as_turns_and_tools() -> None:
    """A real agent node's progress records read node -> turn -> tool."""
    model = ScriptedModel(
        Reply.tool_call("lookup", {"q": "x"}), Reply.text("done")
    )
    g = (
        graph.builder(Ticket)
        .agent(
            "triage",
            Agent("triage", model, tools=[lookup]),
            messages=see,
            update=keep,
        )
        .entry("triage")
        .edge("triage", END)
        .build()
    )
    store = stores.MemoryStore()
    await g.run(Ticket(), store=store, thread_id="t")
    rows = out.history_rows((await g.history(store, "t")).unwrap())
    assert [" → ".join(r["path"]) for r in rows] == [
        "",
        "triage → turn 1 → tool lookup",
        "triage → turn 2",
        "triage",
    ]
    assert [r["node"] for r in rows].count("triage") == 1


def test_piped_tables_have_a_header(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Piped, a table is TSV with a header row; no cell breaks a row."""
    out.table("t", ("a", "b"), [[1, "x\ty\nz"], [None, 2]])
    assert capsys.readouterr().out.splitlines() == [
        "a\tb",
        "1\tx y z",
        "\t2",
    ]


async def test_json_event_lines_carry_time_and_duration() -> None:
    """Each ``--json`` line has ``at``; a node's and a tool call's end have
    ``duration`` since their start (clocks injected: nothing waits)."""
    ticks = iter([10.0, 10.5, 12.0, 12.25])
    buffer = io.StringIO()
    lines = JsonLines(
        make_converter(),
        buffer,
        wall=lambda: T0,
        ticks=lambda: next(ticks),
    )
    call = ToolCall("c1", "lookup")
    await lines.event(events.NodeStarted(("n0",), 1))
    await lines.event(events.ToolCallStarted("a", call))
    await lines.event(events.ToolCallFinished("a", call, "ok", False))
    await lines.event(events.NodeFinished(("n0",), 1))
    await lines.event(events.Interrupted("ship?"))
    docs = [json.loads(line) for line in buffer.getvalue().splitlines()]
    stamp = out.when(utc(T0))
    assert [d["at"] for d in docs] == [stamp] * 5
    assert [d.get("duration") for d in docs] == [None, None, 1.5, 2.25, None]


async def ask_before_n1(t: fold.Transition[Counted]) -> fold.Decision:
    if t.targets != ("n1",) or t.answer is not None:
        return fold.Continue()
    return fold.Interrupt("go on?")


async def test_an_answer_names_its_author(make_store: StoreFactory) -> None:
    """The record that stores an answer names who answered, on every
    store; the run's own records name nobody."""
    g = linear(2)
    async with make_store() as store:
        paused = await g.run(
            Counted(), store=store, thread_id="t", gates=[ask_before_n1]
        )
        assert paused.unwrap().status is fold.Status.INTERRUPTED
        done = await g.resume(
            store, "t", answer="yes", author="ana", gates=[ask_before_n1]
        )
        assert done.unwrap().done
        snaps = (await g.history(store, "t")).unwrap()
    authors = [s.author for s in snaps]
    assert authors.count("ana") == 1
    answered = snaps[authors.index("ana")]
    assert answered.pending is not None
    assert answered.pending.answered


async def decline_or_insist(t: fold.Transition[Counted]) -> fold.Decision:
    if t.targets != ("n1",):
        return fold.Continue()
    if t.answer is None:
        return fold.Interrupt("go on?")
    if t.answer_as(bool):
        return fold.Continue()
    return fold.Stop("declined")


async def test_the_runs_stop_after_an_answer_names_nobody(
    make_store: StoreFactory,
) -> None:
    """After an answer, the record the run commits itself (the stop
    after a declined one) names nobody: only the answer's record names who
    answered (a refused answer writes nothing)."""
    g = linear(2)
    async with make_store() as store:
        await g.run(
            Counted(), store=store, thread_id="t", gates=[decline_or_insist]
        )
        head = await store.head("t")
        with pytest.raises(InvalidAnswer):
            await g.resume(
                store,
                "t",
                answer="maybe",
                author="bo",
                gates=[decline_or_insist],
            )
        assert await store.head("t") == head  # a refused answer: no record
        again = (await g.load(store, "t")).unwrap()
        assert again.status is fold.Status.INTERRUPTED
        assert again.author == ""
        stopped = await g.resume(
            store, "t", answer=False, author="ana", gates=[decline_or_insist]
        )
        assert stopped.unwrap().status is fold.Status.STOPPED
        snaps = (await g.history(store, "t")).unwrap()
    assert [s.author for s in snaps[-3:]] == ["", "ana", ""]
    assert "bo" not in [s.author for s in snaps]
    assert snaps[-1].status is fold.Status.STOPPED


@pytest.mark.parametrize(
    ("author", "error", "says"),
    [
        (7, TypeError, "author must be a str, not a int"),
        ("x" * 257, ValueError, "257 characters, not at most 256"),
        ("a\x00b", ValueError, "it holds NUL"),
        ("\ud800", ValueError, "lone surrogate"),
    ],
)
async def test_a_bad_author_is_refused(
    author: Any, error: type[Exception], says: str
) -> None:
    g = linear(1)
    store = stores.MemoryStore()
    await g.run(Counted(), store=store, thread_id="t")
    with pytest.raises(error, match=says):
        await g.resume(store, "t", answer="yes", author=author)
