"""Budgets: limits checked before every model and tool call, shared by
every branch; usage totals on the result."""

from __future__ import annotations

import math

from collections.abc import Sequence
from typing import Any

import anyio
import attrs
import pytest

from hypothesis import given, settings
from hypothesis import strategies as st
from returns.result import Failure, Result, Success

from pipeline import (
    Agent,
    Budget,
    Context,
    Message,
    Output,
    Price,
    RunUsage,
    ToolCall,
    Usage,
    graph,
    handler,
    map_reduce,
    run,
    scope,
    swarm,
    tool,
)
from pipeline.errors import ConstructionError
from pipeline.failures import BudgetExceeded, ModelError
from pipeline.graph import END
from pipeline.llm import summarize
from pipeline.middleware import retry
from pipeline.models import DeltaSink, ModelRequest, ModelResponse
from pipeline.runs import current
from pipeline.testing import Reply, ScriptedModel


HI = Context.of(Message.user("hi"))


@attrs.define
class Costly:
    """A model whose every call costs the given tokens: a tool call each
    time, then an answer; it checks that no call starts once spent."""

    label: str
    costs: Sequence[int]
    yields: Sequence[int] = ()
    calls: int = 0
    finished: int = 0
    started: list[str] = attrs.Factory(list)

    @property
    def name(self) -> str:
        return f"test:{self.label}"

    async def generate(
        self,
        request: ModelRequest,  # noqa: ARG002  # the Model protocol's
        *,
        on_delta: DeltaSink | None = None,  # noqa: ARG002
    ) -> Result[ModelResponse, ModelError]:
        opened = current()
        assert opened is None or opened.ledger.exceeded is None, (
            "a call started after the budget was spent"
        )
        i = self.calls
        self.calls += 1
        self.started.append(self.label)
        for _ in range(self.yields[i] if i < len(self.yields) else 0):
            await anyio.lowlevel.checkpoint()
        usage = Usage(self.costs[i], 0)
        self.finished += 1
        if i < len(self.costs) - 1:
            call = ToolCall(f"c{i}", "work", "{}")
            message = Message.assistant("", tool_calls=[call], usage=usage)
            return Success(ModelResponse(message, "tool_calls"))
        return Success(ModelResponse(Message.assistant("done", usage=usage)))


tool_runs: list[str] = []


@tool
async def work() -> str:
    """Do some work."""
    opened = current()
    assert opened is None or opened.ledger.exceeded is None, (
        "a tool started after the budget was spent"
    )
    tool_runs.append("work")
    return "worked"


def costly(label: str, *costs: int) -> tuple[Agent, Costly]:
    model = Costly(label, costs)
    return Agent(label, model, tools=[work], max_turns=50), model


async def test_tokens_limit_refuses_the_next_call() -> None:
    """Once the tokens are spent, the next model call does not start."""
    agent, model = costly("a", 10, 10, 10, 10)
    done = await run(agent, HI, budget=Budget(tokens=15))
    failure = done.result.failure()
    assert isinstance(failure, BudgetExceeded)
    assert (failure.limit, failure.maximum, failure.spent) == (
        "tokens",
        15,
        20,
    )
    assert model.calls == 2
    # The second reply's tool call was refused too: the tokens were spent.
    assert done.usage == RunUsage(
        input_tokens=20,
        model_calls=2,
        tool_calls=1,
        elapsed=done.usage.elapsed,
    )
    assert str(failure).startswith("budget exceeded: tokens spent 20 of 15")


async def test_model_calls_limit_is_exact() -> None:
    """model_calls=2 allows exactly two calls."""
    agent, model = costly("a", 1, 1, 1)
    done = await run(agent, HI, budget=Budget(model_calls=2))
    failure = done.result.failure()
    assert isinstance(failure, BudgetExceeded)
    assert failure.limit == "model_calls"
    assert model.calls == 2
    assert done.usage.model_calls == 2


async def test_tool_calls_are_reserved_as_a_batch() -> None:
    """A reply asking for more tools than are left runs none of them."""
    tool_runs.clear()
    model = ScriptedModel(
        Reply.tool_calls(("work", {}, "1"), ("work", {}, "2")),
        Reply.text("never"),
        strict=False,
    )
    done = await run(
        Agent("a", model, tools=[work]), HI, budget=Budget(tool_calls=1)
    )
    failure = done.result.failure()
    assert isinstance(failure, BudgetExceeded)
    assert (failure.limit, failure.spent) == ("tool_calls", 0)
    assert failure.path == ("a",)
    assert tool_runs == []
    assert done.usage.tool_calls == 0


