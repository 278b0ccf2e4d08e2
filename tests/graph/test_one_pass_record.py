"""A record whose changed fields are all logs that grew by items a fused
writer proves, values one proves, strict scalars of their exact type, or
empty immutable containers is written in one pass with nothing left to
check (``Codec.document_proved``), a root record (a thread's admission)
too: it must be the record the general way writes and checks, byte for
byte, and anything else (a ``bool`` in a count, a ``str`` subclass, a
text orjson refuses, a log rewritten, a field of another kind, a
non-empty map) must go the general way, to the same record or the same
refusal."""

from __future__ import annotations

import math

from typing import Any

import attrs

from hypothesis import given
from hypothesis import strategies as st
from pyrsistent import PMap, PVector, pmap, pvector

from pipeline import Context, Message, ToolCall, Usage, fold
from pipeline._fields import APPEND_ONLY
from pipeline._serde import make_converter, proven_message, proven_usage
from pipeline._turns import Turns
from pipeline.failures import InvalidState
from pipeline.fold._codec import Codec, Memo
from tests.graph.test_partless_record import _same
from tests.graph.test_proven_record import _clock


class _Text(str):
    """Equal to a ``str``, not one."""

    __slots__ = ()


class _Int(int):
    """Equal to an ``int``, not one."""


@attrs.frozen
class Mixed:
    """One field of each kind the one-pass writer knows (immutable
    containers only when empty), and two it does not (a mapping; a float,
    whose strict hook refuses infinities)."""

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
    tags: PMap[str, int] = attrs.field(factory=pmap)
    names: tuple[str, ...] = ()


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
        pvector(trail),
        pvector(seen),
        Usage(1, 2),
        3,
        False,
        "n",
        {"a": 1},
        0.0,
        pmap({"a": 1}),
        ("a",),
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
                "tags": st.just(pmap())
                | st.dictionaries(_texts, st.integers(0, 9), max_size=2).map(
                    pmap
                ),
                "names": st.just(()) | st.lists(_texts, max_size=2).map(tuple),
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
        elif f.name in ("tags", "names"):  # immutable: one pass if empty
            expected &= not value
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


@attrs.frozen
class Rooted:
    """The kinds a root record may write in one pass, and no other."""

    trail: PVector[Message] = attrs.field(
        factory=pvector, metadata={APPEND_ONLY: True}
    )
    usage: Usage = Usage()
    count: int = 0
    note: str = ""
    tags: PMap[str, int] = attrs.field(factory=pmap)
    names: tuple[str, ...] = ()


_ROOTED_ONE_PASS: Codec[Rooted] = Codec(Rooted)
_ROOTED_GENERAL: Codec[Rooted] = _general(Rooted)


def _rooted(state: Mixed) -> Rooted:
    """*state*'s fields that :class:`Rooted` has, as they are."""
    values = {f.name: getattr(state, f.name) for f in attrs.fields(Rooted)}
    rooted: Rooted = _forced(Rooted, **values)
    return rooted


_PROGRESS = {"f:x#0@d": ({"v": 2, "next": []},)}


@given(_changes(), st.booleans(), st.booleans(), st.booleans(), st.booleans())
def test_a_root_record_written_in_one_pass_is_the_general_one(
    change: tuple[Mixed, Mixed],
    progress: bool,
    inherit: bool,
    encode: bool,
    memo: bool,
) -> None:
    """Property: a root record (a thread's admission: no parent) sealed by
    a codec that writes in one pass where it can is the record a codec
    that never does seals and checks, or the same refusal; for a state
    with a field of another kind (a dict, a float) too."""
    _, after = change
    kept = _PROGRESS if progress else None
    mixed = fold.Snapshot.first("t", after, ("a",), "f")
    rooted = fold.Snapshot.first("t", _rooted(after), ("a",), "f")
    kept_memo: Memo | None = {} if memo else None
    with _clock():
        _same(
            _ONE_PASS.seal(
                mixed,
                None,
                kept,
                inherit=inherit,
                encode=encode,
                memo=kept_memo,
            ),
            _GENERAL.seal(mixed, None, kept, inherit=inherit, encode=encode),
        )
        _same(
            _ROOTED_ONE_PASS.seal(
                rooted,
                None,
                kept,
                inherit=inherit,
                encode=encode,
                memo=kept_memo,
            ),
            _ROOTED_GENERAL.seal(
                rooted, None, kept, inherit=inherit, encode=encode
            ),
        )


@given(_changes())
def test_a_root_record_is_written_in_one_pass_when_nothing_needs_a_check(
    change: tuple[Mixed, Mixed],
) -> None:
    """Property: a root record has a one-pass document, the general one,
    exactly when every log's items and every value are provable, every
    scalar is strictly of its type and every container is empty."""
    state = _rooted(change[1])
    first = fold.Snapshot.first("t", state, ("a",), "f")
    with _clock():
        doc = _ROOTED_ONE_PASS.document_proved(first, None, None, True, None)
        general = _ROOTED_GENERAL._document(first, None, None, True)
    expected = (
        all(proven_message(m) is not None for m in state.trail)
        and type(state.trail) is type(pvector())
        and proven_usage(state.usage) is not None
        and type(state.count) is int
        and type(state.note) is str
        and not state.tags
        and not state.names
    )
    assert (doc is not None) == expected
    if doc is not None:
        assert doc == general


def test_an_admission_is_written_in_one_pass() -> None:
    """A context's admission (its messages, no metadata, a run id) is
    written in one pass, and not checked again; one with metadata is
    written and checked the general way."""
    codec: Codec[Context] = Codec(Context)
    checked: list[object] = []
    check = codec._check

    def counting(*args: Any) -> Any:
        checked.append(args[1])
        return check(*args)

    ctx = Context.of(Message.user("go"), run_id="r")
    first = fold.Snapshot.first("t", ctx, ("a",), "f")
    assert codec.document_proved(first, None, None, True, None) is not None
    assert not isinstance(codec.seal(first, None), InvalidState)
    codec._check = counting  # type: ignore[method-assign,assignment]
    assert not isinstance(codec.seal(first, None), InvalidState)
    assert checked == []  # the empty metadata was checked once, before
    tagged = fold.Snapshot.first("t", ctx.set("k", 1), ("a",), "f")
    assert codec.document_proved(tagged, None, None, True, None) is None
    assert not isinstance(codec.seal(tagged, None), InvalidState)
    assert len(checked) == 1


def test_an_empty_map_written_by_a_hook_of_ones_own_goes_the_general_way() -> (
    None
):
    """A converter that writes maps by a hook of its own (registered after
    an empty map was written in one pass): an empty map is written by
    that hook, as the general way writes it, and refused if it does not
    read back."""
    converter = make_converter()
    codec: Codec[Rooted] = Codec(Rooted, converter)
    first = fold.Snapshot.first("t", Rooted(), ("a",), "f")
    assert codec.document_proved(first, None, None, True, None) is not None
    converter.register_unstructure_hook(type(pmap()), lambda m: {"x": len(m)})
    assert codec.document_proved(first, None, None, True, None) is None
    sealed = codec.seal(first, None)
    assert isinstance(sealed, InvalidState)  # {"x": 0} is not an empty map
    assert sealed.field == "tags"
