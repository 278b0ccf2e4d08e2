"""Checkpoints: resume, fork, fingerprints, torn records, fuzzing, races."""

from __future__ import annotations

import contextlib
import json
import sys

from pathlib import Path
from typing import Any

import anyio
import attrs
import pytest

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyrsistent import pvector
from returns.result import Failure, Result, Success

from pipeline import (
    Context,
    Graph,
    Message,
    fold,
    graph,
    handler,
    stores,
)
from pipeline.failures import (
    CheckpointDecodeError,
    IncompatibleGraph,
    SnapshotNotFound,
)
from pipeline.graph import END
from pipeline.stores import Lease, Record, record_checksum
from tests.graph.helpers import Counted, DelegatingStore, step
from tests.stores import CommitResult


def linear(n: int = 6, version: str = "1") -> Graph[Counted, str]:
    b: graph.GraphBuilder[Counted, str] = graph.builder(Counted)
    for i in range(n):
        b = b.node(f"n{i}", step(f"n{i}"))
    b = b.entry("n0")
    for i in range(n - 1):
        b = b.edge(f"n{i}", f"n{i + 1}")
    return b.edge(f"n{n - 1}", END).build(version=version)


async def test_every_checkpoint_resumes_to_the_same_end(
    tmp_path: Path,
) -> None:
    """Resuming from any version gives the uninterrupted run's final state."""
    g = linear()
    expected = (await g.run(Counted())).unwrap().state
    async with stores.SQLiteStore(tmp_path / "c.db") as store:
        await g.run(Counted(), store=store, thread_id="t")
        for v in range(7):
            fork = (
                await g.fork(store, "t", version=v, new_thread_id=f"f{v}")
            ).unwrap()
            done = (await g.resume(store, fork.thread_id)).unwrap()
            assert done.state == expected
        assert [
            s.version for s in (await g.history(store, "t")).unwrap()
        ] == list(range(7))


async def test_fork_never_changes_its_parent() -> None:
    """Forking and running the fork leaves the original records as they were."""
    g = linear()
    store = stores.MemoryStore()
    await g.run(Counted(), store=store, thread_id="t")
    before = list(await store.records("t"))
    fork = (await g.fork(store, "t", version=2)).unwrap()
    await g.resume(store, fork.thread_id)
    assert list(await store.records("t")) == before


async def test_resume_from_older_version_branches_within_thread() -> None:
    """Time travel inside a thread adds records; old ones stay."""
    g = linear(4)
    store = stores.MemoryStore()
    await g.run(Counted(), store=store, thread_id="t")
    before = list(await store.records("t"))
    done = (await g.resume(store, "t", version=1)).unwrap()
    assert done.state.count == 4
    after = list(await store.records("t"))
    assert after[: len(before)] == before
    assert after[len(before)].parent == 1


async def test_incompatible_graph_refused_unless_migrated() -> None:
    """A changed fingerprint refuses to resume; a migration makes it go."""
    old, new = linear(version="1"), linear(version="2")
    store = stores.MemoryStore()
    await old.run(
        Counted(),
        store=store,
        thread_id="t",
        limits=graph.GraphLimits(max_steps=2),
    )
    out = await new.resume(store, "t")
    assert out == Failure(IncompatibleGraph(old.fingerprint, new.fingerprint))
    # (The limit stopped the thread at version 3: go on from version 2.)
    migrated = await new.resume(store, "t", version=2, migrate=lambda s: s)
    assert migrated.unwrap().state.count == 6
    assert migrated.unwrap().fingerprint == new.fingerprint


async def test_missing_thread() -> None:
    """Loading or resuming an unknown thread is SnapshotNotFound."""
    g = linear()
    store = stores.MemoryStore()
    assert await g.resume(store, "nope") == Failure(
        SnapshotNotFound("nope", None)
    )
    await g.run(Counted(), store=store, thread_id="t")
    assert await g.load(store, "t", version=99) == Failure(
        SnapshotNotFound("t", 99)
    )


class _Crash(Exception):
    """The writer dies (raised in place of a commit)."""


class Tamper(DelegatingStore):
    """A store wrapper that damages what it commits from a chosen version."""

    def __init__(
        self,
        inner: stores.MemoryStore,
        damage: Any,
        last: int | None = None,
    ) -> None:
        super().__init__(inner)
        self.damage = damage
        self.last = last  # commits after this version crash the writer

    async def commit(
        self,
        record: Record,
        *,
        expected_head: int | None,
        lease: Lease | None = None,
    ) -> CommitResult:
        if self.last is not None and record.version > self.last:
            raise _Crash
        return await self.inner.commit(
            self.damage(record), expected_head=expected_head, lease=lease
        )