# -- repairs: re-asks after invalid output, malformed tool calls ---------------


@attrs.frozen
class Verdict:
    """A structured answer."""

    score: int


@tool
async def double(n: int) -> str:
    """Double a number."""
    return str(2 * n)


async def test_output_repairs_are_counted_and_limited() -> None:
    """Each re-ask after an answer that does not decode is a repair; with
    repairs=0 the re-ask is refused before it is sent."""
    with ScriptedModel(Reply.text("{}"), Reply.text('{"score": 3}')) as model:
        agent = Agent("judge", model, output=Output(Verdict, retries=2))
        done = await run(agent, HI, budget=Budget(repairs=1))
    assert done.result.unwrap().messages[-1].content == '{"score": 3}'
    assert (done.usage.repairs, done.usage.model_calls) == (1, 2)
    with ScriptedModel(Reply.text("{}")) as model:
        agent = Agent("judge", model, output=Output(Verdict, retries=2))
        refused = await run(agent, HI, budget=Budget(repairs=0))
    failure = refused.result.failure()
    assert isinstance(failure, BudgetExceeded)
    assert (failure.limit, failure.maximum, failure.spent) == ("repairs", 0, 0)
    assert failure.path == ("judge",)
    assert refused.usage.model_calls == 1  # no repair call was made


async def test_malformed_tool_calls_are_repairs() -> None:
    """A call with arguments that do not decode, or to an unknown tool, is
    a repair (its error result still goes back); well-formed calls are not.
    Past the limit, the next model call is refused."""
    bad = Reply.tool_calls(
        ("double", {"n": "two"}, "c1"),
        ("triple", {"n": 2}, "c2"),
        ("double", {"n": 2}, "c3"),
    )
    with ScriptedModel(bad, Reply.text("sorry")) as model:
        agent = Agent("calc", model, tools=[double])
        done = await run(agent, HI, budget=Budget(repairs=2))
    assert done.result.unwrap().messages[-1].content == "sorry"
    assert (done.usage.repairs, done.usage.tool_calls) == (2, 3)
    results = [m.content for m in model.requests[1].messages[-3:]]
    assert results[0].startswith("error: invalid arguments for 'double'")
    assert "two" not in results[0]
    assert results[1].startswith("error:")
    assert results[2] == "4"
    with ScriptedModel(bad) as model:
        agent = Agent("calc", model, tools=[double])
        refused = await run(agent, HI, budget=Budget(repairs=1))
    failure = refused.result.failure()
    assert isinstance(failure, BudgetExceeded)
    assert (failure.limit, failure.maximum, failure.spent) == ("repairs", 1, 2)
    assert refused.usage.model_calls == 1
    good = ScriptedModel(Reply.tool_call("double", {"n": 1}), Reply.text("2"))
    fine = await run(Agent("calc", good, tools=[double]), HI, budget=Budget())
    assert fine.usage.repairs == 0


async def test_nested_scopes_count_repairs_in_both() -> None:
    """A repair inside an inner scope counts against the outer budget too."""
    bad = Reply.tool_call("double", {"n": "x"})
    with ScriptedModel(bad, Reply.text("ok")) as model:
        agent = Agent("calc", model, tools=[double])
        with (
            scope(budget=Budget(repairs=1)) as outer,
            scope(budget=Budget()) as inner,
        ):
            out = await agent(HI)
    assert out.unwrap().messages[-1].content == "ok"
    assert (outer.usage.repairs, inner.usage.repairs) == (1, 1)


async def test_cost_from_the_price_table() -> None:
    """Cost is priced per million tokens from the user's table."""
    model = ScriptedModel(
        Reply.text("x", usage=Usage(1_000_000, 500_000)), name="m"
    )
    prices = {"scripted:m": Price(input=2.0, output=8.0)}
    done = await run(
        Agent("a", model), HI, budget=Budget(cost=10.0, prices=prices)
    )
    assert type(done.result) is Success
    assert math.isclose(done.usage.cost, 6.0)
    assert done.usage.total_tokens == 1_500_000


async def test_cost_limit_refuses_an_unpriced_model() -> None:
    """A cost limit cannot be kept for a model missing from the table."""
    model = ScriptedModel(Reply.text("x"), name="m", strict=False)
    done = await run(Agent("a", model), HI, budget=Budget(cost=1.0))
    failure = done.result.failure()
    assert isinstance(failure, BudgetExceeded)
    assert (failure.limit, failure.model) == ("cost", "scripted:m")
    assert "no price for model 'scripted:m'" in str(failure)
    assert model.requests == []


