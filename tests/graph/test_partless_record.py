"""A record whose new values cannot reach a part (messages without parts,
usage, scalars) is written without a blob sink: it must be the record the
general path writes, byte for byte, and refuse what that path refuses; a
message with a part, a long log or a value of another kind takes the
general path."""

from __future__ import annotations

from typing import Any

import attrs

from hypothesis import given
from hypothesis import strategies as st
from pyrsistent import PVector, pvector

from pipeline import Context, ImagePart, Message, ToolCall, Usage, fold
from pipeline._serde import BLOB_MIN, canonical, make_converter
from pipeline._turns import Turns
from pipeline.failures import InvalidState
from pipeline.fold._codec import Codec
from tests.graph.test_plain_record import seal_both


class _Text(str):
    """A text that compares equal to a ``str`` but does not come back as
    one: a record holding it must be refused."""

    __slots__ = ()


_BIG = ImagePart(data=b"\x89" * BLOB_MIN, media_type="image/png")
_SMALL = ImagePart(data=b"\x89" * 3, media_type="image/png")

_texts = st.text(max_size=4)
_contents = st.one_of(
    _texts,
    st.just("\ud800"),  # a lone surrogate: cannot be written
    _texts.map(_Text),  # does not read back as itself
)
_messages = st.builds(
    lambda role, content, calls, usage, agent, parts: Message(
        role=role,
        content=content if not parts else "",
        tool_calls=tuple(ToolCall(i, "f", a) for i, a in calls),
        usage=usage,
        agent=agent,
        parts=parts,
    ),
    st.sampled_from(["user", "assistant", "tool"]),
    _contents,
    st.lists(st.tuples(_texts, _texts), max_size=2),
    st.none() | st.builds(Usage, st.integers(0, 9), st.integers(0, 9)),
    st.none() | _texts,
    st.just(()) | st.sampled_from([(_BIG,), (_SMALL,), ("hi", _BIG)]),
)
_usages = st.builds(
    Usage,
    st.integers(0, 9) | st.booleans() | st.just(2**70),
    st.integers(0, 9),
)


@attrs.frozen
class Mixed:
    """Messages, usage, a count, and a field that may hold anything."""

    messages: PVector[Message] = attrs.field(factory=pvector)
    usage: Usage = Usage()
    turns: int = 0
    anything: Any = None


_ANY = st.none() | st.integers() | st.just(_BIG) | st.lists(st.integers())


def _same(one: object, other: object) -> None:
    """The same document and bytes, or the same refusal."""
    assert type(one) is type(other)
    if isinstance(one, InvalidState):
        assert isinstance(other, InvalidState)
        assert (one.field, one.reason) == (other.field, other.reason)
    else:
        assert one == other


_TURNS_FAST: Codec[Turns] = Codec(Turns)
_TURNS_SLOW: Codec[Turns] = Codec(Turns)
_MIXED_FAST: Codec[Mixed] = Codec(Mixed)
_MIXED_SLOW: Codec[Mixed] = Codec(Mixed)


@given(
    before=st.lists(_messages, max_size=3),
    added=st.lists(_messages, max_size=10),
    usage=_usages,
    turns=st.integers(0, 3),
    inherit=st.booleans(),
)
def test_an_agent_turn_record_is_the_general_one(
    before: list[Message],
    added: list[Message],
    usage: Usage,
    turns: int,
    inherit: bool,
) -> None:
    """Property: an agent's turn record (its new messages, usage, count)
    sealed without a sink where none can be reached is the record the
    general path seals, or the same refusal (a lone surrogate, a text
    that does not read back as a ``str``, a ``bool`` or too large
    count); a message with a part or more than a few new messages take
    the general path, and the codec keeps trying for the next record."""
    first = fold.Snapshot.first("t", Turns(pvector(before)), ("a",), "f")
    state = Turns(pvector(before + added), usage, turns)
    nxt = first.successor(state, "a", ("a",))
    one, other = seal_both(_TURNS_FAST, _TURNS_SLOW, nxt, first, inherit)
    _same(one, other)
    assert _TURNS_FAST._plain  # messages, usage and ints: always tried
    new_blob = any(_BIG in m.parts for m in added) and not any(
        _BIG in m.parts for m in before
    )
    if isinstance(one, tuple):  # a part stored once per chain
        assert ("blobs" in one[0]) == new_blob


