"""Fallback: ``fallback(model_a, model_b)`` and ``or_else`` for handlers."""

from __future__ import annotations

import anyio
import pytest

from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from returns.result import Failure, Result, Success

from pipeline import (
    Agent,
    Budget,
    Context,
    Handler,
    Message,
    handler,
    or_else,
    run,
)
from pipeline.errors import ConstructionError
from pipeline.failures import AllFailed, BudgetExceeded, ModelError
from pipeline.models import Fallback, ModelRequest, fallback
from pipeline.testing import Reply, ScriptedModel


@handler
async def down(x: int) -> Result[int, str]:
    calls.append(f"down({x})")
    return Failure("down")


@handler
async def refuses(x: int) -> Result[int, ValueError]:
    calls.append(f"refuses({x})")
    return Failure(ValueError("bad input"))


@handler
async def up(x: int) -> Result[int, str]:
    calls.append(f"up({x})")
    return Success(x * 10)


calls: list[str] = []


@pytest.fixture(autouse=True)
def _fresh() -> None:
    calls.clear()


async def test_or_else_runs_the_next_only_after_a_failure() -> None:
    """The first success wins and nothing after it runs (unlike ``|``)."""
    assert await or_else(up, down)(2) == Success(20)
    assert calls == ["up(2)"]
    calls.clear()
    assert await or_else(down, up, down)(3) == Success(30)
    assert calls == ["down(3)", "up(3)"]


async def test_or_else_keeps_every_attempts_failure_in_order() -> None:
    """All failed: ``AllFailed`` holds each failure, in order."""
    out = await or_else(down, down, name="backup")(1)
    assert out == Failure(AllFailed(("down", "down"), path=("backup",)))
    assert calls == ["down(1)", "down(1)"]


async def test_or_else_stops_at_a_failure_type_not_listed() -> None:
    """Only listed failure types move on; the chain ends at the first other."""
    h = or_else(refuses, up, on=(str,))
    out = await h(4)
    assert calls == ["refuses(4)"]
    failure = out.failure()
    assert isinstance(failure, AllFailed)
    assert len(failure.failures) == 1
    assert isinstance(failure.failures[0], ValueError)
    calls.clear()
    assert await or_else(down, up, on=(str,))(4) == Success(40)


async def test_or_else_is_cancelled_between_attempts() -> None:
    """A cancelled caller runs no attempt."""
    with anyio.CancelScope() as cs:
        cs.cancel()
        await or_else(down, up)(1)
    assert calls == []


def test_or_else_refuses_what_cannot_run() -> None:
    with pytest.raises(ConstructionError, match="at least one"):
        or_else()
    with pytest.raises(ConstructionError, match="failure types"):
        or_else(up, on=())
    with pytest.raises(ConstructionError, match="failure types"):
        or_else(up, on=("str",))  # type: ignore[arg-type]


def test_or_else_repr_names_it() -> None:
    assert "or_else(up, down)" in repr(or_else(up, down))


def _user(text: str) -> Context:
    return Context.of(Message.user(text))


async def test_fallback_calls_the_backup_only_after_a_failure() -> None:
    """The backup answers when the primary failed; budgets count two calls,
    each under its own model name."""
    with (
        ScriptedModel(Reply.error("overloaded", status=529), name="a") as a,
        ScriptedModel(Reply.text("from b"), name="b") as b,
    ):
        agent = Agent("x", fallback(a, b))
        done = await run(agent, _user("hi"), budget=Budget(model_calls=5))
    assert done.result.unwrap().messages[-1].content == "from b"
    assert done.usage.model_calls == 2
    assert len(a.requests) == len(b.requests) == 1


async def test_fallback_never_calls_the_backup_after_a_success() -> None:
    with (
        ScriptedModel(Reply.text("from a"), name="a") as a,
        ScriptedModel(name="b") as b,
    ):
        done = await run(Agent("x", fallback(a, b)), _user("hi"))
    assert done.result.unwrap().messages[-1].content == "from a"
    assert done.usage.model_calls == 1
    assert b.requests == []