async def test_wall_time_refuses_calls_after_the_deadline() -> None:
    """wall_time counts from the scope's start on anyio's clock."""

    @tool
    async def wait() -> str:
        """Wait a while."""
        # Five seconds pass (white-box: the start moves back instead of
        # the test sleeping).
        opened = current()
        assert opened is not None
        opened.ledger.started -= 5.0
        return "waited"

    model = ScriptedModel(
        Reply.tool_call("wait"), Reply.text("late"), strict=False
    )
    done = await run(
        Agent("a", model, tools=[wait]), HI, budget=Budget(wall_time=4.0)
    )
    failure = done.result.failure()
    assert isinstance(failure, BudgetExceeded)
    assert failure.limit == "wall_time"
    assert failure.spent >= 5.0
    assert len(model.requests) == 1
    assert done.usage.elapsed >= 5.0


async def test_usage_is_shared_by_branches_and_nested_scopes() -> None:
    """Branches of & charge one ledger; an inner scope charges both."""
    a, _ = costly("a", 5, 5)
    b, _ = costly("b", 7)
    with scope(budget=Budget(tokens=100)) as outer:
        with scope(budget=Budget(tokens=50)) as inner:
            out = await (a & b)(HI)
        assert type(out) is Success
        assert inner.usage.total_tokens == 17
        c, _ = costly("c", 1)
        await c(HI)
    assert outer.usage.total_tokens == 18
    assert (outer.usage.model_calls, outer.usage.tool_calls) == (4, 1)


async def test_inner_scope_cannot_spend_past_its_parent() -> None:
    """The enclosing budget binds calls made in a nested scope."""
    agent, model = costly("a", 10, 10, 10)
    with scope(budget=Budget(tokens=10)), scope(budget=Budget(tokens=1000)):
        out = await agent(HI)
    assert isinstance(out.failure(), BudgetExceeded)
    assert model.calls == 1


async def test_swarm_and_graph_share_the_budget() -> None:
    """A swarm's agents and a graph's nodes all draw on one budget."""
    front = ScriptedModel(Reply.tool_call("transfer_to_back"), name="f")
    back = ScriptedModel(Reply.text("x"), name="b", strict=False)
    team = (
        swarm.builder()
        .agent("front", Agent("front", front), handoffs=["back"])
        .agent("back", Agent("back", back))
        .entry("front")
        .build()
    )
    done = await run(team, HI, budget=Budget(model_calls=1))
    assert isinstance(done.result.failure(), BudgetExceeded)
    assert back.requests == []

    @handler(name="n")
    async def node(ctx: Context) -> Result[Context, Any]:
        return await Agent("n", ScriptedModel(Reply.text("y")))(ctx)

    g = (
        graph.builder(Context)
        .node("one", node)
        .node("two", node)
        .entry("one")
        .edge("one", "two")
        .edge("two", END)
        .build()
    )
    done_graph = await run(g, HI, budget=Budget(model_calls=1))
    assert isinstance(done_graph.result.failure(), BudgetExceeded)
    assert done_graph.usage.model_calls == 1


async def test_retry_does_not_retry_a_spent_budget() -> None:
    """retry() gives BudgetExceeded back at once."""
    agent, model = costly("a", 1, 1)
    done = await run(agent.use(retry(5)), HI, budget=Budget(model_calls=1))
    assert isinstance(done.result.failure(), BudgetExceeded)
    assert model.calls == 1


async def test_llm_handlers_are_budgeted() -> None:
    """summarize's model call is checked like an agent's."""
    model = ScriptedModel(Reply.text("s"), strict=False)
    done = await run(summarize(model, "sys"), HI, budget=Budget(model_calls=0))
    assert isinstance(done.result.failure(), BudgetExceeded)
    assert model.requests == []


@pytest.mark.parametrize(
    "bad",
    [
        {"tokens": -1},
        {"cost": math.nan},
        {"model_calls": True},
        {"model_calls": 2.5},  # a count is whole
        {"tokens": 3.0},
        {"tool_calls": "3"},
        {"cost": 10**400},  # no float holds it (was OverflowError)
        {"wall_time": -(10**400)},
        {"repairs": -1},
        {"repairs": 1.0},
    ],
    ids=lambda bad: (
        f"{next(iter(bad))}-{type(next(iter(bad.values()))).__name__}"
    ),
)
def test_budget_validation(bad: dict[str, Any]) -> None:
    """Negative, non-finite, boolean, fractional counts and numbers past a
    float's range are refused by name, as ConstructionError."""
    with pytest.raises(ConstructionError, match=next(iter(bad))):
        Budget(**bad)


