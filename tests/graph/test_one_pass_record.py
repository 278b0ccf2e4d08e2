"""A record whose changed fields are all logs that grew by items a fused
writer proves, values one proves, or strict scalars of their exact type is
written in one pass with nothing left to check (``Codec.document_proved``):
it must be the record the general way writes and checks, byte for byte,
and anything else (a ``bool`` in a count, a ``str`` subclass, a text
orjson refuses, a log rewritten, a field of another kind) must go the
general way, to the same record or the same refusal."""

from __future__ import annotations

import math

from typing import Any

import attrs

from hypothesis import given
from hypothesis import strategies as st
from pyrsistent import PVector, pvector

from pipeline import Context, Message, ToolCall, Usage, fold
from pipeline._fields import APPEND_ONLY
from pipeline._serde import make_converter, proven_message, proven_usage
from pipeline._turns import Turns
from pipeline.failures import InvalidState
from pipeline.fold._codec import Codec
from tests.graph.test_partless_record import _same
from tests.graph.test_proven_record import _clock


class _Text(str):
    """Equal to a ``str``, not one."""

    __slots__ = ()


class _Int(int):
    """Equal to an ``int``, not one."""


@attrs.frozen
class Mixed:
    """One field of each kind the one-pass writer knows, and two it does
    not (a mapping; a float, whose strict hook refuses infinities)."""

    trail: PVector[Message] = attrs.field(
        factory=pvector, metadata={APPEND_ONLY: True}
    )
    seen: PVector[Message] = attrs.field(factory=pvector)  # not trusted
    usage: Usage = Usage()
    count: int = 0
    flag: bool = False
    note: str = ""
    extra: dict[str, int] = attrs.field(factory=dict)
    ratio: float = 0.0


_texts = st.text(max_size=4)
_odd_texts = st.one_of(
    _texts,
    st.just("\ud800"),  # a lone surrogate: orjson refuses it
    _texts.map(_Text),
)
_counts = st.one_of(
    st.integers(0, 9),
    st.integers(-(2**63), 2**64 - 1),
    st.just(2**70),  # past 64 bits: orjson refuses it
    st.booleans(),
    st.integers(0, 9).map(_Int),
    st.just(1.0),
)
_messages = st.builds(
    lambda role, content, calls, usage: Message(
        role=role,
        content=content,
        tool_calls=tuple(ToolCall(i, "f", a) for i, a in calls),
        usage=usage,
    ),
    st.sampled_from(["user", "assistant", "tool"]),
    _odd_texts,
    st.lists(st.tuples(_texts, _texts), max_size=2),
    st.none() | st.builds(Usage, st.integers(0, 9), st.integers(0, 9)),
)
_usages = st.builds(Usage, _counts, st.integers(0, 9))


def _forced(cls: type[Any], **values: Any) -> Any:
    """An instance of frozen *cls* holding *values* as they are (attrs
    checks nothing: a field may hold anything at run time)."""
    base = cls()  # every field's default
    out = object.__new__(cls)
    for f in attrs.fields(cls):
        value = values.get(f.name, getattr(base, f.name))
        object.__setattr__(out, f.name, value)
    return out


def _general(state_type: type[Any]) -> Codec[Any]:
    """A codec that never writes a record in one pass."""
    codec: Codec[Any] = Codec(state_type)
    codec._one_pass = ()
    return codec


_ONE_PASS: Codec[Mixed] = Codec(Mixed)
_GENERAL: Codec[Mixed] = _general(Mixed)


@st.composite
def _changes(draw: st.DrawFn) -> tuple[Mixed, Mixed]:
    """A state and the next one: some fields changed (to odd values too),
    some left as they were (the same object, or an equal one)."""
    trail = draw(st.lists(_messages, max_size=3))
    seen = draw(st.lists(_messages, max_size=3))
    before = Mixed(
        pvector(trail), pvector(seen), Usage(1, 2), 3, False, "n", {"a": 1}
    )
    after: dict[str, Any] = {
        f.name: getattr(before, f.name) for f in attrs.fields(Mixed)
    }
    for name in draw(st.sets(st.sampled_from(sorted(after)))):
        after[name] = draw(
            {
                # Grown (the same items first), rewritten, or shrunk.
                "trail": st.lists(_messages, max_size=4).map(
                    before.trail.extend
                )
                | st.lists(_messages, max_size=2).map(pvector)
                | st.just(before.trail[:1]),
                "seen": st.lists(_messages, max_size=4).map(before.seen.extend)
                | st.lists(_messages, max_size=2).map(pvector),
                "usage": _usages | st.just(Usage(1, 2)),
                "count": _counts | st.just(3),
                "flag": st.booleans() | st.just(0) | st.just(1),
                "note": _odd_texts | st.just("n") | st.just(1),
                "extra": st.dictionaries(
                    _texts, st.integers(0, 9), max_size=2
                ),
                "ratio": st.just(0.0) | st.just(math.inf) | st.floats(0, 1),
            }[name]
        )
    return before, _forced(Mixed, **after)


