"""The record format: what a store's thread leaves out of its records
(schema 2: the fingerprint and step its parent implies), and threads the
previous release wrote (schema 1) still loading and resuming."""

from __future__ import annotations

import json

from collections.abc import Iterator
from typing import Any

import attrs
import pytest

from hypothesis import given
from hypothesis import strategies as st
from pyrsistent import pvector
from returns.result import Success

from pipeline import fold, graph, stores
from pipeline.failures import CheckpointDecodeError
from pipeline.fold._codec import CLOCK, Codec, check_document
from pipeline.stores import Record, record_checksum
from tests.graph.helpers import Counted
from tests.graph.test_checkpoints import linear as _linear
from tests.graph.test_record_times import T0, linear
from tests.servers import StoreFactory


FP = "51cb190c1462b43e/edges=bbcc588e/entry=8294f000/nodes=9a9d9370/version=391552c0"
"""``linear(3)``'s fingerprint (its shape: node names, edges, version)."""

# Thread "t" as the previous release wrote it (``linear(3)`` run on
# ``Counted()`` at T0), byte for byte with its checksums: every record holds
# its fingerprint and step.
OLD = [
    (
        None,
        '{"at":1796300000000,"fp":"' + FP + '","logs":{"trail":[0,[]]},'
        '"next":["n0"],"state":{"count":0,"note":""},"step":0,"v":1}',
        "a0ace4ed1f30559b98076601174585c399db637c1f6e1ed6b1ba983854b985f0",
    ),
    (
        0,
        '{"at":1796300000000,"fp":"' + FP + '","logs":{"trail":[0,["n0"]]},'
        '"next":["n1"],"state":{"count":1},"step":1,"v":1}',
        "e200b2ac461de258b19f45473fece287b2ac705628426ab355ac0a605b91fb15",
    ),
    (
        1,
        '{"at":1796300000000,"fp":"' + FP + '","logs":{"trail":[1,["n1"]]},'
        '"next":["n2"],"state":{"count":2},"step":2,"v":1}',
        "0f7a0fc3b91f26dbf56195b470c8a2f4a189e0ab4105a994c413025e0cb3e707",
    ),
    (
        2,
        '{"at":1796300000000,"fp":"' + FP + '","logs":{"trail":[2,["n2"]]},'
        '"next":[],"state":{"count":3},"status":"done","step":3,"v":1}',
        "bdd584357c6e6c81785b1645357cb9e0833083014ab2ad3f25411ee741b3a051",
    ),
]


@pytest.fixture
def at_t0() -> Iterator[None]:
    """Records stamped at T0, as the old ones were."""
    token = CLOCK.set(lambda: T0)
    yield
    CLOCK.reset(token)


async def _write_old(store: stores.CheckpointStore, upto: int) -> None:
    for version, (parent, text, checksum) in enumerate(OLD[:upto]):
        record = Record("t", version, parent, text.encode(), checksum)
        await store.commit(record, expected_head=parent)


def _seen(snap: fold.Snapshot[Any]) -> tuple[Any, ...]:
    return (
        snap.version,
        snap.parent,
        snap.state,
        snap.node,
        snap.next,
        snap.step,
        snap.fingerprint,
        snap.status,
        snap.committed_at,
    )


def test_the_old_records_are_what_the_previous_release_wrote() -> None:
    """The fixture is intact: right checksums, schema 1, this graph's
    fingerprint."""
    assert linear(3).fingerprint == FP
    for version, (parent, text, checksum) in enumerate(OLD):
        data = text.encode()
        assert record_checksum("t", version, parent, data) == checksum
        assert json.loads(data)["v"] == 1


async def test_a_thread_the_previous_release_wrote_loads_and_resumes(
    make_store: StoreFactory, at_t0: None
) -> None:
    """Schema 1 records load in every store; a thread cut short after two
    of them resumes, its new records (schema 2) leave out what the old
    ones imply, and the mixed chain reads back as one run."""
    del at_t0
    g = linear(3)
    fresh = stores.MemoryStore()
    await g.run(Counted(), store=fresh, thread_id="t")
    expected = [_seen(s) for s in (await g.history(fresh, "t")).unwrap()]
    async with make_store() as store:
        await _write_old(store, len(OLD))
        old = (await g.history(store, "t")).unwrap()
        assert [_seen(s) for s in old] == expected
        assert (await g.load(store, "t")).unwrap().done
        await store.delete("t")
        await _write_old(store, 2)  # the writer died after version 1
        done = (await g.resume(store, "t")).unwrap()
        assert done.done
        assert done.state == Counted(3, pvector(["n0", "n1", "n2"]))
        mixed = (await g.history(store, "t")).unwrap()
        assert [_seen(s) for s in mixed] == expected
        records = await store.records("t")
        assert [r.data for r in records[:2]] == [
            t.encode() for _, t, _ in OLD[:2]
        ]
        for r in records[2:]:
            doc = json.loads(r.data)
            assert doc["v"] == 2
            assert "fp" not in doc
            assert "step" not in doc
        # Resumed again (nothing left to run): the same end.
        assert _seen((await g.resume(store, "t")).unwrap()) == expected[-1]