def test_price_validation_and_large_counts() -> None:
    """Prices are finite floats (10**400 is refused, not OverflowError);
    count limits take whole numbers of any size."""
    for bad in (-1.0, 10**400, math.inf, True):
        with pytest.raises(ConstructionError, match="input"):
            Price(input=bad, output=0.0)
    assert Budget(prices={"m": Price(1, 2)}).prices["m"].cost(1, 1) == 3e-6
    huge = Budget(tokens=10**400, model_calls=10**400, cost=1)
    assert huge.tokens == 10**400


@pytest.mark.parametrize("reported", [(-1000, 0), (0, -5), (-1, -1)], ids=repr)
async def test_negative_usage_does_not_lower_the_ledger(
    reported: tuple[int, int], caplog: pytest.LogCaptureFixture
) -> None:
    """A model reporting negative token counts (a malformed response)
    counts 0 for them, with a warning: later calls cannot spend past the
    limit on the credit."""
    model = ScriptedModel(
        Reply.text("x", usage=Usage(*reported)),
        Reply.text("y", usage=Usage(50, 50)),
        Reply.text("z", usage=Usage(50, 50)),
    )
    agent = Agent("a", model)
    done = await run(agent >> agent >> agent, HI, budget=Budget(tokens=100))
    failure = done.result.failure()
    assert isinstance(failure, BudgetExceeded)
    assert failure.limit == "tokens"
    assert done.usage.model_calls == 2
    assert done.usage.total_tokens == 100
    assert "not a count >= 0; counted as 0" in caplog.text


async def test_no_scope_no_checks() -> None:
    """Outside a scope nothing is counted or refused."""
    agent, model = costly("a", 1000, 1000)
    assert current() is None
    out = await agent(HI)
    assert type(out) is Success
    assert model.calls == 2


# -- the property ---------------------------------------------------------------

branch_costs = st.lists(
    st.integers(min_value=0, max_value=50), min_size=1, max_size=6
)


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(
    branches=st.lists(branch_costs, min_size=1, max_size=6),
    yields=st.lists(st.integers(0, 3), min_size=36, max_size=36),
    tokens=st.none() | st.integers(0, 200),
    model_calls=st.none() | st.integers(0, 20),
    tool_calls=st.none() | st.integers(0, 20),
    form=st.sampled_from(["both", "map_reduce"]),
)
async def test_budget_is_never_overspent(
    branches: list[list[int]],
    yields: list[int],
    tokens: int | None,
    model_calls: int | None,
    tool_calls: int | None,
    form: str,
) -> None:
    """Random fan-outs of agents with random costs: tokens end within the
    budget plus one call in flight per branch, call counts within their
    limits exactly, and no call starts after BudgetExceeded."""
    tool_runs.clear()
    models = [
        Costly(f"b{i}", costs, yields[i * 6 : i * 6 + 6])
        for i, costs in enumerate(branches)
    ]
    agents = [Agent(m.label, m, tools=[work], max_turns=50) for m in models]
    budget = Budget(
        tokens=tokens, model_calls=model_calls, tool_calls=tool_calls
    )
    if form == "both" and len(agents) > 1:
        target: Any = agents[0]
        for agent in agents[1:]:
            target = target & agent
    else:

        @handler(name="pick")
        async def pick(i: int) -> Result[Context, Any]:
            return await agents[i](HI)

        def reduce(
            _: object, results: tuple[Result[Context, Any], ...]
        ) -> Result[int, Any]:
            failed = [r.failure() for r in results if type(r) is not Success]
            return Failure(failed[0]) if failed else Success(len(results))

        target = map_reduce(
            lambda _: list(range(len(agents))),
            pick,
            reduce,
            max_concurrency=len(agents),
        )
    value: Any = HI if form == "both" and len(agents) > 1 else 0
    done = await run(target, value, budget=budget)
    usage = done.usage
    in_flight = sum(max(costs) for costs in branches)
    if tokens is not None:
        assert usage.total_tokens <= tokens + in_flight
    if model_calls is not None:
        assert usage.model_calls <= model_calls
    if tool_calls is not None:
        assert usage.tool_calls <= tool_calls
    assert usage.model_calls == sum(m.calls for m in models)
    assert usage.tool_calls == len(tool_runs)
    # A call cancelled in flight (a sibling failed under &) reported no
    # tokens; every call that answered is counted.
    assert usage.total_tokens == sum(
        sum(m.costs[: m.finished]) for m in models
    )
    if type(done.result) is Success:
        assert all(m.calls == len(m.costs) for m in models)
    else:
        assert isinstance(done.result.failure(), BudgetExceeded)
