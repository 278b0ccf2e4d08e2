"""Type-level contract of scopes, budgets and secrets. Checked, never executed."""

# pyright: reportUnnecessaryTypeIgnoreComment=error

from __future__ import annotations

from typing import assert_type

from opentelemetry.sdk.trace import TracerProvider
from returns.result import Result, Success

from pipeline import (
    Agent,
    Budget,
    Context,
    Handler,
    Price,
    RunResult,
    RunUsage,
    Scope,
    Secret,
    handler,
    run,
    scope,
)
from pipeline.agents import AgentError
from pipeline.failures import BudgetExceeded, ModelError
from pipeline.llm import summarize
from pipeline.secrets import Resolver, resolver
from pipeline.testing import Reply, ScriptedModel


@handler
async def parse(text: str) -> Result[int, ValueError]:
    return Success(int(text))


agent = Agent("a", ScriptedModel(Reply.text("hi")))
budget = Budget(tokens=1000, cost=0.5, prices={"m": Price(1.0, 2.0)})
key = Secret("sk", ref="env:KEY")
found: Resolver = resolver({"k": "v"})


async def main() -> None:
    done = await run(parse, "1", budget=budget)
    assert_type(done, RunResult[int, ValueError])
    assert_type(done.result, Result[int, ValueError])
    assert_type(done.usage, RunUsage)
    ran = await run(agent, Context(), tracer_provider=TracerProvider())
    assert_type(ran.result, Result[Context, AgentError])
    with scope(budget=budget, secrets=found) as opened:
        assert_type(opened, Scope)
        assert_type(opened.usage.total_tokens, int)
        assert_type(opened.usage.repairs, int)
    await run(parse, 1)  # type: ignore[misc]  # the input must fit
    await run(parse, "1", budget=5)  # type: ignore[arg-type]
    with scope(tracer_provider="global"):  # type: ignore[arg-type]
        pass


assert_type(key, Secret[str])
assert_type(key.reveal(), str)
assert_type(Secret(3, ref="n").reveal(), int)
assert_type(Secret.env("KEY"), Secret[str])
number: Secret[object] = Secret(3, ref="n")  # covariant
text: str = key  # type: ignore[assignment]  # a Secret is not its value
Secret("sk")  # type: ignore[call-arg]  # a reference is required
assert_type(
    summarize(agent.model, "s"),
    Handler[Context, Context, ModelError | BudgetExceeded],
)
failure: AgentError = BudgetExceeded("tokens", 1, 2, RunUsage())
Budget(tokens="many")  # type: ignore[arg-type]
assert_type(Budget(repairs=3).repairs, int | None)
Budget(repairs="3")  # type: ignore[arg-type]
