"""The agent loop outside any checkpointed or traced run (``Loop.unchecked``)
ends exactly as the fold engine's run of the same loop does."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs
import pytest

from hypothesis import given, settings
from hypothesis import strategies as st
from pyrsistent import pvector
from returns.result import Failure, Result, Success

from pipeline import Agent, Message, Output, ToolCall, Usage, tool
from pipeline._turns import Loop, Turns, _turns
from pipeline.fold import run_machine
from pipeline.models import ModelRequest, ModelResponse
from pipeline.models._types import built_request
from pipeline.testing import Reply, ScriptedModel


@tool
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@attrs.frozen
class Sum:
    total: int


REPLIES: Sequence[ModelResponse] = (
    Reply.text('{"total": 5}'),
    Reply.text("not json"),
    Reply.tool_call("add", {"a": 2, "b": 3}),
    Reply.tool_call("add", {"a": "x"}),
    Reply.tool_call("nope"),
    Reply.tool_call("take"),
    Reply.tool_calls(("add", {"a": 1, "b": 1}, "c1"), ("take", {}, "c2")),
)


def take(
    calls: Sequence[ToolCall],
) -> tuple[Mapping[int, tuple[str, bool]], bool]:
    """An intercept (as a swarm's transfers): takes ``take`` and stops."""
    mine = {
        i: ("taken", False) for i, c in enumerate(calls) if c.name == "take"
    }
    return mine, bool(mine)


def loop(
    script: Sequence[int],
    max_turns: int,
    on_limit: Literal["fail", "answer"],
    retries: int | None,
) -> tuple[Loop, int]:
    model = ScriptedModel(*(REPLIES[i] for i in script), strict=False)
    output = None if retries is None else Output(Sum, retries=retries)
    agent = Agent(
        "a",
        model,
        tools=[add],
        max_turns=max_turns,
        on_turn_limit=on_limit,
        output=output,
    )
    max_steps = max_turns + 1 + (0 if retries is None else retries)
    made = Loop(agent, (Message.user("go"),), {"add": add}, take)
    return made, max_steps


def same(out: Turns | Result[Turns, Any]) -> tuple[str, object]:
    if type(out) is Failure:
        return "failure", out.failure()
    if type(out) is Success:
        return "success", out.unwrap()
    return "success", out


@given(
    script=st.lists(st.integers(0, len(REPLIES) - 1), min_size=1, max_size=6),
    max_turns=st.integers(1, 4),
    on_limit=st.sampled_from(["fail", "answer"]),
    retries=st.one_of(st.none(), st.integers(0, 2)),
)
@settings(max_examples=60, deadline=None)
async def test_the_bare_loop_ends_as_the_engine_does(
    script: list[int],
    max_turns: int,
    on_limit: Literal["fail", "answer"],
    retries: int | None,
) -> None:
    bare, max_steps = loop(script, max_turns, on_limit, retries)
    folded, _ = loop(script, max_turns, on_limit, retries)
    fast = await bare.unchecked(max_steps)
    slow = await run_machine(
        folded, folded.start(), None, max_steps=max_steps, announce=False
    )
    expected = slow.map(lambda snap: snap.state)
    assert same(fast) == same(expected)


async def test_past_the_step_limit_the_bare_loop_fails_as_the_engine() -> None:
    """A loop that never ends within its steps: the same StepLimitExceeded."""
    bare, _ = loop([2], 10, "fail", None)
    folded, _ = loop([2], 10, "fail", None)
    fast = await bare.unchecked(3)
    slow = await run_machine(
        folded, folded.start(), None, max_steps=3, announce=False
    )
    assert same(fast) == same(slow.map(lambda snap: snap.state))
    assert type(fast) is Failure
    assert type(fast.failure()).__name__ == "StepLimitExceeded"


@pytest.mark.parametrize("cls", [ModelRequest, Turns, Usage])
def test_built_without_init_only_where_no_field_converts_or_checks(
    cls: type,
) -> None:
    """``built_request``, the loop's ``_turns`` and ``Usage.__add__`` set
    the slots directly: the same object only while no field converts nor
    checks its value (a converter or validator added later would be
    skipped)."""
    for field in attrs.fields(cls):
        assert field.converter is None
        assert field.validator is None
    assert attrs.has(cls)


@settings(max_examples=50)
@given(
    temperature=st.none() | st.floats(0, 2),
    max_tokens=st.none() | st.integers(1, 10_000),
    use_tools=st.booleans(),
    turns=st.integers(0, 50),
)
def test_fast_builders_equal_the_constructors(
    temperature: float | None,
    max_tokens: int | None,
    use_tools: bool,
    turns: int,
) -> None:
    """What the turn builds without attrs' ``__init__`` equals what the
    constructor builds from the same values, field by field."""
    messages = (Message.user("go"),)
    specs = (add.spec,)
    schema = Output(Sum).schema
    for response_schema in (None, schema):
        fast = built_request(
            messages,
            specs,
            response_schema,
            temperature,
            max_tokens,
            use_tools,
        )
        slow = ModelRequest(
            messages,
            specs,
            response_schema=response_schema,
            temperature=temperature,
            max_tokens=max_tokens,
            use_tools=use_tools,
        )
        assert fast == slow
        assert attrs.astuple(fast, recurse=False) == attrs.astuple(
            slow, recurse=False
        )
    added = pvector(messages)
    usage = Usage(turns, 2 * turns)
    assert _turns(added, usage, turns) == Turns(added, usage, turns)
    more = Usage(max_tokens or 0, 1) + usage
    assert more == Usage((max_tokens or 0) + turns, 1 + 2 * turns)
