"""Messages and usage of exact types are written and proved in one pass
(``pipeline._serde.proven_message``): a record's check then skips them.
The proof must accept only what the general decode-and-compare accepts,
and what it accepts must read back equal with the same types all the way
down; anything else goes the general way, so the codec seals the same
document and bytes, or the same refusal, with the proofs and without."""

from __future__ import annotations

import contextlib
import math

from collections.abc import Iterator
from typing import Any

import attrs
import orjson
import pytest

from hypothesis import given
from hypothesis import strategies as st
from pyrsistent import pvector
from returns.result import Result, Success

from pipeline import (
    Context,
    ImagePart,
    Message,
    Role,
    ToolCall,
    Usage,
    _serde,
    _turns,
    fold,
    graph,
    handler,
    stores,
)
from pipeline._message_structure import same_message
from pipeline._serde import (
    _message_unstructure,
    _usage_unstructure,
    canonical_exact,
    make_converter,
    proven_message,
    proven_usage,
)
from pipeline._turns import Turns
from pipeline.failures import InvalidState
from pipeline.fold import _codec, _journal
from pipeline.fold._codec import CLOCK, Codec
from tests.graph.test_partless_record import _same
from tests.graph.test_progress_record import _graph


class _Text(str):
    """Equal to a ``str``, not one."""

    __slots__ = ()


class _Int(int):
    """Equal to an ``int``, not one."""


_CONV = make_converter()
_texts = st.text(max_size=4)
# What a field may hold at run time: attrs checks nothing, so anything.
_odd_texts = st.one_of(
    _texts,
    st.just("\ud800"),  # a lone surrogate: orjson refuses it
    _texts.map(_Text),
    st.integers(0, 3),
)
_counts = st.one_of(
    st.integers(0, 9),
    st.integers(-(2**63), 2**64 - 1),
    st.just(2**70),  # past 64 bits: orjson refuses it
    st.booleans(),
    st.just(math.nan),
    st.floats(allow_nan=False),
    st.integers(0, 9).map(_Int),
)


def _forced(cls: type[Any], **values: Any) -> Any:
    """An instance of frozen *cls* holding *values* as they are (no
    converter, as a value built elsewhere might)."""
    out = object.__new__(cls)
    for name, value in values.items():
        object.__setattr__(out, name, value)
    return out


_usages = st.builds(
    lambda i, n: _forced(Usage, input_tokens=i, output_tokens=n),
    _counts,
    _counts,
)
_calls = st.builds(
    lambda i, n, a: _forced(ToolCall, id=i, name=n, arguments=a),
    _odd_texts,
    _odd_texts,
    _odd_texts,
)
_messages = st.builds(
    lambda role, content, name, calls, call_id, usage, agent, parts: _forced(
        Message,
        role=role,
        content=content,
        name=name,
        tool_calls=calls,
        tool_call_id=call_id,
        usage=usage,
        agent=agent,
        parts=parts,
    ),
    st.sampled_from([*Role, "user", _Text("tool")]),
    _odd_texts,
    st.none() | _odd_texts,
    st.lists(_calls, max_size=2).map(tuple) | st.lists(_calls, max_size=1),
    st.none() | _odd_texts,
    st.none() | _usages,
    st.none() | _odd_texts,
    st.just(()) | st.just([]) | st.just((ImagePart(url="https://x/y.png"),)),
)
# Messages as an agent builds them: exact types, mostly.
_plain_messages = st.builds(
    lambda role, content, calls, usage, agent: Message(
        role=role,
        content=content,
        tool_calls=tuple(ToolCall(i, "f", a) for i, a in calls),
        usage=usage,
        agent=agent,
    ),
    st.sampled_from(list(Role)),
    _texts,
    st.lists(st.tuples(_texts, _texts), max_size=2),
    st.none() | st.builds(Usage, st.integers(0, 9), st.integers(0, 9)),
    st.none() | _texts,
)

_ODD: dict[str, Any] = {
    "role": st.sampled_from(["user", _Text("tool")]),
    "content": _odd_texts,
    "name": _odd_texts,
    "tool_calls": st.lists(_calls, min_size=1, max_size=2).map(tuple)
    | st.lists(_calls, max_size=1),
    "tool_call_id": _odd_texts,
    "usage": _usages,
    "agent": _odd_texts,
    "parts": st.just([]) | st.just((ImagePart(url="https://x/y.png"),)),
}


