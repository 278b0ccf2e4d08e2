"""SignedStore: records written without the key are refused on reading.

(The conformance suite runs a SignedStore over SQLite as one of its stores.)
"""

from __future__ import annotations

import json
import sqlite3

from contextlib import closing
from pathlib import Path

import pytest

from pipeline import graph, stores
from pipeline.events import CheckpointSkipped, FoldEvent
from pipeline.failures import CheckpointDecodeError
from pipeline.stores import record_checksum
from tests.graph.helpers import Counted
from tests.graph.test_checkpoints import linear


KEY = b"0123456789abcdef0123456789abcdef"


def _forge(db: Path, version: int, count: int) -> None:
    """What someone with write access to the file but not the key can do:
    change a record and give it a valid plain checksum."""
    # closing(): the connection's own `with` commits but does not close
    # it (Python 3.13 warns about the connection left open).
    with closing(sqlite3.connect(db)) as conn, conn:
        (data,) = conn.execute(
            "SELECT data FROM checkpoints WHERE thread_id='t' AND version=?",
            (version,),
        ).fetchone()
        doc = json.loads(data)
        # (A record holds the fields that changed: a stop record, none.)
        doc.setdefault("state", {})["count"] = count
        forged = json.dumps(doc, sort_keys=True).encode()
        (parent,) = conn.execute(
            "SELECT parent FROM checkpoints WHERE thread_id='t' AND version=?",
            (version,),
        ).fetchone()
        conn.execute(
            "UPDATE checkpoints SET data=?, checksum=? "
            "WHERE thread_id='t' AND version=?",
            (forged, record_checksum("t", version, parent, forged), version),
        )


async def test_a_forged_record_is_refused(tmp_path: Path) -> None:
    """A record rewritten with a valid plain checksum is refused by the
    signed store, in the middle of a thread; the plain store accepts the
    same forgery (its checksum is no defence against one)."""
    g = linear(4)
    for signed in (True, False):
        db = tmp_path / f"{signed}.db"
        async with stores.SQLiteStore(db) as inner:
            store = stores.SignedStore(inner, key=KEY) if signed else inner
            await g.run(Counted(), store=store, thread_id="t")
        _forge(db, 2, 1000)
        async with stores.SQLiteStore(db) as inner:
            store = stores.SignedStore(inner, key=KEY) if signed else inner
            two = await g.load(store, "t", version=2)
            whole = await g.history(store, "t")
            if signed:
                assert isinstance(two.failure(), CheckpointDecodeError)
                assert isinstance(whole.failure(), CheckpointDecodeError)
                assert "checksum" in str(whole.failure())
                one = (await g.load(store, "t", version=1)).unwrap()
                assert one.state.count == 1
            else:
                assert two.unwrap().state.count == 1000
                assert len(whole.unwrap()) == 5


async def test_a_forged_last_record_is_skipped_and_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The last record failing its signature is treated as torn: skipped,
    with a CheckpointSkipped event; resume goes on from the one before."""
    g = linear(4)
    expected = (await g.run(Counted())).unwrap().state
    db = tmp_path / "signed.db"
    limits = graph.GraphLimits(max_steps=2)
    async with stores.SQLiteStore(db) as inner:
        signed = stores.SignedStore(inner, key=KEY)
        await g.run(Counted(), store=signed, thread_id="t", limits=limits)
        head = await inner.head("t")
    assert head is not None
    _forge(db, head, 1000)
    async with stores.SQLiteStore(db) as inner:
        signed = stores.SignedStore(inner, key=KEY)
        loaded = (await g.load(signed, "t")).unwrap()
        assert loaded.version == head - 1
        events: list[FoldEvent] = []

        async def sink(e: FoldEvent) -> None:
            events.append(e)

        done = (await g.resume(signed, "t", on_event=sink)).unwrap()
        assert done.state == expected
    skipped = [e for e in events if isinstance(e, CheckpointSkipped)]
    assert [(e.thread_id, e.version) for e in skipped] == [("t", head)]
    assert "skipping its last record" in caplog.text


async def test_records_signed_with_another_key_are_refused() -> None:
    """A store holds records under one key: another key refuses them all,
    and so does reading them unsigned."""
    g = linear(3)
    inner = stores.MemoryStore()
    await g.run(
        Counted(), store=stores.SignedStore(inner, key=KEY), thread_id="t"
    )
    other = stores.SignedStore(inner, key=b"another key, 16+ bytes")
    assert isinstance(
        (await g.history(other, "t")).failure(), CheckpointDecodeError
    )
    assert isinstance(
        (await g.history(inner, "t")).failure(), CheckpointDecodeError
    )
    same = stores.SignedStore(inner, key=KEY)
    assert len((await g.history(same, "t")).unwrap()) == 4


@pytest.mark.parametrize("key", [b"", b"short key", "a str key"])
def test_a_weak_key_is_refused_without_showing_it(key: object) -> None:
    """Keys shorter than 16 bytes (or not bytes) are a ValueError that does
    not contain the key; the repr never shows the key."""
    with pytest.raises(ValueError, match="at least 16 bytes") as info:
        stores.SignedStore(stores.MemoryStore(), key=key)  # type: ignore[arg-type]
    if key:
        assert str(key) not in str(info.value)
    store = stores.SignedStore(stores.MemoryStore(), key=KEY)
    assert KEY.decode() not in repr(store)
    assert "hidden" in repr(store)
