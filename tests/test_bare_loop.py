"""The agent loop outside any checkpointed or traced run (``Loop.unchecked``)
ends exactly as the fold engine's run of the same loop does."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs

from hypothesis import given, settings
from hypothesis import strategies as st
from returns.result import Failure, Result, Success

from pipeline import Agent, Message, Output, ToolCall, tool
from pipeline._turns import Loop, Turns
from pipeline.fold import run_machine
from pipeline.models import ModelResponse
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