@st.composite
def _nearly(draw: st.DrawFn) -> Message:
    """A message as an agent builds it, one field of which holds an odd
    value (or an odd call, or odd counts)."""
    m = draw(_plain_messages)
    name = draw(st.sampled_from(sorted(_ODD)))
    fields = {f.name: getattr(m, f.name) for f in attrs.fields(Message)}
    fields[name] = draw(_ODD[name])
    out: Message = _forced(Message, **fields)
    return out


def _shape(v: object) -> object:
    """*v*'s types and values all the way down (equal shapes: equal
    values of the same types)."""
    cls: Any = type(v)
    if attrs.has(cls):
        fields = attrs.fields(cls)
        return (type(v), tuple(_shape(getattr(v, f.name)) for f in fields))
    if isinstance(v, (tuple, list)):
        return (type(v), tuple(_shape(x) for x in v))
    if isinstance(v, dict):
        return (type(v), tuple((k, _shape(x)) for k, x in v.items()))
    return (type(v), v)


def _read_back(written: object, t: type[Any]) -> object:
    """What a reader of a *t* field reads from *written*'s bytes."""
    data = orjson.dumps(written)
    return _CONV.structure(orjson.loads(data), t)


def _general_accepts(live: object, t: type[Any]) -> bool:
    """The general check: written, encoded, read back, compared (equal,
    and the codec's deep comparison of types)."""
    try:
        data, _ = canonical_exact({"x": _CONV.unstructure(live)})
        back = _CONV.structure(orjson.loads(data)["x"], t)
    except Exception:  # noqa: BLE001  # refused: not accepted
        return False
    return _shape(back) == _shape(live)


@given(_plain_messages | _nearly() | _messages)
def test_a_proved_message_reads_back_as_itself(m: Message) -> None:
    """Property: the proof accepts a message only if the general check
    does; what it writes is the hook's document (keys in order); where
    orjson writes it, it reads back equal with the same types all the way
    down; and every message of exact types without parts is accepted."""
    written = proven_message(m)
    live: Any = m  # what it holds at run time is what is tested
    exact = (
        type(live.role) is Role
        and all(
            type(t) is str or (t is None and f != "content")
            for f, t in (
                ("content", live.content),
                ("name", live.name),
                ("tool_call_id", live.tool_call_id),
                ("agent", live.agent),
            )
        )
        and type(live.tool_calls) is tuple
        and all(
            type(c) is ToolCall
            and all(type(x) is str for x in (c.id, c.name, c.arguments))
            for c in live.tool_calls
        )
        and (
            live.usage is None
            or (
                type(live.usage) is Usage
                and type(live.usage.input_tokens) is int
                and type(live.usage.output_tokens) is int
            )
        )
        and type(live.parts) is tuple
        and not live.parts
    )
    assert (written is not None) == exact
    if written is None:
        return
    hook = _message_unstructure(m)
    assert written == hook
    assert list(written) == list(hook)
    try:
        orjson.dumps(written)
    except orjson.JSONEncodeError:
        return  # the record is not orjson's: the proofs are not used
    assert _general_accepts(m, Message)
    assert _shape(_read_back(written, Message)) == _shape(m)


@given(_usages)
def test_a_proved_usage_reads_back_as_itself(u: Usage) -> None:
    """Property: :func:`proven_usage` as above, for usage."""
    written = proven_usage(u)
    exact = type(u.input_tokens) is int and type(u.output_tokens) is int
    assert (written is not None) == exact
    if written is None:
        return
    assert written == _usage_unstructure(u)
    assert list(written) == list(_usage_unstructure(u))
    try:
        orjson.dumps(written)
    except orjson.JSONEncodeError:
        return
    assert _general_accepts(u, Usage)
    assert _shape(_read_back(written, Usage)) == _shape(u)


def _general(state_type: type[Any]) -> Codec[Any]:
    """A codec that proves nothing (main's way: written, then checked),
    nor writes a document in one pass (see ``Codec.document_proved``)."""
    codec: Codec[Any] = Codec(state_type)
    codec._proofs = {}
    codec._one_pass = ()
    return codec


_TURNS = Codec(Turns)
_TURNS_GENERAL = _general(Turns)
_CONTEXT = Codec(Context)
_CONTEXT_GENERAL = _general(Context)


