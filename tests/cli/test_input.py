"""--input decoding: strict, and a mistake never repeats the input."""

from __future__ import annotations

import json

import attrs
import orjson
import pytest

from hypothesis import given
from hypothesis import strategies as st

from pipeline import Context
from pipeline.cli import ExitCode, UserError
from pipeline.cli._target import Target, load, read_json, structure_input


desk = load("tests.cli.flows:desk")
team = load("tests.cli.flows:team")
shout = load("tests.cli.flows:shout")

CANARY = "sk-canary-93ab"

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
    | st.just(CANARY),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(["text", "category", "sent", "reply", CANARY]),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)


def attempt(target: Target, value: object) -> object:
    """The structured input, or the UserError refusing it."""
    try:
        return structure_input(target, value)
    except UserError as exc:
        return exc


@pytest.mark.slow
@given(value=json_values)
def test_graph_input_fits_or_is_refused_without_echo(value: object) -> None:
    """Any JSON either structures into the graph's state type, or is refused
    with a UserError that names fields and types, never the values."""
    state = attempt(desk, value)
    if isinstance(state, UserError):
        assert state.code == ExitCode.USAGE
        assert CANARY not in state.message + state.hint
        return
    assert isinstance(state, desk.obj.state_type)
    assert attrs.asdict(state)["text"] == value["text"]  # type: ignore[index]


@given(value=json_values)
def test_swarm_input(value: object) -> None:
    """A swarm takes a string as one user message; other values must be a
    context's fields."""
    ctx = attempt(team, value)
    if isinstance(ctx, UserError):
        assert CANARY not in ctx.message + ctx.hint
        return
    assert isinstance(ctx, Context)
    if isinstance(value, str):
        assert [m.content for m in ctx.messages] == [value]


@given(value=json_values)
def test_handlers_take_the_json_value(value: object) -> None:
    """A plain handler gets the decoded JSON value unchanged."""
    assert structure_input(shout, value) == value


@given(text=st.text(max_size=30).filter(lambda t: not t.startswith("@")))
def test_read_json_round_trips_or_names_the_position(text: str) -> None:
    """read_json parses JSON text exactly as json does; malformed text is
    refused by position, never quoted."""
    refused: str | None = None
    expected: object = None
    try:
        expected = json.loads(text)
    except json.JSONDecodeError as exc:
        refused = f"--input is not valid JSON (line {exc.lineno}, column {exc.colno})"
    if refused is not None:
        with pytest.raises(UserError) as caught:
            read_json(text, "--input")
        # The position and nothing else: no part of the text (which may
        # itself read "line" or "JSON", and be found in any message).
        assert caught.value.message == refused
        return
    try:
        assert read_json(text, "--input") == expected
    except UserError:  # orjson is stricter about lone surrogates
        with pytest.raises(orjson.JSONDecodeError):
            orjson.loads(text)