async def test_a_thread_leaves_out_what_the_parent_implies() -> None:
    """Only a thread's first record holds the fingerprint and the step;
    the next ones inherit them, and read back the same."""
    g = linear(3)
    store = stores.MemoryStore()
    await g.run(Counted(), store=store, thread_id="t")
    docs = [json.loads(r.data) for r in await store.records("t")]
    assert [("fp" in d, "step" in d) for d in docs] == [
        (True, True),
        (False, False),
        (False, False),
        (False, False),
    ]
    snaps = (await g.history(store, "t")).unwrap()
    assert [s.step for s in snaps] == [0, 1, 2, 3]
    assert {s.fingerprint for s in snaps} == {g.fingerprint}


async def test_a_migration_stores_its_fingerprint_and_state() -> None:
    """After a migration the next record holds the new fingerprint (and
    the migrated state): the thread reloads under the new graph, and
    resumes without the migration."""
    old, new = _linear(version="1"), _linear(version="2")
    store = stores.MemoryStore()
    limits = graph.GraphLimits(max_steps=2)
    await old.run(Counted(), store=store, thread_id="t", limits=limits)

    def migrate(s: fold.Snapshot[Counted]) -> fold.Snapshot[Counted]:
        return attrs.evolve(s, state=attrs.evolve(s.state, note="moved"))

    # (The limit stopped the thread at version 3: go on from version 2.)
    moved = (await new.resume(store, "t", version=2, migrate=migrate)).unwrap()
    assert moved.fingerprint == new.fingerprint
    assert moved.state.note == "moved"
    loaded = (await new.load(store, "t")).unwrap()
    assert _seen(loaded)[:-1] == _seen(moved)[:-1]
    after = json.loads((await store.records("t"))[4].data)
    assert after["fp"] == new.fingerprint
    assert after["state"]["note"] == "moved"
    again = await new.resume(store, "t", version=5)
    assert _seen(again.unwrap())[2:-1] == _seen(moved)[2:-1]


@pytest.mark.parametrize("key", ["fp", "step"])
def test_a_first_record_without_its_envelope_is_a_decode_error(
    key: str,
) -> None:
    """A chain's first record has no parent to inherit from: without its
    fingerprint or step it does not decode (named, not shown)."""
    g = linear(2)
    first = fold.Snapshot.first("t", Counted(), ("n0",), g.fingerprint)
    doc = g.codec.document(first, None)
    del doc[key]
    assert type(check_document(doc)) is Success
    out = g.codec.rebuild([doc], "t", 0, None)
    assert out.failure() == CheckpointDecodeError(
        f"$.{key}", "missing or of the wrong type"
    )


@pytest.mark.parametrize("key", ["fp", "step"])
def test_schema_1_records_still_need_their_envelope(key: str) -> None:
    """Schema 1 records always held fingerprint and step: one without is
    malformed, as before."""
    doc = json.loads(OLD[1][1])
    del doc[key]
    assert check_document(doc).failure() == CheckpointDecodeError(
        f"$.{key}", "missing or of the wrong type"
    )


@pytest.mark.parametrize("schema", [0, 3, True, 1.0, [1], "2", None])
def test_an_unknown_schema_is_refused(schema: object) -> None:
    doc = json.loads(OLD[1][1])
    doc["v"] = schema
    assert check_document(doc).failure() == CheckpointDecodeError(
        "$.v", "unknown schema"
    )


_FPS = ("a/x=1", "b/x=2", "c/x=3")
_CODEC: Codec[Counted] = Codec(Counted)


@given(
    st.lists(
        st.tuples(
            st.sampled_from(_FPS),
            st.integers(-1, 3),
            st.integers(0, 5),
            st.booleans(),
        ),
        max_size=12,
    )
)
def test_inheriting_reads_back_as_writing_everything(
    moves: list[tuple[str, int, int, bool]],
) -> None:
    """Property: a chain written leaving out what each parent implies
    decodes, record by record, to the snapshots written, exactly as the
    same chain written whole (schema 1's way) does."""
    snap = fold.Snapshot.first("t", Counted(), ("n",), _FPS[0])
    chain = [snap]
    for fp, dstep, count, grow in moves:
        state = attrs.evolve(
            snap.state,
            count=count,
            trail=snap.state.trail.append("x") if grow else snap.state.trail,
        )
        snap = attrs.evolve(
            snap.successor(state, "n", ("n",), fingerprint=fp),
            step=max(0, snap.step + dstep),
        )
        chain.append(snap)
    token = CLOCK.set(lambda: T0)
    try:
        for inherit in (True, False):
            acc = None
            parent = None
            for live in chain:
                sealed = _CODEC.seal(live, parent, inherit=inherit)
                assert isinstance(sealed, tuple)
                record = Record(
                    live.thread_id,
                    live.version,
                    live.parent,
                    sealed[1],
                    record_checksum(
                        live.thread_id, live.version, live.parent, sealed[1]
                    ),
                )
                doc = _CODEC.parse(record).unwrap()
                if inherit and parent is not None:
                    assert ("fp" in doc) == (
                        live.fingerprint != parent.fingerprint
                    )
                    assert ("step" in doc) == (live.step != parent.step + 1)
                step = _CODEC.advance(acc, doc)
                assert not isinstance(step, CheckpointDecodeError)
                acc = step
                back = _CODEC.snapshot(
                    acc, live.thread_id, live.version, live.parent
                ).unwrap()
                assert _seen(back)[:-1] == _seen(live)[:-1]
                if parent is not None:
                    # A delta applied to its live parent (as a Temporal
                    # workflow does) reads back the same.
                    applied = _CODEC.apply(
                        parent, sealed[0], live.version, live.parent
                    ).unwrap()
                    assert _seen(applied)[:-1] == _seen(live)[:-1]
                parent = live
    finally:
        CLOCK.reset(token)