async def test_fallback_failure_keeps_the_chain() -> None:
    """Every model failed: the last failure carries the earlier ones."""
    first_err = Reply.error("rate limited", status=429, provider="a")
    last_err = Reply.error("down", status=503, provider="b")
    with (
        ScriptedModel(first_err, name="a") as a,
        ScriptedModel(last_err, name="b") as b,
    ):
        model = fallback(a, b)
        out = await model.generate(ModelRequest([Message.user("hi")]))
    err = out.failure()
    assert err.provider == "b"
    assert err.tried == (first_err,)
    assert "after 1 failed before it" in str(err)


async def test_fallback_when_chooses_which_failures_move_on() -> None:
    """A failure *when* refuses ends the chain: the backup is never called."""
    refused = Reply.error("bad request", status=400)
    with (
        ScriptedModel(refused, name="a") as a,
        ScriptedModel(name="b") as b,
    ):
        model = fallback(a, b, when=lambda e: e.status in (429, 503))
        done = await run(Agent("x", model), _user("hi"))
    assert done.result.failure().tried == ()  # type: ignore[union-attr]
    assert done.usage.model_calls == 1
    assert b.requests == []


async def test_fallback_budget_counts_only_calls_made() -> None:
    """A budget of one call: the backup is refused, never called."""
    with (
        ScriptedModel(Reply.error("down"), name="a") as a,
        ScriptedModel(name="b") as b,
    ):
        agent = Agent("x", fallback(a, b))
        done = await run(agent, _user("hi"), budget=Budget(model_calls=1))
    assert isinstance(done.result.failure(), BudgetExceeded)
    assert done.usage.model_calls == 1
    assert b.requests == []


def test_fallback_refuses_what_is_not_a_model() -> None:
    with pytest.raises(ConstructionError, match="at least one"):
        fallback()
    with pytest.raises(ConstructionError, match="argument 1 is of type int"):
        fallback(ScriptedModel(), 3)  # type: ignore[arg-type]


def test_fallback_name_lists_its_models() -> None:
    model = fallback(ScriptedModel(name="a"), ScriptedModel(name="b"))
    assert isinstance(model, Fallback)
    assert model.name == "fallback(scripted:a, scripted:b)"


def test_model_error_without_chain_reads_as_before() -> None:
    assert str(ModelError("p", "m", 500)) == "p (HTTP 500): m"


class Listed:
    """A failure type or_else moves on from."""


class Other:
    """A failure type that ends the chain."""


def _attempt(
    i: int, outcome: str, ran: list[int]
) -> Handler[int, int, object]:
    @handler
    async def attempt(x: int) -> Result[int, object]:
        ran.append(i)
        if outcome == "ok":
            return Success(x + i)
        return Failure(Listed() if outcome == "listed" else Other())

    return attempt


@given(
    outcomes=st.lists(
        st.sampled_from(["ok", "listed", "other"]), min_size=1, max_size=6
    )
)
async def test_or_else_runs_exactly_up_to_the_first_success_or_other_failure(
    outcomes: list[str],
) -> None:
    """Property: attempts run in order, each only after a listed failure of
    the one before; the result is the first success, else every failure."""
    ran: list[int] = []
    h = or_else(
        *(_attempt(i, o, ran) for i, o in enumerate(outcomes)), on=(Listed,)
    )
    out = await h(100)
    stop = next(
        (i for i, o in enumerate(outcomes) if o != "listed"), len(outcomes) - 1
    )
    assert ran == list(range(stop + 1))
    if outcomes[stop] == "ok":
        assert out == Success(100 + stop)
    else:
        failure = out.failure()
        assert isinstance(failure, AllFailed)
        kinds = [
            "listed" if isinstance(f, Listed) else "other"
            for f in failure.failures
        ]
        assert kinds == outcomes[: stop + 1]


async def test_fallback_traces_each_call_made() -> None:
    """Traced: one span per model called, under its own name; none for a
    model never called."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with (
        ScriptedModel(Reply.error("down"), name="a") as a,
        ScriptedModel(Reply.text("b here"), name="b") as b,
        ScriptedModel(name="c") as c,
    ):
        agent = Agent("x", fallback(a, b, c))
        done = await run(agent, _user("hi"), tracer_provider=provider)
    assert done.result.unwrap().messages[-1].content == "b here"
    models = [
        s.attributes.get("gen_ai.request.model")
        for s in exporter.get_finished_spans()
        if s.attributes and s.attributes.get("gen_ai.operation.name") == "chat"
    ]
    assert models == ["a", "b"]
    assert c.requests == []
    provider.shutdown()