@pytest.mark.slow
@given(cut=st.integers(0, 10_000), flip=st.booleans(), data=st.data())
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
async def test_torn_or_flipped_last_record_falls_back(
    cut: int, flip: bool, data: st.DataObject
) -> None:
    """A damaged last write is rejected; the previous version resumes."""
    g = linear(4)
    expected = (await g.run(Counted())).unwrap().state
    victim = data.draw(st.integers(1, 4), label="damaged version")

    def damage(r: Record) -> Record:
        if r.version != victim:
            return r
        if flip:
            i = cut % len(r.data)
            torn = r.data[:i] + bytes([r.data[i] ^ 0x40]) + r.data[i + 1 :]
        else:
            torn = r.data[: cut % len(r.data)]
        return attrs.evolve(r, data=torn)

    store = stores.MemoryStore()
    # The process dies right after the damaged write (if anything follows).
    with contextlib.suppress(_Crash):
        await g.run(
            Counted(), store=Tamper(store, damage, victim), thread_id="t"
        )
    head = (await g.load(store, "t")).unwrap()
    assert head.version == victim - 1  # the torn record was skipped
    done = (await g.resume(store, "t")).unwrap()
    assert done.state == expected


def _record_of(data: bytes) -> Record:
    return Record("t", 0, None, data, record_checksum("t", 0, None, data))


@given(data=st.binary(max_size=400))
async def test_fuzzed_bytes_only_give_decode_errors(data: bytes) -> None:
    """Random bytes (with a valid checksum) decode or fail typed, nothing else."""
    store = stores.MemoryStore()
    await store.commit(_record_of(data), expected_head=None)
    out = await linear().load(store, "t")
    assert isinstance(out.failure(), CheckpointDecodeError)


def _valid_doc() -> dict[str, Any]:
    return {
        "schema": 1,
        "thread": "t",
        "version": 0,
        "parent": None,
        "fingerprint": linear().fingerprint,
        "node": None,
        "next": ["n0"],
        "join": None,
        "step": 0,
        "status": "running",
        "pending": None,
        "state": {"count": 0, "note": ""},
        "logs": {"trail": {"base": 0, "items": []}},
    }


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


@pytest.mark.slow
@given(
    path=st.sampled_from(
        [
            "state.count",
            "state.note",
            "state",
            "logs.trail.items",
            "logs.trail.base",
            "next",
            "status",
            "pending",
            "node",
            "step",
        ]
    ),
    value=json_values,
)
async def test_structure_aware_mutations_are_typed(
    path: str, value: Any
) -> None:
    """Type confusion anywhere in a record gives CheckpointDecodeError."""
    doc = _valid_doc()
    *parents, last = path.split(".")
    node = doc
    for key in parents:
        node = node[key]
    node[last] = value
    data = json.dumps(doc).encode()
    store = stores.MemoryStore()
    await store.commit(_record_of(data), expected_head=None)
    out = await linear().load(store, "t")
    if isinstance(out, Success):  # the mutation happened to be well-typed
        snap = out.unwrap()
        assert isinstance(snap.state, Counted)
        assert all(isinstance(t, str) for t in snap.state.trail)
    else:
        assert isinstance(out.failure(), CheckpointDecodeError)


GADGETS = [
    b"\x80\x04\x95\x1d\x00\x00\x00\x00\x00\x00\x00\x8c\x02os\x8c\x06system\x93\x8c\x02id\x85R.",
    b'{"lc":2,"type":"constructor","id":["os","system"],"kwargs":{}}',
    b'!!python/object/apply:os.system ["id"]',
    b'{"__class__":"os.system","__init_subclass__":1}',
    json.dumps(
        {
            **_valid_doc(),
            "state": {"count": 0, "note": "", "__class__": "os.system"},
        }
    ).encode(),
    json.dumps(
        {
            **_valid_doc(),
            "state": {"py/reduce": [{"py/function": "os.system"}, ["id"]]},
        }
    ).encode(),
    b"[" * 100_000 + b"]" * 100_000,
]


@pytest.mark.parametrize("payload", GADGETS)
async def test_gadgets_are_rejected_without_side_effects(
    payload: bytes,
) -> None:
    """Deserialisation gadgets are refused and trigger no imports or execs."""
    events: list[str] = []
    watched = {
        "import",
        "exec",
        "compile",
        "os.system",
        "subprocess.Popen",
        "pickle.find_class",
        "ctypes.dlopen",
    }

    def hook(event: str, _args: tuple[object, ...]) -> None:
        if event in watched:
            events.append(event)

    store = stores.MemoryStore()
    await store.commit(_record_of(payload), expected_head=None)
    g = linear()
    sys.addaudithook(hook)  # audit hooks cannot be removed; the list is local
    events.clear()
    out = await g.load(store, "t")
    recorded = list(events)
    watched.clear()  # stop recording for the rest of the session
    assert isinstance(out.failure(), CheckpointDecodeError)
    assert recorded == []


async def test_misplaced_records_are_rejected() -> None:
    """A valid record copied to another thread or version fails its checksum."""
    g = linear(3)
    store = stores.MemoryStore()
    await g.run(Counted(), store=store, thread_id="a")
    good = (await store.records("a"))[0]
    await store.commit(attrs.evolve(good, thread_id="b"), expected_head=None)
    out = await g.load(store, "b")
    assert isinstance(out.failure(), CheckpointDecodeError)
    assert "checksum" in str(out.failure())


