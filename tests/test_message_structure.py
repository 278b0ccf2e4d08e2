"""The fast message hooks build what cattrs' generated hooks build, and
leave everything else to them (same values, same refusals)."""

from __future__ import annotations

import json

from typing import Any

import attrs
import cattrs
import pytest

from hypothesis import given
from hypothesis import strategies as st

from pipeline import Message, Role, ToolCall, Usage
from pipeline._message_structure import (
    plain_message,
    plain_usage,
    same_for,
    same_message,
    same_usage,
)
from pipeline._serde import STRUCTURE_ERRORS, canonical, make_converter
from tests.strategies import messages


CONV = make_converter()
GENERAL_MESSAGE = CONV.gen_structure_attrs_fromdict(Message)
GENERAL_USAGE = CONV.gen_structure_attrs_fromdict(Usage)

_texts = st.text(max_size=4)
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.floats(allow_nan=False, allow_infinity=False),
    _texts,
    st.sampled_from([r.value for r in Role]),
    st.sampled_from(list(Role)),
)


_calls = st.fixed_dictionaries(
    {},
    optional={
        "id": st.one_of(_texts, _scalars),
        "name": st.one_of(_texts, _scalars),
        "arguments": st.one_of(_texts, _scalars),
        "extra": _scalars,
    },
)
_usages = st.one_of(
    st.none(),
    _scalars,
    st.fixed_dictionaries(
        {},
        optional={
            "input_tokens": st.one_of(st.integers(0, 9), _scalars),
            "output_tokens": st.one_of(st.integers(0, 9), _scalars),
            "total": _scalars,
        },
    ),
)
_documents = st.fixed_dictionaries(
    {},
    optional={
        "role": _scalars,
        "content": st.one_of(_texts, _scalars),
        "name": st.one_of(_texts, _scalars),
        "tool_calls": st.one_of(st.lists(_calls, max_size=2), _scalars),
        "tool_call_id": st.one_of(_texts, _scalars),
        "usage": _usages,
        "agent": st.one_of(_texts, _scalars),
        "parts": st.one_of(st.just([]), _scalars),
        "other": _scalars,
    },
)


def _general(hook: Any, doc: object, kind: type) -> tuple[str, object]:
    try:
        return "ok", hook(doc, kind)
    except STRUCTURE_ERRORS as exc:
        return "refused", type(exc)


@given(doc=st.one_of(_documents, _scalars))
def test_plain_messages_are_what_the_generated_hook_builds(
    doc: object,
) -> None:
    """Whenever the fast path builds a message, the generated hook builds an
    equal one of the same field types; the registered hook always agrees
    with the generated one."""
    fast = plain_message(doc)
    general = _general(GENERAL_MESSAGE, doc, Message)
    if fast is not None:
        assert general[0] == "ok"
        assert fast == general[1]
        assert attrs.astuple(fast, recurse=False) == attrs.astuple(
            general[1], recurse=False
        )
        for a, b in zip(
            attrs.astuple(fast), attrs.astuple(general[1]), strict=True
        ):
            assert type(a) is type(b)
    assert _general(CONV.get_structure_hook(Message), doc, Message) == general


@given(doc=_usages)
def test_plain_usage_is_what_the_generated_hook_builds(doc: object) -> None:
    """The same for usage: never a bool where a count is meant."""
    fast = plain_usage(doc)
    general = _general(GENERAL_USAGE, doc, Usage)
    if fast is not None:
        assert general == ("ok", fast)
        assert type(fast.input_tokens) is int
        assert type(fast.output_tokens) is int
    assert _general(CONV.get_structure_hook(Usage), doc, Usage) == general


@given(msg=messages())
def test_stored_messages_read_back_equal(msg: Message) -> None:
    """A message read back from its JSON (the fast path, or parts through
    the generated hook) equals the message written; so does the document
    a commit checks before writing it."""
    doc = CONV.unstructure(msg)
    if not msg.parts:  # the fast path takes it, both ways
        assert plain_message(doc) == msg
        assert plain_message(json.loads(canonical(doc))) == msg
    assert CONV.structure(doc, Message) == msg
    assert CONV.structure(json.loads(canonical(doc)), Message) == msg


def test_refusals_still_name_the_field() -> None:
    """A wrong kind is refused by the generated hook, as before."""
    call = ToolCall("c", "echo", "{}")
    doc = CONV.unstructure(Message.assistant("x", tool_calls=(call,)))
    doc["tool_calls"][0]["id"] = 7
    with pytest.raises(cattrs.ClassValidationError) as info:
        CONV.structure(doc, Message)
    assert "tool_calls" in repr(info.value.exceptions[0].__notes__)


_live_messages = st.builds(
    lambda msg, calls, usage, agent: attrs.evolve(
        msg,
        tool_calls=tuple(ToolCall(i, n, a) for i, n, a in calls),
        usage=usage,
        agent=agent,
    ),
    messages(),
    st.lists(st.tuples(_texts, _texts, _texts), max_size=2),
    st.one_of(
        st.none(), st.builds(Usage, st.integers(0, 9), st.integers(0, 9))
    ),
    st.one_of(st.none(), _texts),
)
_changes = st.one_of(
    st.just({}),
    st.dictionaries(
        st.sampled_from(
            ["role", "content", "name", "tool_call_id", "agent", "usage"]
        ),
        _scalars,
        max_size=2,
    ),
)


