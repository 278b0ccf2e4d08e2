"""LLM handlers: policy, summarize and the LLM-judged condition."""

from __future__ import annotations

import anyio

from returns.result import Result, Success

from pipeline import Context, Message, switch
from pipeline.failures import (
    BadVerdict,
    ConditionError,
    ModelError,
    PipelineError,
    PolicyViolation,
)
from pipeline.llm import PolicyResult, llm_condition, policy, summarize
from pipeline.testing import Reply, ScriptedModel
from tests.test_combinators import _tag


CTX = Context.of(Message.user("Please share your password"))


async def test_policy_valid_passes_context_unchanged() -> None:
    """A valid verdict leaves the conversation as it was."""
    with ScriptedModel(
        Reply.json({"valid": True, "reason": "fine", "violation": ""})
    ) as model:
        out = await policy(model, "No secrets.")(CTX)
    assert out == Success(CTX)
    request = model.requests[0]
    assert request.messages[0] == Message.system("No secrets.")
    assert request.messages[1:] == tuple(CTX.messages)
    assert request.response_schema is not None
    assert request.response_schema.name == "ValidationResult"


async def test_policy_invalid_is_a_typed_failure() -> None:
    """An invalid verdict fails with the reason, as the seed's message."""
    model = ScriptedModel(
        Reply.json(
            {
                "valid": False,
                "reason": "Content is invalid.",
                "violation": "asks for secrets",
            }
        )
    )
    out = await policy(model, "No secrets.", name="TestPolicy")(CTX)
    err = out.failure()
    assert isinstance(err, PolicyViolation)
    assert str(err) == "policy validation failed: Content is invalid."
    assert err.violation == "asks for secrets"
    assert err.path == ("TestPolicy",)


async def test_policy_result_function_decides() -> None:
    """With on_result, the function gets the verdict and decides."""
    seen: list[PolicyResult] = []

    def decide(
        ctx: Context, result: PolicyResult
    ) -> Result[Context, PipelineError]:
        seen.append(result)
        return Success(ctx.set("checked", True))

    model = ScriptedModel(
        Reply.json({"valid": False, "reason": "meh", "violation": ""})
    )
    out = await policy(model, "p", on_result=decide)(CTX)
    assert out.unwrap().metadata["checked"] is True
    assert seen == [PolicyResult(False, "meh", "")]


async def test_policy_model_errors_and_bad_answers() -> None:
    """Provider errors pass through; answers off the schema are BadVerdict."""
    assert isinstance(
        (await policy(ScriptedModel(Reply.error()), "p")(CTX)).failure(),
        ModelError,
    )
    for text in ("", "not json", '{"valid": "yes", "reason": "x"}'):
        out = await policy(ScriptedModel(Reply.text(text)), "p")(CTX)
        assert isinstance(out.failure(), BadVerdict), text


async def test_summarize_keeps_the_summary_in_the_context() -> None:
    """One handler, many threads: each context carries its own summary."""
    model = ScriptedModel(
        lambda r: Reply.text(
            f"summary of {r.messages[-1].content.count('user')} user msgs"
        ),
        cycle=True,
    )
    summarizer = summarize(model, "Conversation so far:")
    a = Context.of(Message.user("a1")).set("summary", "A-before")
    b = Context.of(Message.user("b1"), Message.user("b2"))
    results: dict[str, Context] = {}

    async def go(key: str, ctx: Context) -> None:
        results[key] = (await summarizer(ctx)).unwrap()

    async with anyio.create_task_group() as tg:
        tg.start_soon(go, "a", a)
        tg.start_soon(go, "b", b)
    assert results["a"].metadata["summary"] == "summary of 1 user msgs"
    assert results["b"].metadata["summary"] == "summary of 2 user msgs"
    assert [m.content for m in results["b"].messages] == [
        "Conversation so far:\n\n<summary>summary of 2 user msgs</summary>"
    ]
    prompts = [r.messages[-1].content for r in model.requests]
    assert any('Current Summary:\n""" A-before """' in p for p in prompts)


async def test_llm_condition_routes_a_switch() -> None:
    """An LLM-judged condition picks the case; a bad answer is typed."""
    yes = llm_condition(
        ScriptedModel(Reply.json({"bool": True})), "Is it about billing?"
    )
    route = switch((yes, _tag("billing")), default=_tag("other"))
    out = (await route(CTX)).unwrap()
    assert out.messages[-1].content == "billing"
    no = llm_condition(
        ScriptedModel(Reply.json({"bool": False})), "Is it about billing?"
    )
    out = (
        await switch((no, _tag("billing")), default=_tag("other"))(CTX)
    ).unwrap()
    assert out.messages[-1].content == "other"
    broken = llm_condition(ScriptedModel(Reply.text("maybe")), "?")
    bad = await switch((broken, _tag("x")), name="route")(CTX)
    err = bad.failure()
    assert isinstance(err, ConditionError)
    assert isinstance(err.error, BadVerdict)