def _seal_both(
    fast: Codec[Any],
    slow: Codec[Any],
    snap: fold.Snapshot[Any],
    parent: fold.Snapshot[Any],
    *,
    inherit: bool,
    encode: bool,
    plain: bool,
) -> tuple[object, object]:
    fast._plain = slow._plain = plain
    with _clock():
        one = fast.seal(snap, parent, None, inherit=inherit, encode=encode)
        other = slow.seal(snap, parent, None, inherit=inherit, encode=encode)
    return one, other


@contextlib.contextmanager
def _clock() -> Iterator[None]:
    """Records stamped at one known time (two seals compare equal)."""
    token = CLOCK.set(lambda: 1_700_000_000.0)
    try:
        yield
    finally:
        CLOCK.reset(token)


@given(
    before=st.lists(_plain_messages, max_size=3),
    added=st.lists(_plain_messages | _nearly() | _messages, max_size=12),
    usage=_usages,
    inherit=st.booleans(),
    encode=st.booleans(),
    plain=st.booleans(),
)
def test_a_turn_record_seals_as_without_proofs(
    before: list[Message],
    added: list[Message],
    usage: Usage,
    inherit: bool,
    encode: bool,
    plain: bool,
) -> None:
    """Property: an agent's turn record (new messages of any make, a
    usage of any counts) seals the same document and bytes, or the same
    refusal (field and reason), with the proofs as without them, with and
    without a sink, encoded or not."""
    first = fold.Snapshot.first("t", Turns(pvector(before)), ("a",), "f")
    state = Turns(pvector(before + added), usage, 1)
    nxt = first.successor(state, "a", ("a",))
    one, other = _seal_both(
        _TURNS,
        _TURNS_GENERAL,
        nxt,
        first,
        inherit=inherit,
        encode=encode,
        plain=plain,
    )
    _same(one, other)


@given(
    before=st.lists(_plain_messages, max_size=3),
    added=st.lists(
        _plain_messages | _nearly() | _messages, min_size=1, max_size=12
    ),
    inherit=st.booleans(),
)
def test_a_graph_record_seals_as_without_proofs(
    before: list[Message], added: list[Message], inherit: bool
) -> None:
    """Property: the same for a graph's record of a conversation (a
    node's final record: many new messages at once)."""
    ctx = Context.of(*before, run_id="r") if before else Context(run_id="r")
    first = fold.Snapshot.first("t", ctx, ("a",), "f")
    nxt = first.successor(ctx.append(*added), "a", ("a",))
    one, other = _seal_both(
        _CONTEXT,
        _CONTEXT_GENERAL,
        nxt,
        first,
        inherit=inherit,
        encode=True,
        plain=True,
    )
    _same(one, other)


def test_a_proof_skips_the_check_only_for_what_it_proved() -> None:
    """A message of exact types is not compared again; one holding a
    ``str`` subclass is (the general way), and refused, naming the item:
    it compares equal but reads back as a ``str``; a ``bool`` count is
    refused too."""
    first = fold.Snapshot.first("t", Turns(), ("a",), "f")
    compared: list[object] = []
    plan = _TURNS._plan
    assert plan is not None
    field = plan.by_name["messages"]
    same = field.same_item
    assert same is not None

    def counting(stored: object, live: object) -> bool:
        compared.append(live)
        return same(stored, live)

    codec: Codec[Turns] = Codec(Turns)
    assert codec._plan is not None
    codec._plan.by_name["messages"] = attrs.evolve(field, same_item=counting)
    try:
        plain = Message.assistant("hi", usage=Usage(1, 2))
        snap = first.successor(Turns(pvector([plain])), "a", ("a",))
        assert not isinstance(codec.seal(snap, first), InvalidState)
        assert compared == []
        odd = Message.user(_Text("hi"))
        snap = first.successor(Turns(pvector([plain, odd])), "a", ("a",))
        looks_alike = codec.seal(snap, first)
        assert isinstance(looks_alike, InvalidState)
        assert looks_alike.field == "messages[1]"
        assert compared == [plain, odd]
        wrong = _forced(Usage, input_tokens=True, output_tokens=0)
        used = Message.assistant("x", usage=wrong)
        snap = first.successor(Turns(pvector([used])), "a", ("a",))
        refused = codec.seal(snap, first)
        assert isinstance(refused, InvalidState)
        assert refused.field == "messages[0]"
    finally:
        codec._plan.by_name["messages"] = field