@given(
    before=st.lists(_messages, max_size=2),
    added=st.lists(_messages, max_size=3),
    usage=_usages,
    anything=_ANY,
    changed=st.booleans(),
    inherit=st.booleans(),
)
def test_a_record_of_another_kind_stops_the_tries(
    before: list[Message],
    added: list[Message],
    usage: Usage,
    anything: object,
    changed: bool,
    inherit: bool,
) -> None:
    """Property: with a field that may hold anything, the two paths still
    seal the same; the codec stops trying the plain way exactly when a
    changed value is of a kind whose hook may reach a part (a list, a
    part) and no earlier field stopped this record's try, and a root
    record never makes it stop."""
    start = Mixed(pvector(before))
    first = fold.Snapshot.first("t", start, ("a",), "f")
    state = Mixed(
        pvector(before + added),
        usage,
        1,
        anything if changed else None,
    )
    nxt = first.successor(state, "a", ("a",))
    root_one, root_other = seal_both(
        _MIXED_FAST, _MIXED_SLOW, first, None, inherit
    )
    _same(root_one, root_other)
    assert _MIXED_FAST._plain
    one, other = seal_both(_MIXED_FAST, _MIXED_SLOW, nxt, first, inherit)
    _same(one, other)
    other_kind = changed and type(anything) not in {int, type(None)}
    # The log comes first: a message with a part stops this record's try
    # before the other field is looked at.
    stopped = any(m.parts for m in added)
    assert _MIXED_FAST._plain == (stopped or not other_kind)


def test_a_value_that_does_not_read_back_is_refused() -> None:
    """The check still runs on a record written without a sink: a text
    that cannot be written, and a ``bool`` or a ``float`` where a count
    is, are refused, naming the field."""
    codec: Codec[Turns] = Codec(Turns)
    first = fold.Snapshot.first("t", Turns(), ("a",), "f")
    odd = Message.user("\ud800")
    nxt = first.successor(Turns(pvector([odd])), "a", ("a",))
    refused = codec.seal(nxt, first)
    assert isinstance(refused, InvalidState)
    assert refused.field == "messages"
    assert codec._plain  # tried, and refused
    for count in (True, 1.5):
        wrong = Turns(usage=Usage(count, 0))  # type: ignore[arg-type]
        refused = codec.seal(first.successor(wrong, "a", ("a",)), first)
        assert isinstance(refused, InvalidState)
        assert refused.field == "usage"
        assert codec._plain
    used = Message.assistant("x", usage=Usage(True, 0))
    wrong_turn = Turns(pvector([used]))
    refused = codec.seal(first.successor(wrong_turn, "a", ("a",)), first)
    assert isinstance(refused, InvalidState)
    assert refused.field == "messages[0]"


def test_a_context_record_of_one_message() -> None:
    """A graph's record of one new message is written without a sink, the
    same as the general path's."""
    fast: Codec[Context] = Codec(Context)
    slow: Codec[Context] = Codec(Context)
    ctx = Context.of(Message.user("go"), run_id="r")
    first = fold.Snapshot.first("t", ctx, ("n",), "f")
    nxt = first.successor(ctx.append(Message.assistant("x")), "n", ("n",))
    _same(*seal_both(fast, slow, first, None, True))
    assert fast._with_blobs(nxt, first, None, True)[1] is None
    _same(*seal_both(fast, slow, nxt, first, True))


_CONV = make_converter()
_GENERATED_USAGE = _CONV.gen_unstructure_attrs_fromdict(Usage)


@given(usage=_usages)
def test_usage_is_written_as_cattrs_writes_it(usage: Usage) -> None:
    """The direct usage hook writes what cattrs' generated hook writes."""
    written = _CONV.unstructure(usage)
    assert written == _GENERATED_USAGE(usage)
    assert canonical(written) == canonical(_GENERATED_USAGE(usage))


@given(message=_messages)
def test_a_message_is_written_as_before(message: Message) -> None:
    """A message with or without tool calls is written with the same keys
    and values (calls as a list, empty when there are none)."""
    written = _CONV.unstructure(message)
    assert written["tool_calls"] == [
        {"id": c.id, "name": c.name, "arguments": c.arguments}
        for c in message.tool_calls
    ]
    assert type(written["tool_calls"]) is list
    assert written["usage"] == (
        None if message.usage is None else _CONV.unstructure(message.usage)
    )
