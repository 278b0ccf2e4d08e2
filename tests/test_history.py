"""History policies: full, window, token budget and summarising views."""

from __future__ import annotations

import importlib
import inspect

from collections.abc import Sequence
from itertools import count

import pytest

from hypothesis import given
from hypothesis import strategies as st
from returns.result import Failure, Success

from pipeline import Message, Role, ToolCall
from pipeline.errors import ConstructionError
from pipeline.failures import HistoryBudgetExceeded, ModelError
from pipeline.history import (
    DEFAULT_SUMMARY_INSTRUCTIONS,
    Full,
    HistoryPolicy,
    Summarizing,
    TokenBudget,
    Window,
    approximate_tokens,
    full,
    summarizing,
    token_budget,
    window,
)
from pipeline.models import ModelResponse
from pipeline.testing import Reply, ScriptedAgent, ScriptedModel


PREFIX = "Summary of the earlier conversation:\n"

# -- generated histories ------------------------------------------------------

OPENING = ("system", "text", "calls", "result")
BODY = ("text", "calls", "calls", "result", "result", "results", "system")


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    """Preambles, user turns, assistant text and tool calls with results.

    Results come after their call, in any order across pairs, sometimes
    with other messages in between; a call may stay unanswered at the end.
    Every content starts with a unique tag, so a message can be found in a
    rendered summary request.
    """
    tags = count()

    def text() -> str:
        return f"<m{next(tags)}> " + "x" * draw(st.integers(0, 80))

    out = [Message.system(text()) for _ in range(draw(st.integers(0, 2)))]
    pending: list[Message] = []
    kinds = draw(st.lists(st.sampled_from(OPENING), max_size=3))
    for body in draw(st.lists(st.lists(st.sampled_from(BODY), max_size=5))):
        kinds += ["user", *body]
    for kind in kinds:
        if kind == "user":
            out.append(Message.user(text()))
        elif kind == "text":
            out.append(Message.assistant(text()))
        elif kind == "system":
            out.append(Message.system(text()))
        elif kind == "calls":
            calls = [
                ToolCall(f"c{next(tags)}", "lookup", '{"q": "' + text() + '"}')
                for _ in range(draw(st.integers(1, 3)))
            ]
            out.append(Message.assistant(text(), tool_calls=calls))
            pending.extend(
                Message.tool(text(), tool_call_id=c.id) for c in calls
            )
        elif kind == "result" and pending:
            out.append(pending.pop(draw(st.integers(0, len(pending) - 1))))
        elif kind == "results":
            out.extend(pending)
            pending.clear()
    if draw(st.booleans()):
        out.extend(pending)
    return out


# -- a simple, independent oracle ---------------------------------------------


def first_user(ms: Sequence[Message]) -> int | None:
    return next((i for i, m in enumerate(ms) if m.role is Role.USER), None)


def pairs(ms: Sequence[Message]) -> list[tuple[int, int]]:
    """(call, result) index pairs: a result answers the latest such call."""
    found: list[tuple[int, int]] = []
    for r, m in enumerate(ms):
        if m.role is not Role.TOOL:
            continue
        for a in range(r - 1, -1, -1):
            calls = ms[a].tool_calls if ms[a].role is Role.ASSISTANT else ()
            if any(c.id == m.tool_call_id for c in calls):
                found.append((a, r))
                break
    return found


def candidate(ms: Sequence[Message], cut: int) -> list[int]:
    """Indices kept by cutting at *cut*: preamble, its results, the suffix."""
    p = first_user(ms)
    assert p is not None
    pinned = {r for a, r in pairs(ms) if a < p <= r}
    return [i for i in range(len(ms)) if i < p or i >= cut or i in pinned]


def keeps_pairs(ms: Sequence[Message], kept: Sequence[int]) -> bool:
    chosen = set(kept)
    return all((a in chosen) == (r in chosen) for a, r in pairs(ms))


def cost(ms: Sequence[Message], kept: Sequence[int]) -> int:
    return sum(approximate_tokens(ms[i]) for i in kept)


def positions(ms: Sequence[Message], view: Sequence[Message]) -> list[int]:
    """Where each message of *view* (summaries aside) sits in *ms*.

    Fails unless *view* is a subsequence of *ms*, by identity.
    """
    found: list[int] = []
    i = 0
    for m in view:
        if m.role is Role.SYSTEM and m.content.startswith(PREFIX):
            continue
        while i < len(ms) and ms[i] is not m:
            i += 1
        assert i < len(ms), "out of order, or not from the input"
        found.append(i)
        i += 1
    return found