_ODD_VALUES: dict[str, list[Any]] = {
    "role": ["user", _Text("user")],
    "content": [_Text("hi"), 1, None],
    "name": [_Text("n"), 1],
    "tool_calls": [
        [ToolCall("c", "f")],
        (_forced(ToolCall, id=_Text("c"), name="f", arguments="{}"),),
        (_forced(ToolCall, id="c", name=_Text("f"), arguments="{}"),),
        (_forced(ToolCall, id="c", name="f", arguments=_Text("{}")),),
        (_forced(ToolCall, id="c", name="f", arguments=None),),
        ({"id": "c", "name": "f", "arguments": "{}"},),
    ],
    "tool_call_id": [_Text("c"), 1],
    "usage": [
        _forced(Usage, input_tokens=True, output_tokens=0),
        _forced(Usage, input_tokens=0, output_tokens=_Int(1)),
        _forced(Usage, input_tokens=math.nan, output_tokens=0),
        _forced(Usage, input_tokens=1.0, output_tokens=0),
        {"input_tokens": 1, "output_tokens": 0},
    ],
    "agent": [_Text("a"), 1],
    "parts": [[], (ImagePart(url="https://x/y.png"),)],
}


def test_each_odd_field_is_left_to_the_general_way() -> None:
    """Every field of a message holding a value not of its exact type (a
    ``str`` subclass, a ``bool`` or ``float`` count, a list for a tuple,
    a part) makes the proof refuse it, while the same message of exact
    types is proved."""
    base = Message.assistant(
        "hi", tool_calls=[ToolCall("c", "f")], usage=Usage(1, 2)
    )
    assert proven_message(base) == _message_unstructure(base)
    fields = {f.name: getattr(base, f.name) for f in attrs.fields(Message)}
    assert set(fields) == set(_ODD_VALUES)  # a new field: teach the proof
    for name, values in _ODD_VALUES.items():
        for value in values:
            odd = _forced(Message, **{**fields, name: value})
            assert proven_message(odd) is None, (name, value)
    assert (
        proven_usage(_forced(Usage, input_tokens=0, output_tokens=False))
        is None
    )
    assert proven_usage({"input_tokens": 1}) is None


# -- the step's memo: what its turns proved, its own record does not prove
# again --------------------------------------------------------------------


def _turn_then_node(
    before: list[Message], added: list[Message], memo: Any
) -> tuple[object, object]:
    """An agent's turn record of *added* (sealed as a nested record is,
    with *memo*), then a graph's record of the conversation holding them,
    with *memo*: the two seals' results."""
    start = fold.Snapshot.first("t", Turns(pvector(before)), ("a",), "f")
    turn = start.successor(Turns(pvector(before + added)), "a", ("a",))
    ctx = Context.of(*before, run_id="r") if before else Context(run_id="r")
    first = fold.Snapshot.first("t", ctx, ("a",), "f")
    node = first.successor(ctx.append(*added), "a", ())
    with _clock():
        one = _TURNS.seal(turn, start, None, encode=False, memo=memo)
        other = _CONTEXT.seal(node, first, None, memo=memo)
    return one, other


@given(
    before=st.lists(_plain_messages, max_size=3),
    added=st.lists(_plain_messages | _nearly() | _messages, max_size=12),
    stale=st.booleans(),
)
def test_a_memo_changes_no_record(
    before: list[Message], added: list[Message], stale: bool
) -> None:
    """Property: a graph's record sealed with the memo its turn's record
    filled is the record sealed without one (document and bytes, or the
    same refusal); entries for other objects, or made by another proof,
    are not taken for an item."""
    memo: dict[int, Any] = {}
    if stale and added:
        # An entry under an item's id for another object, and one for the
        # item itself by another proof: neither is its proof.
        memo[id(added[0])] = (Message.user("other"), proven_message, {})
        if len(added) > 1:
            memo[id(added[1])] = (added[1], proven_usage, {})
    one, node = _turn_then_node(before, added, memo)
    _, alone = _turn_then_node(before, added, None)
    _same(node, alone)
    general = _general(Context)
    ctx = Context.of(*before, run_id="r") if before else Context(run_id="r")
    first = fold.Snapshot.first("t", ctx, ("a",), "f")
    with _clock():
        slow = general.seal(
            first.successor(ctx.append(*added), "a", ()), first
        )
    _same(node, slow)
    if not isinstance(one, tuple) or not isinstance(node, tuple):
        return
    if not all(proven_message(m) is not None for m in added):
        return  # the general way wrote them all (or the first ones only)
    for m in added:  # each item is in the memo, as its proof wrote it
        entry = memo[id(m)]
        assert entry[0] is m
        assert entry[1] is proven_message
        assert entry[2] == _message_unstructure(m)


