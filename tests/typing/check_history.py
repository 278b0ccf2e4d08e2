"""Type-level contract of history policies. Checked, never executed."""

# pyright: reportUnnecessaryTypeIgnoreComment=error

from __future__ import annotations

from collections.abc import Sequence
from typing import assert_type

from returns.result import Result, Success

from pipeline import Message
from pipeline.failures import HistoryBudgetExceeded, ModelError
from pipeline.history import (
    HistoryError,
    HistoryPolicy,
    Window,
    approximate_tokens,
    full,
    summarizing,
    token_budget,
    window,
)
from pipeline.models import Model
from pipeline.testing import Reply, ScriptedModel


model: Model = ScriptedModel(Reply.text("summary"))
messages = [Message.system("Be brief."), Message.user("hi")]

assert_type(full(), HistoryPolicy)
assert_type(window(3), HistoryPolicy)
assert_type(token_budget(1000), HistoryPolicy)
assert_type(token_budget(1000, count=approximate_tokens), HistoryPolicy)
assert_type(summarizing(model, keep=window(3)), HistoryPolicy)
assert_type(
    summarizing(model, keep=window(3), fallback=full(), instructions="x"),
    HistoryPolicy,
)
assert_type(Window(3), Window)
assert_type(approximate_tokens(messages[0]), int)


def by_words(m: Message) -> int:
    return len(m.content.split())


class Newest:
    """A policy of one's own: just the newest message."""

    async def select(
        self, messages: Sequence[Message], /
    ) -> Result[tuple[Message, ...], HistoryError]:
        return Success(tuple(messages[-1:]))


class Unchecked:
    """Not a policy: its view is a list and it cannot fail."""

    async def select(self, messages: Sequence[Message], /) -> list[Message]:
        return list(messages)


mine: HistoryPolicy = Newest()
token_budget(50, count=by_words)
summarizing(model, keep=mine, fallback=Newest())


async def use() -> None:
    view = await window(2).select(messages)
    assert_type(view, Result[tuple[Message, ...], HistoryError])
    assert_type(
        view,
        Result[tuple[Message, ...], HistoryBudgetExceeded | ModelError],
    )
    assert_type(
        await mine.select(tuple(messages)),
        Result[tuple[Message, ...], HistoryError],
    )
    await full().select([1, 2])  # type: ignore[list-item]  # messages only


window("3")  # type: ignore[arg-type]  # turns is an int
token_budget(10, count=lambda m: "x")  # type: ignore[arg-type,return-value]  # count returns int
token_budget(10, by_words)  # type: ignore[call-arg]  # count is keyword-only
summarizing(model)  # type: ignore[call-arg]  # keep is required
summarizing(model, keep=window(2), fallback="full")  # type: ignore[arg-type]  # a policy, not a name
summarizing("gpt", keep=full())  # type: ignore[arg-type]  # a Model, not a model name
bad: HistoryPolicy = Unchecked()  # type: ignore[assignment]  # select must return a Result