def check_invariants(ms: Sequence[Message], view: Sequence[Message]) -> None:
    """Order kept, preamble kept whole, no tool pair split."""
    kept = positions(ms, view)
    p = first_user(ms)
    preamble = len(ms) if p is None else p
    assert kept[:preamble] == list(range(preamble))
    assert keeps_pairs(ms, kept)


def users_after_preamble(view: Sequence[Message]) -> int:
    return sum(m.role is Role.USER for m in view)


# -- properties ---------------------------------------------------------------


@pytest.mark.slow
@given(ms=histories())
async def test_full_is_the_identity(ms: list[Message]) -> None:
    """full() returns every message, unchanged and in order."""
    assert await full().select(ms) == Success(tuple(ms))


@pytest.mark.slow
@given(ms=histories(), turns=st.integers(1, 5))
async def test_window_keeps_invariants_and_its_budget(
    ms: list[Message], turns: int
) -> None:
    """window(n) keeps order, preamble and pairs, and at most n user turns."""
    view = (await window(turns).select(ms)).unwrap()
    check_invariants(ms, view)
    assert users_after_preamble(view) <= turns
    users = [i for i, m in enumerate(ms) if m.role is Role.USER]
    if len(users) <= turns:
        assert view == tuple(ms)
        return
    # The nearest safe cut at or after the natural one.
    cut = next(
        i
        for i in range(users[-turns], len(ms) + 1)
        if keeps_pairs(ms, candidate(ms, i))
    )
    assert positions(ms, view) == candidate(ms, cut)


@pytest.mark.slow
@given(ms=histories(), data=st.data())
async def test_token_budget_fits_or_fails_exactly_when_it_must(
    ms: list[Message], data: st.DataObject
) -> None:
    """token_budget keeps the longest safe suffix that fits, or says why not."""
    p = first_user(ms)
    # Budgets near the size of some view are the interesting ones.
    sizes = [sum(approximate_tokens(m) for m in ms)]
    if p is not None:
        sizes += [cost(ms, candidate(ms, i)) for i in range(p, len(ms) + 1)]
    near = st.sampled_from(sizes).flatmap(
        lambda n: st.integers(max(1, n - 3), n + 3)
    )
    budget = data.draw(near | st.integers(1, sizes[0] + 10), label="budget")
    result = await token_budget(budget).select(ms)
    if p is None:
        assert result == Success(tuple(ms))
        return
    last = max(i for i, m in enumerate(ms) if m.role is Role.USER)
    safe = [i for i in range(p, last + 1) if keeps_pairs(ms, candidate(ms, i))]
    needed = cost(ms, candidate(ms, max(safe)))
    if needed > budget:
        assert result == Failure(HistoryBudgetExceeded(needed, budget))
        return
    view = result.unwrap()
    check_invariants(ms, view)
    assert sum(approximate_tokens(m) for m in view) <= budget
    assert ms[last] in view
    assert view[-1] is ms[-1]  # nothing after the last user message is lost
    best = min(i for i in safe if cost(ms, candidate(ms, i)) <= budget)
    assert positions(ms, view) == candidate(ms, best)


keeps = st.one_of(
    st.integers(1, 4).map(window),
    st.integers(10, 300).map(token_budget),
)
fallbacks = st.sampled_from([None, full(), window(1)])
answers = st.sampled_from(
    [
        Reply.text("the user asked about Lyon"),
        Reply.text("  "),
        Reply.error("overloaded", status=529),
    ]
)


@pytest.mark.slow
@given(ms=histories(), keep=keeps, fallback=fallbacks, answer=answers)
async def test_summarizing_summarises_what_keep_drops(
    ms: list[Message],
    keep: HistoryPolicy,
    fallback: HistoryPolicy | None,
    answer: ModelResponse | ModelError,
) -> None:
    """The summary replaces exactly what keep dropped; failures degrade."""
    model = ScriptedModel(answer, strict=False)
    policy = summarizing(model, keep=keep, fallback=fallback)
    result = await policy.select(ms)
    kept = await keep.select(ms)
    if first_user(ms) is None or not isinstance(kept, Success):
        assert result == kept  # unchanged, or keep's own failure
        assert not model.requests
        return
    dropped = set(range(len(ms))) - set(positions(ms, kept.unwrap()))
    if not dropped:
        assert result == kept
        assert not model.requests
        return
    (request,) = model.requests
    assert request.messages[0] == Message.system(DEFAULT_SUMMARY_INSTRUCTIONS)
    rendered = request.messages[1].content
    assert all(ms[i].content.split()[0] in rendered for i in dropped)
    view = result.unwrap()
    if isinstance(answer, ModelResponse) and answer.text.strip():
        summaries = [m for m in view if m.content.startswith(PREFIX)]
        assert summaries == [Message.system(PREFIX + answer.text)]
        assert [m for m in view if m not in summaries] == list(kept.unwrap())
        check_invariants(ms, view)
    else:
        degraded = keep if fallback is None else fallback
        assert result == await degraded.select(ms)