def test_a_node_record_takes_what_its_turn_proved() -> None:
    """The graph's record holds the very documents the turn's record
    wrote for its messages (not proved again), and is the record sealed
    without the memo, byte for byte."""
    added = [
        Message.assistant(
            "", tool_calls=[ToolCall("c", "echo", "{}")], usage=Usage(1, 2)
        ),
        Message.tool("hi", tool_call_id="c", name="echo", agent="bench"),
    ]
    memo: dict[int, Any] = {}
    turn, node = _turn_then_node([Message.user("go")], added, memo)
    assert isinstance(turn, tuple)
    assert isinstance(node, tuple)
    turn_items = turn[0]["logs"]["messages"][1]
    node_items = node[0]["logs"]["messages"][1]
    assert all(a is b for a, b in zip(turn_items, node_items, strict=True))
    _, alone = _turn_then_node([Message.user("go")], added, None)
    assert node == alone


async def test_a_run_proves_each_message_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """In a checkpointed agent node, each message is proved once: by the
    turn's record that adds it (the node's own record takes it from the
    step's memo); the records are those sealed without the memo, and no
    memo outlives the step."""
    proved: list[Message] = []

    def counting(m: Any) -> Any:
        proved.append(m)
        return proven_message(m)

    proof = (_message_unstructure, counting)
    monkeypatch.setitem(_turns.CODEC._proofs, "messages", proof)
    monkeypatch.setattr(
        _codec, "PROOFS", {**_serde.PROOFS, same_message: proof}
    )
    journals: list[_journal.ThreadJournal[Any]] = []
    made = _journal.ThreadJournal.__init__

    def keep(self: Any, *args: Any, **kwargs: Any) -> None:
        made(self, *args, **kwargs)
        journals.append(self)

    monkeypatch.setattr(_journal.ThreadJournal, "__init__", keep)
    with _clock():
        with_memo = await _w7_records()
        assert journals
        assert all(j._memo is None for j in journals)
        once = list(proved)
        seal = Codec.seal

        def no_memo(self: Any, *args: Any, memo: Any = None, **kw: Any) -> Any:
            del memo
            return seal(self, *args, **kw)

        monkeypatch.setattr(Codec, "seal", no_memo)
        proved.clear()
        without = await _w7_records()
    assert with_memo == without
    # The user's message (the admission's), then two per turn and the
    # answer: each once with the memo, the turns' twice without it.
    assert len(once) == len({id(m) for m in once}) == 1 + 2 * 3 + 1
    assert len(proved) == 1 + 2 * (2 * 3 + 1)


async def _w7_records() -> list[Any]:
    store = stores.MemoryStore()
    out = await _graph(4).run(
        Context.of(Message.user("go"), run_id="r"), store=store, thread_id="t"
    )
    assert out.unwrap().done
    return list(await store.records("t"))


class _Count(int):
    """An int look-alike."""


_LOOK_ALIKES: dict[str, Any] = {
    "content": {"content": _Text("hi")},
    "name": {"name": _Text("n")},
    "role": {"role": "assistant"},
    "usage": {
        "usage": _forced(Usage, input_tokens=_Count(3), output_tokens=1)
    },
    "arguments": {
        "tool_calls": (
            _forced(ToolCall, id="c", name="f", arguments=_Text("{}")),
        )
    },
}


@pytest.mark.parametrize("where", sorted(_LOOK_ALIKES))
async def test_a_look_alike_in_a_message_is_refused(where: str) -> None:
    """A message holding a value that compares equal to what a reader
    reads back, but is of another type (a ``str`` or ``int`` subclass, a
    role given as a plain string), is not stored: the check compares the
    types all the way down, not only the field's."""
    odd = _forced(
        Message,
        **{
            **attrs.asdict(Message.assistant("x"), recurse=False),
            **_LOOK_ALIKES[where],
        },
    )

    @handler(name="add")
    async def add(c: Context) -> Result[Context, object]:
        return Success(c.append(odd))

    g = (
        graph.builder(Context)
        .node("add", add)
        .entry("add")
        .edge("add", graph.END)
        .build()
    )
    store = stores.MemoryStore()
    out = await g.run(
        Context.of(Message.user("go")), store=store, thread_id="t"
    )
    refused = out.failure()
    assert isinstance(refused, InvalidState)
    assert refused.field == "messages[1]"
    assert (
        await store.head("t") == 0
    )  # the admission only: nothing of the step