@given(_changes(), st.booleans(), st.booleans(), st.booleans())
def test_a_record_written_in_one_pass_is_the_general_one(
    change: tuple[Mixed, Mixed], inherit: bool, encode: bool, memo: bool
) -> None:
    """Property: a record sealed by a codec that writes in one pass where
    it can is the record (document and bytes) a codec that never does
    seals and checks, or the same refusal (field and reason)."""
    before, after = change
    first = fold.Snapshot.first("t", before, ("a",), "f")
    nxt = first.successor(after, "a", ("a",))
    with _clock():
        one = _ONE_PASS.seal(
            nxt,
            first,
            None,
            inherit=inherit,
            encode=encode,
            memo={} if memo else None,
        )
        other = _GENERAL.seal(nxt, first, None, inherit=inherit, encode=encode)
    _same(one, other)


@given(_changes(), st.booleans())
def test_one_pass_writes_only_what_needs_no_check(
    change: tuple[Mixed, Mixed], inherit: bool
) -> None:
    """Property: the one-pass document, when there is one, is the general
    document, and there is one exactly when every changed field is a
    trusted or known-grown log of provable new items, a provable value, or
    a strict scalar of exactly its type."""
    before, after = change
    first = fold.Snapshot.first("t", before, ("a",), "f")
    nxt = first.successor(after, "a", ("a",))
    with _clock():
        doc = _ONE_PASS.document_proved(nxt, first, None, inherit, None)
        general = (
            None
            if doc is None
            else _GENERAL._document(nxt, first, None, inherit)
        )
    kinds = {"count": int, "flag": bool, "note": str}
    expected = True
    for f in attrs.fields(Mixed):
        value, old = getattr(after, f.name), getattr(before, f.name)
        if value is old:
            continue
        if f.name in ("trail", "seen"):  # an equal log is written again
            grown = len(value) >= len(old) and all(
                a is b for a, b in zip(old, value, strict=False)
            )
            new = value[len(old) :]
            expected &= grown and all(
                proven_message(m) is not None for m in new
            )
        elif type(value) is type(old) and value == old:
            continue
        elif f.name == "usage":
            expected &= proven_usage(value) is not None
        elif f.name in kinds:
            expected &= type(value) is kinds[f.name]
        else:
            expected = False
    assert (doc is not None) == expected
    if doc is not None:
        assert doc == general


def test_an_agent_turn_and_its_node_record_are_written_in_one_pass() -> None:
    """An agent's turn (new messages, usage, a count) and a graph's record
    of the conversation (new messages, the same run id and metadata) are
    written in one pass; a record that changes the metadata is not."""
    turns: Codec[Turns] = Codec(Turns)
    start = fold.Snapshot.first("t", Turns(), ("a",), "f")
    said = Message.assistant("hi", usage=Usage(1, 2))
    turn = start.successor(Turns(pvector([said]), Usage(1, 2), 1), "a", ("a",))
    assert turns.document_proved(turn, start, None, False, None) is not None
    context: Codec[Context] = Codec(Context)
    ctx = Context.of(Message.user("go"), run_id="r")
    first = fold.Snapshot.first("t", ctx, ("a",), "f")
    node = first.successor(ctx.append(said), "a", ())
    assert context.document_proved(node, first, None, False, None) is not None
    tagged = first.successor(ctx.set("k", 1), "a", ())
    assert context.document_proved(tagged, first, None, False, None) is None


def test_a_record_written_in_one_pass_is_not_checked_again() -> None:
    """What the one pass wrote is not decoded and compared (the check is
    not called); a record it cannot write is (a count that is a
    ``bool``), and refused, naming the field."""
    codec: Codec[Mixed] = Codec(Mixed)
    checked: list[object] = []
    check = codec._check

    def counting(*args: Any) -> Any:
        checked.append(args[1])
        return check(*args)

    codec._check = counting  # type: ignore[method-assign,assignment]
    first = fold.Snapshot.first("t", Mixed(), ("a",), "f")
    fine = first.successor(
        Mixed(pvector([Message.user("x")]), count=2, note="y"), "a", ("a",)
    )
    assert not isinstance(codec.seal(fine, first), InvalidState)
    assert checked == []
    wrong = first.successor(_forced(Mixed, count=True), "a", ("a",))
    refused = codec.seal(wrong, first)
    assert isinstance(refused, InvalidState)
    assert refused.field == "count"
    assert len(checked) == 1


def test_a_scalar_written_by_a_hook_of_ones_own_goes_the_general_way() -> None:
    """A converter that writes ``int`` by a hook of its own (registered
    after the codec was made, too): a changed count is written by that
    hook, as the general way writes it, not as itself."""
    converter = make_converter()
    codec: Codec[Mixed] = Codec(Mixed, converter)
    first = fold.Snapshot.first("t", Mixed(), ("a",), "f")
    counted = first.successor(Mixed(count=2), "a", ("a",))
    assert codec.document_proved(counted, first, None, False, None)
    converter.register_unstructure_hook(int, lambda n: n * 10)
    assert codec.document_proved(counted, first, None, False, None) is None
    sealed = codec.seal(counted, first)
    assert isinstance(sealed, InvalidState)  # 20 does not read back as 2
    assert sealed.field == "count"