# -- ported from the seed -----------------------------------------------------


def conversation(turns: int) -> list[Message]:
    """A system prompt, then *turns* user questions each answered."""
    out = [Message.system("You are helpful.")]
    for n in range(turns):
        out += [Message.user(f"q{n}"), Message.assistant(f"a{n}")]
    return out


async def test_window_two_shows_exactly_two_user_messages() -> None:
    """An agent behind window(2) receives exactly two user messages."""
    agent = ScriptedAgent("specialist", ["done"])
    view = (await window(2).select(conversation(5))).unwrap()
    await agent.run(view)
    (received,) = agent.inputs
    assert [m.content for m in received if m.role is Role.USER] == ["q3", "q4"]
    assert received[0] == Message.system("You are helpful.")


def test_meaningless_limits_are_refused_at_construction() -> None:
    """window(0), token_budget(0) and negative limits raise ConstructionError."""
    with pytest.raises(ConstructionError, match=r"turns\) must be at least 1"):
        window(0)
    with pytest.raises(ConstructionError, match="max_tokens"):
        token_budget(0)
    with pytest.raises(ConstructionError, match="got -3"):
        Window(-3)
    with pytest.raises(ConstructionError):
        TokenBudget(-1)


async def test_summarizing_calls_no_model_when_nothing_is_dropped() -> None:
    """When keep drops nothing the model is never called."""
    ms = conversation(2)
    with ScriptedModel() as model:  # strict and empty: any call raises
        view = await summarizing(model, keep=window(2)).select(ms)
    assert view == Success(tuple(ms))
    assert not model.requests


async def test_summariser_failure_falls_back_to_the_declared_fallback() -> (
    None
):
    """A failing summariser gives the fallback's view."""
    ms = conversation(4)
    model = ScriptedModel(Reply.error())
    policy = summarizing(model, keep=window(1), fallback=window(3))
    assert await policy.select(ms) == await window(3).select(ms)
    assert len(model.requests) == 1


async def test_summariser_failure_without_fallback_gives_keeps_view() -> None:
    """Without a fallback a failing summariser gives keep's own view."""
    ms = conversation(4)
    model = ScriptedModel(Reply.error())
    policy = summarizing(model, keep=window(1))
    assert await policy.select(ms) == await window(1).select(ms)


async def test_empty_summary_counts_as_a_failure() -> None:
    """A summariser answering blank text degrades like a failing one."""
    ms = conversation(3)
    model = ScriptedModel(Reply.text(" \n"))
    view = await summarizing(model, keep=window(1), fallback=full()).select(ms)
    assert view == Success(tuple(ms))


async def test_summary_message_holds_the_models_text() -> None:
    """The summary is one system message after the preamble with the text."""
    ms = conversation(3)
    model = ScriptedModel(Reply.text("They asked q0 and q1."))
    with model:
        view = (await summarizing(model, keep=window(1)).select(ms)).unwrap()
    assert view == (
        ms[0],
        Message.system(PREFIX + "They asked q0 and q1."),
        *ms[5:],
    )
    (request,) = model.requests
    assert request.messages[1] == Message.user(
        "user: q0\nassistant: a0\nuser: q1\nassistant: a1"
    )


# -- concrete histories -------------------------------------------------------

SYSTEM = Message.system("sys")
CALL = Message.assistant(
    "checking",
    tool_calls=[
        ToolCall("c1", "weather", '{"city": "Lyon"}'),
        ToolCall("c2", "time", "{}"),
    ],
)
RESULT_1 = Message.tool("sunny", tool_call_id="c1")
RESULT_2 = Message.tool("noon", tool_call_id="c2")


