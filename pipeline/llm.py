"""Handlers and conditions that ask a model: policy, summarize, llm_condition."""

from __future__ import annotations

import json

from collections.abc import Callable
from typing import TYPE_CHECKING, final

import attrs
import cattrs

from returns.result import Failure, Result, Success

from . import failures
from ._combinators import Condition, condition
from ._context import Context
from ._depth import loads
from ._handler import Handler
from ._messages import Message
from ._moved import moved
from ._runners import ok
from ._serde import make_converter
from .failures import BudgetExceeded, ModelError, PipelineError
from .models._types import Model, ModelRequest, ResponseSchema
from .runs import generate


__all__ = (
    "PolicyResult",
    "llm_condition",
    "policy",
    "summarize",
)

_CONVERTER = make_converter()

_SUMMARY_INSTRUCTIONS = (
    "Your task is to create a concise running summary of responses and "
    "information in the provided text, focusing on key and potentially "
    "important information to remember. You will receive the current summary "
    "and your latest responses. Combine them, adding relevant key information "
    "from the latest development in 1st person past tense and keeping the "
    "summary concise."
)


@final
@attrs.frozen
class PolicyResult:
    """A policy model's verdict.

    .. versionadded:: 0.1.0
    """

    valid: bool
    reason: str
    violation: str = ""


_POLICY_SCHEMA = ResponseSchema(
    "ValidationResult",
    {
        "type": "object",
        "properties": {
            "valid": {
                "type": "boolean",
                "description": "Whether the content passes policy validation",
            },
            "reason": {
                "type": "string",
                "description": "Explanation for the validation result",
            },
            "violation": {
                "type": "string",
                "description": "Description of the specific violation if any",
            },
        },
        "required": ["valid", "reason", "violation"],
        "additionalProperties": False,
    },
    "Result of policy validation check",
)


def _verdict(
    text: str, kind: type[PolicyResult]
) -> Result[PolicyResult, failures.BadVerdict]:
    if not text.strip():
        return Failure(failures.BadVerdict(text, "empty answer"))
    try:
        return Success(_CONVERTER.structure(loads(text, "the verdict"), kind))
    except (
        ValueError,
        TypeError,
        KeyError,
        cattrs.BaseValidationError,
    ) as exc:
        return Failure(failures.BadVerdict(text, type(exc).__name__))


def policy(
    model: Model,
    system_prompt: str,
    *,
    name: str = "policy",
    on_result: Callable[
        [Context, PolicyResult], Result[Context, PipelineError]
    ]
    | None = None,
) -> Handler[
    Context,
    Context,
    failures.PolicyViolation
    | failures.BadVerdict
    | ModelError
    | PipelineError,
]:
    """Validate the conversation with a model that answers valid/reason/violation.

    Without *on_result*: an invalid verdict is a :class:`~pipeline.failures.PolicyViolation`
    failure carrying the reason; a valid one passes the context through
    unchanged.  With *on_result*, it decides (given the context and verdict).

    .. versionadded:: 0.1.0
    """

    async def run_policy(ctx: Context) -> Result[Context, PipelineError]:
        request = ModelRequest(
            (Message.system(system_prompt), *ctx.messages),
            response_schema=_POLICY_SCHEMA,
        )
        answer = await generate(model, request)
        if not ok(answer):
            return Failure(answer.failure())
        verdict = _verdict(answer.unwrap().text, PolicyResult)
        if not ok(verdict):
            return Failure(verdict.failure())
        result: PolicyResult = verdict.unwrap()
        if on_result is not None:
            return on_result(ctx, result)
        if not result.valid:
            return Failure(
                failures.PolicyViolation(
                    result.reason, result.violation, path=(name,)
                )
            )
        return Success(ctx)

    return Handler(run_policy, name)


def summarize(
    model: Model,
    system_message: str,
    *,
    key: str = "summary",
    instructions: str = _SUMMARY_INSTRUCTIONS,
    name: str = "summarize",
) -> Handler[Context, Context, ModelError | BudgetExceeded]:
    """Fold the conversation into a running summary.

    The summary so far lives in the context's metadata under *key*, never in
    the handler, so one handler serves any number of threads at once.  The
    result's history is one system message: *system_message* followed by
    ``<summary>...</summary>``.

    .. versionadded:: 0.1.0
    """

    async def run_summarize(
        ctx: Context,
    ) -> Result[Context, ModelError | BudgetExceeded]:
        current = ctx.metadata.get(key, "")
        latest = json.dumps([_CONVERTER.unstructure(m) for m in ctx.messages])
        prompt = f'Current Summary:\n""" {current} """\n\nLatest Responses:\n""" {latest} """'
        answer = await generate(
            model,
            ModelRequest((Message.system(instructions), Message.user(prompt))),
        )
        if not ok(answer):
            return Failure(answer.failure())
        summary = answer.unwrap().text
        note = Message.system(
            f"{system_message}\n\n<summary>{summary}</summary>"
        )
        return Success(ctx.with_messages([note]).set(key, summary))

    return Handler(run_summarize, name)


_BOOL_SCHEMA = ResponseSchema(
    "boolean_response",
    {
        "type": "object",
        "properties": {"bool": {"type": "boolean"}},
        "required": ["bool"],
        "additionalProperties": False,
    },
    "Requires a boolean response",
)


def llm_condition(
    model: Model, prompt: str, *, name: str | None = None
) -> Condition[Context, ModelError | failures.BadVerdict | BudgetExceeded]:
    """A switch/if condition a model judges: ``{"bool": true|false}``.

    The model sees *prompt* and the latest message of the conversation.

    .. versionadded:: 0.1.0
    """

    async def judge(
        ctx: Context,
    ) -> Result[bool, ModelError | failures.BadVerdict | BudgetExceeded]:
        last = ctx.last.content if ctx.last else ""
        request = ModelRequest(
            (
                Message.system(
                    "Answer the question about the conversation with a boolean."
                ),
                Message.user(f"{prompt}\n\nLatest message:\n{last}"),
            ),
            response_schema=_BOOL_SCHEMA,
        )
        answer = await generate(model, request)
        if not ok(answer):
            return Failure(answer.failure())
        text = answer.unwrap().text
        try:
            value = loads(text, "the answer")
        except ValueError:  # NestedTooDeeply included
            return Failure(failures.BadVerdict(text, "not JSON"))
        if not (isinstance(value, dict) and type(value.get("bool")) is bool):
            return Failure(
                failures.BadVerdict(text, 'expected {"bool": true|false}')
            )
        return Success(value["bool"])

    return condition(judge, name=name or f"llm({prompt[:30]})")


# Failure values live in pipeline.failures; their old paths here warn.
_MOVED: dict[str, str] = {
    "BadVerdict": "pipeline.failures:BadVerdict",
    "PolicyViolation": "pipeline.failures:PolicyViolation",
}

if not TYPE_CHECKING:  # type checkers refuse the old paths
    __getattr__ = moved(__name__, _MOVED)