@pytest.mark.slow
async def test_hundred_concurrent_resumers_lose_no_update() -> None:
    """100 resumers race on one thread; with retry, every update lands."""

    @handler
    async def bump(ctx: Context) -> Result[Context, str]:
        await anyio.lowlevel.checkpoint()
        return Success(ctx.set("n", int(str(ctx.metadata.get("n", 0))) + 1))

    g = (
        graph.builder(Context)
        .node("bump", bump)
        .entry("bump")
        .edge("bump", END)
        .build()
    )
    store = stores.MemoryStore()
    first = (await g.run(Context(), store=store, thread_id="t")).unwrap()
    assert first.state.metadata["n"] == 1
    conflicts: list[int] = []

    async def resumer() -> None:
        while True:
            head = (await g.load(store, "t")).unwrap()
            # Re-open the finished run for one more bump: a new step from head.
            again = attrs.evolve(
                head, next=("bump",), status=fold.Status.RUNNING
            )
            stepped = (await g.step(again)).unwrap()
            new = attrs.evolve(
                stepped, version=head.version + 1, parent=head.version
            )
            r = await store.commit(
                g.codec.encode(new, head), expected_head=head.version
            )
            if isinstance(r, Success):
                return
            conflicts.append(1)

    async with anyio.create_task_group() as tg:
        for _ in range(100):
            tg.start_soon(resumer)
    final = (await g.load(store, "t")).unwrap()
    assert final.state.metadata["n"] == 101
    assert final.version == 101  # admission (0), the first run (1), 100 more
    assert conflicts  # the race was real


@pytest.mark.slow
async def test_history_is_stored_as_deltas(tmp_path: Path) -> None:
    """Bytes per step stay flat as the message history grows."""

    @handler
    async def say(ctx: Context) -> Result[Context, str]:
        n = len(ctx.messages)
        return Success(
            ctx.append(Message.assistant(f"message number {n:06d}"))
        )

    g = (
        graph.builder(Context)
        .node("say", say)
        .entry("say")
        .route(
            "say",
            lambda c: "say" if len(c.messages) < 1000 else END,
            to=["say", END],
        )
        .build()
    )
    async with stores.SQLiteStore(
        tmp_path / "h.db", synchronous="OFF"
    ) as store:
        out = (
            await g.run(
                Context(),
                store=store,
                thread_id="t",
                limits=graph.GraphLimits(max_steps=2000),
            )
        ).unwrap()
        sizes = [len(r.data) for r in await store.records("t")]
        reloaded = (await g.load(store, "t")).unwrap()
    assert len(out.state.messages) == 1000
    assert reloaded.state == out.state
    steady = sizes[1:-1]  # the first and last records carry more
    assert max(steady) - min(steady) < 16  # flat: only the new message
    log_bytes = sum(len(m.content) + 40 for m in out.state.messages)
    assert sum(sizes) < 10 * log_bytes


@attrs.frozen
class Items:
    """A state with a persistent-vector field that nodes may edit."""

    items: Any = attrs.field(factory=lambda: pvector(["draft", "b", "c"]))


async def test_an_edited_vector_element_is_checkpointed() -> None:
    """Replacing an element of a vector field (same length, or then
    appending) is what load and resume see, not the old element."""

    @handler
    async def edit(s: Items) -> Result[Items, str]:
        return Success(Items(s.items.set(0, "FINAL")))

    @handler
    async def more(s: Items) -> Result[Items, str]:
        return Success(Items(s.items.set(1, "B!").append("d")))

    g = (
        graph.builder(Items)
        .node("edit", edit)
        .node("more", more)
        .entry("edit")
        .edge("edit", "more")
        .edge("more", END)
        .build()
    )
    store = stores.MemoryStore()
    ran = (await g.run(Items(), store=store, thread_id="t")).unwrap()
    assert list(ran.state.items) == ["FINAL", "B!", "c", "d"]
    for snap in (await g.history(store, "t")).unwrap()[1:]:
        assert snap.state.items[0] == "FINAL"
    assert (await g.load(store, "t")).unwrap().state == ran.state


async def test_a_redacted_message_stays_redacted_in_the_checkpoint() -> None:
    """A node that rewrites an earlier message of a context (a redaction)
    is checkpointed as rewritten, though the history kept its length."""

    @handler
    async def redact(ctx: Context) -> Result[Context, str]:
        return Success(
            ctx.with_messages(ctx.messages.set(0, Message.user("[redacted]")))
        )

    @handler
    async def reply(ctx: Context) -> Result[Context, str]:
        return Success(ctx.append(Message.assistant("ok")))

    g = (
        graph.builder(Context)
        .node("redact", redact)
        .node("reply", reply)
        .entry("redact")
        .edge("redact", "reply")
        .edge("reply", END)
        .build()
    )
    store = stores.MemoryStore()
    card = "card 4111-1111-1111-1111"
    start = Context.of(Message.user(card), Message.assistant("noted"))
    ran = (await g.run(start, store=store, thread_id="t")).unwrap()
    loaded = (await g.load(store, "t")).unwrap()
    assert [m.content for m in loaded.state.messages] == [
        "[redacted]",
        "noted",
        "ok",
    ]
    assert loaded.state == ran.state