@pytest.mark.parametrize(
    "policy",
    [
        full(),
        window(1),
        token_budget(1),
        summarizing(ScriptedModel(), keep=window(1)),
    ],
    ids=["full", "window", "token_budget", "summarizing"],
)
async def test_no_user_message_means_nothing_to_cut(
    policy: HistoryPolicy,
) -> None:
    """Empty histories and histories without a user message pass unchanged."""
    assert await policy.select([]) == Success(())
    ms = [SYSTEM, Message.assistant("x" * 1000)]
    assert await policy.select(ms) == Success(tuple(ms))


async def test_window_keeps_the_preamble_and_the_last_turns() -> None:
    """window(2) keeps the preamble and everything from the second-last user."""
    ms = conversation(4)
    assert await window(2).select(ms) == Success((ms[0], *ms[5:]))
    assert await window(4).select(ms) == Success(tuple(ms))


async def test_window_moves_its_cut_later_rather_than_split_a_pair() -> None:
    """A turn opening between a call and its result is dropped whole."""
    ms = [
        SYSTEM,
        Message.user("q0"),
        CALL,
        RESULT_1,
        Message.user("by the way"),
        RESULT_2,
        Message.assistant("sunny at noon"),
        Message.user("q2"),
    ]
    view = (await window(2).select(ms)).unwrap()
    assert view == (SYSTEM, *ms[6:])
    view = (await window(3).select(ms)).unwrap()
    assert view == tuple(ms)


async def test_window_can_leave_only_the_preamble() -> None:
    """When the only safe cut is the end, the view is the preamble alone."""
    ms = [SYSTEM, Message.user("q0"), CALL, Message.user("q1"), RESULT_1]
    ms.append(RESULT_2)
    assert await window(1).select(ms) == Success((SYSTEM,))


async def test_results_of_preamble_calls_stay_with_the_preamble() -> None:
    """A result answering a call made in the preamble is kept in place."""
    ms = [CALL, RESULT_1, Message.user("q0"), RESULT_2, Message.user("q1")]
    assert await window(1).select(ms) == Success(
        (CALL, RESULT_1, RESULT_2, ms[4])
    )


async def test_repeated_call_ids_pair_with_the_nearest_call() -> None:
    """A reused call id pairs each result with the call just before it."""
    first = Message.assistant(tool_calls=[ToolCall("call_0", "a")])
    second = Message.assistant(tool_calls=[ToolCall("call_0", "b")])
    ms = [
        Message.user("q0"),
        first,
        Message.tool("1", tool_call_id="call_0"),
        Message.user("q1"),
        second,
        Message.tool("2", tool_call_id="call_0"),
    ]
    assert await window(1).select(ms) == Success(tuple(ms[3:]))


async def test_orphan_results_are_plain_messages() -> None:
    """A result answering no call does not constrain the cut."""
    ms = [Message.user("q0"), RESULT_1, Message.user("q1"), RESULT_2]
    assert await window(1).select(ms) == Success(tuple(ms[2:]))


async def test_token_budget_keeps_the_longest_suffix_that_fits() -> None:
    """Messages are added newest first while the total stays in budget."""

    def one(_: Message) -> int:
        return 1

    ms = conversation(3)  # 7 messages, 1 token each
    assert await token_budget(7, count=one).select(ms) == Success(tuple(ms))
    assert await token_budget(4, count=one).select(ms) == Success(
        (ms[0], *ms[4:])
    )
    assert await token_budget(3, count=one).select(ms) == Success(
        (ms[0], *ms[5:])
    )
    assert await token_budget(2, count=one).select(ms) == Failure(
        HistoryBudgetExceeded(3, 2)
    )


async def test_token_budget_keeps_what_follows_the_last_user_message() -> None:
    """Tool traffic after the last user message is kept (the seed dropped it)."""

    def one(_: Message) -> int:
        return 1

    ms = [SYSTEM, Message.user("q0"), Message.user("q1"), CALL]
    ms += [RESULT_1, RESULT_2, Message.assistant("done")]
    view = (await token_budget(6, count=one).select(ms)).unwrap()
    assert view == (SYSTEM, *ms[2:])


async def test_token_budget_never_splits_a_pair_to_fit() -> None:
    """A cut inside a pair moves later, or the whole pair is the minimum."""

    def one(_: Message) -> int:
        return 1

    answered = [SYSTEM, Message.user("q0"), CALL, RESULT_1, RESULT_2]
    answered += [Message.assistant("a0"), Message.user("q1")]
    # Results 1 and 2 would fit in 5 tokens, but not with their call.
    assert await token_budget(5, count=one).select(answered) == Success(
        (SYSTEM, *answered[5:])
    )
    assert await token_budget(6, count=one).select(answered) == Success(
        (SYSTEM, *answered[2:])
    )
    ms = [SYSTEM, Message.user("q0"), CALL, RESULT_1, Message.user("q1")]
    ms.append(RESULT_2)
    # The last user message sits inside the pair: the whole pair is needed.
    assert await token_budget(5, count=one).select(ms) == Success(
        (SYSTEM, *ms[2:])
    )
    assert await token_budget(4, count=one).select(ms) == Failure(
        HistoryBudgetExceeded(5, 4)
    )