@given(live=_live_messages, change=_changes, json_first=st.booleans())
def test_same_message_agrees_with_reading_back(
    live: Message, change: dict[str, object], json_first: bool
) -> None:
    """Whenever the comparison in place says a stored message reads back
    equal to a live one, the generated hook reads it back equal (so a
    commit's check decides as before); for a plain message just written it
    says so."""
    doc = CONV.unstructure(live)
    if json_first:
        doc = json.loads(canonical(doc))
    doc.update(change)
    verdict = same_message(doc, live)
    if verdict:
        back = GENERAL_MESSAGE(doc, Message)
        assert back == live
        assert type(back) is Message
    elif not change and not live.parts:
        pytest.fail("a plain message just written was not recognised")


_call_changes = st.one_of(
    st.just({}),
    st.fixed_dictionaries(
        {},
        optional={
            "tool_calls": st.one_of(
                st.lists(_calls, max_size=2), _scalars, st.just([])
            ),
            "parts": st.one_of(st.just([]), _scalars),
        },
    ),
)


@given(
    live=_live_messages,
    change=_call_changes,
    drop_calls=st.booleans(),
    json_first=st.booleans(),
)
def test_same_message_agrees_on_tool_calls(
    live: Message,
    change: dict[str, object],
    drop_calls: bool,
    json_first: bool,
) -> None:
    """The comparison in place of a message's tool calls (none, absent,
    empty, or one per call) says "equal" only where the generated hook
    reads the stored message back equal, and refuses what does not read
    back equal (another call, a call too many or too few, a wrong kind)."""
    doc = CONV.unstructure(live)
    if json_first:
        doc = json.loads(canonical(doc))
    if drop_calls:
        doc.pop("tool_calls")
    doc.update(change)
    verdict = same_message(doc, live)
    outcome = _general(GENERAL_MESSAGE, doc, Message)
    back_equal = (
        outcome[0] == "ok"
        and outcome[1] == live
        and type(outcome[1]) is Message
    )
    if verdict:
        assert back_equal
    elif (
        not change and not live.parts and not (drop_calls and live.tool_calls)
    ):
        pytest.fail("a plain message just written was not recognised")


def test_a_call_that_does_not_read_back_is_refused() -> None:
    """A stored call of another kind, or one call short, fails in place."""
    live = Message.assistant(
        "", tool_calls=(ToolCall("c", "echo", "{}"), ToolCall("d", "f"))
    )
    doc = CONV.unstructure(live)
    assert same_message(doc, live)
    short = {**doc, "tool_calls": doc["tool_calls"][:1]}
    assert not same_message(short, live)
    wrong = {
        **doc,
        "tool_calls": [
            {**doc["tool_calls"][0], "id": 7},
            doc["tool_calls"][1],
        ],
    }
    assert not same_message(wrong, live)
    for key in ("id", "name", "arguments"):
        other = {**doc["tool_calls"][1], key: "other"}
        changed = {**doc, "tool_calls": [doc["tool_calls"][0], other]}
        assert not same_message(changed, live)
    assert not same_message({**doc, "tool_calls": []}, live)
    no_calls = Message.assistant("x")
    assert not same_message(
        {**CONV.unstructure(no_calls), "tool_calls": None}, no_calls
    )


@given(
    live=st.builds(Usage, st.integers(-2, 9), st.integers(-2, 9)),
    doc=_usages,
)
def test_same_usage_agrees_with_reading_back(live: Usage, doc: Any) -> None:
    """The same for usage."""
    if same_usage(doc, live):
        assert GENERAL_USAGE(doc, Usage) == live
    assert same_usage(CONV.unstructure(live), live)


def test_look_alikes_are_left_to_the_generated_hook() -> None:
    """A bool where a count is, a str subclass where a text is: not decided
    in place (the generated hook decides)."""

    class Text(str):
        __slots__ = ()

    assert not same_usage({"input_tokens": True}, Usage(1, 0))
    live = Message.user("hi")
    assert same_message(CONV.unstructure(live), live)
    odd = attrs.evolve(live, content=Text("hi"))
    assert not same_message(CONV.unstructure(odd), odd)
    assert not same_message(CONV.unstructure(live), odd)


@given(
    kind=st.sampled_from([int, str, bool]),
    stored=_scalars,
    live=_scalars,
)
def test_scalars_compared_in_place_read_back_equal(
    kind: type, stored: object, live: object
) -> None:
    """A field declared int, str or bool: equal in place only where its
    strict hook reads the stored value back as an equal value of the live
    one's type."""
    hook = CONV.get_structure_hook(kind)
    same = same_for(hook, kind)
    assert same is not None
    if same(stored, live):
        back = hook(stored, kind)
        assert back == live
        assert type(back) is type(live)


def test_only_our_hooks_for_their_own_type_compare_in_place() -> None:
    """A StrEnum field shares the str hook, but is read back as a member:
    never compared in place; nor is a float (infinities compare equal and
    are refused), nor a converter's own hook."""
    assert same_for(CONV.get_structure_hook(Role), Role) is None
    assert same_for(CONV.get_structure_hook(float), float) is None
    own = make_converter()
    own.register_structure_hook(int, lambda v, _: int(v))
    assert same_for(own.get_structure_hook(int), int) is None
    assert same_for(own.get_structure_hook(Message), Message) is not None
