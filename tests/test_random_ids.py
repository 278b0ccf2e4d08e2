"""Run and thread ids are written as ``uuid.uuid4().hex`` writes them,
without building the ``UUID``: the same text for the same bytes."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from pipeline import Context, Message
from pipeline._context import hex_id, random_id


@given(raw=st.binary(min_size=16, max_size=16))
def test_hex_id_is_uuid4_hex(raw: bytes) -> None:
    """The same 16 bytes give uuid's own text: version and variant set."""
    assert hex_id(raw) == uuid.UUID(bytes=raw, version=4).hex


def test_new_ids_are_version_4_and_differ() -> None:
    """A context's run id and a fresh id: 32 hex digits a UUID reads back
    as version 4, never the same twice."""
    ids = [random_id() for _ in range(50)]
    ids.append(Context.of(Message.user("x")).run_id)
    assert len(set(ids)) == len(ids)
    for each in ids:
        assert len(each) == 32
        parsed = uuid.UUID(hex=each)
        assert parsed.version == 4
        assert parsed.variant == uuid.RFC_4122
        assert parsed.hex == each