async def test_single_giant_message_over_budget_fails() -> None:
    """One user message larger than the budget is a typed failure."""
    ms = [Message.user("x" * 4000)]
    result = await token_budget(100).select(ms)
    assert result == Failure(HistoryBudgetExceeded(1004, 100))
    assert str(result.failure()) == (
        "the preamble and the newest turn need 1004 tokens, over the budget "
        "of 100"
    )


async def test_token_budget_counts_only_what_it_needs() -> None:
    """The counter is not called for messages older than the budget's end."""
    seen: list[str] = []

    def counting(m: Message) -> int:
        seen.append(m.content)
        return 1

    ms = conversation(50)
    await token_budget(3, count=counting).select(ms)
    assert seen == ["You are helpful.", "a49", "q49", "a48"]


def test_approximate_tokens_counts_text_and_tool_calls() -> None:
    """About four characters a token, plus overhead, arguments included."""
    assert approximate_tokens(Message.user("")) == 4
    assert approximate_tokens(Message.user("abcde")) == 6
    with_call = Message.assistant(
        tool_calls=[ToolCall("id", "abcd", "x" * 12)]
    )
    assert approximate_tokens(with_call) == 8


async def test_summary_request_names_tool_calls_and_results() -> None:
    """Dropped tool traffic is rendered with the tools' names."""
    ms = [
        SYSTEM,
        Message.user("weather?"),
        CALL,
        RESULT_1,
        RESULT_2,
        Message.assistant("sunny at noon", name="helper"),
        Message.user("thanks"),
    ]
    model = ScriptedModel(Reply.text("asked the weather"))
    with model:
        view = (await summarizing(model, keep=window(1)).select(ms)).unwrap()
    assert view == (
        SYSTEM,
        Message.system(PREFIX + "asked the weather"),
        ms[6],
    )
    assert model.requests[0].messages[1].content == (
        "user: weather?\n"
        'assistant: checking [calls weather {"city": "Lyon"}] [calls time {}]\n'
        "tool weather: sunny\n"
        "tool time: noon\n"
        "assistant (helper): sunny at noon"
    )


async def test_summary_leaves_results_pinned_to_the_preamble_in_view() -> None:
    """Pinned results stay; the summary goes just before the kept suffix."""
    q0, a0, q1 = (
        Message.user("q0"),
        Message.assistant("a0"),
        Message.user("q1"),
    )
    ms = [CALL, RESULT_1, q0, RESULT_2, a0, q1]
    model = ScriptedModel(Reply.text("q0 was asked"))
    view = (await summarizing(model, keep=window(1)).select(ms)).unwrap()
    summary = Message.system(PREFIX + "q0 was asked")
    assert view == (CALL, RESULT_1, RESULT_2, summary, q1)
    assert model.requests[0].messages[1].content == "user: q0\nassistant: a0"


async def test_summarizing_returns_keeps_failure() -> None:
    """When keep itself fails, that failure is the policy's result."""
    model = ScriptedModel()
    policy = summarizing(model, keep=token_budget(5))
    result = await policy.select([Message.user("x" * 100)])
    assert result == Failure(HistoryBudgetExceeded(29, 5))
    assert not model.requests


def test_factories_build_their_policies() -> None:
    """Each factory returns its frozen policy value."""
    model = ScriptedModel()
    assert full() == Full()
    assert window(3) == Window(3)
    assert token_budget(9) == TokenBudget(9, approximate_tokens)
    assert summarizing(model, keep=full(), instructions="x") == Summarizing(
        model, Full(), None, "x"
    )


def test_public_surface_is_a_tuple_with_final_classes() -> None:
    """__all__ is a tuple of real names; policy classes are final."""
    module = importlib.import_module("pipeline.history")
    assert isinstance(module.__all__, tuple)
    assert module.SUMMARY_PREFIX == PREFIX
    for name in module.__all__:
        obj = getattr(module, name)
        if inspect.isclass(obj) and name != "HistoryPolicy":
            assert getattr(obj, "__final__", False), name
