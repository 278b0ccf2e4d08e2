"""Structured output an agent repairs: the type asked for, a validator, and
how many times the model may be asked again.

The agent loop (:mod:`pipeline._turns`) checks every final answer against
an :class:`Output`; an answer that does not decode, or that the validator
refuses, goes back to the model as a message naming the fields and the
reasons (never the value), up to :attr:`Output.retries` times.
"""

from __future__ import annotations

import re

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Generic, Protocol, TypeVar, final

import attrs

from returns.result import Failure, Result, Success

from ._decode import decode_json
from ._guards import OutputGuard
from ._messages import Message, Role
from .errors import ConstructionError
from .failures import InvalidOutput
from .models._types import ResponseSchema


__all__ = (
    "DEFAULT_OUTPUT_RETRIES",
    "HasText",
    "Output",
    "repair_request",
    "repairs_in",
)

T = TypeVar("T")

DEFAULT_OUTPUT_RETRIES = 1
"""Times the model is asked again when its answer does not fit (as
Pydantic AI's default)."""


class HasText(Protocol):
    """What has a final answer: an :class:`~pipeline.agents.AgentRun`."""

    @property
    def text(self) -> str:
        """The last assistant text."""
        ...


def _retries(value: int) -> int:
    if type(value) is not int or value < 0:
        msg = "Output: retries must be a whole number at least 0"
        raise ConstructionError(msg)
    return value


def _guards(guards: Iterable[OutputGuard[T]]) -> tuple[OutputGuard[T], ...]:
    return tuple(guards)


@final
@attrs.frozen(eq=False)
class Output(Generic[T]):
    """The structured answer an :class:`~pipeline.Agent` must give.

    *kind* is an attrs class (or any type :meth:`pipeline.models.ResponseSchema.of`
    describes); the agent asks for it with its JSON schema.  *validate*, if
    given, checks a decoded answer further: ``Success`` keeps it,
    ``Failure(reason)`` refuses it; the reason goes back to the model, so
    it must name fields and rules, never the value.  An answer that does
    not decode or is refused is sent back with the reason, and the model
    asked again, up to *retries* times (default
    1, as Pydantic AI); after that the run fails with
    :class:`~pipeline.failures.InvalidOutput`, whose ``attempts`` holds
    every attempt's reason.  *guards* (:class:`pipeline.agents.OutputGuard`)
    then check the valid answer, in order: one may send it back too
    (counting against *retries*) or stop the run.

    *validate* must be pure: :meth:`read` runs it again on the answer.

    .. versionadded:: 0.1.0
    """

    kind: type[T]
    validate: Callable[[T], Result[T, str]] | None = None
    retries: int = attrs.field(
        default=DEFAULT_OUTPUT_RETRIES, converter=_retries
    )
    guards: tuple[OutputGuard[T], ...] = attrs.field(
        default=(), converter=_guards
    )

    @property
    def name(self) -> str:
        """The type's name, as errors and the repair message show it."""
        return getattr(self.kind, "__name__", str(self.kind))

    @property
    def schema(self) -> ResponseSchema:
        """The response schema the model is asked to follow."""
        return ResponseSchema.of(self.kind)

    def check(self, text: str) -> Result[T, str]:
        """*text* decoded into *kind* and validated, or why not (field
        names and reasons, never the value)."""
        decoded = decode_json(text, self.kind)
        if type(decoded) is Failure or self.validate is None:
            return decoded
        return self.validate(decoded.unwrap())

    def read(self, answer: str | HasText) -> Result[T, InvalidOutput]:
        """The final answer of a run (an :class:`~pipeline.agents.AgentRun`
        or its text), decoded and validated."""
        text = answer if isinstance(answer, str) else answer.text
        checked = self.check(text)
        if type(checked) is Failure:
            reason = checked.failure()
            return Failure(
                InvalidOutput(self.name, reason, attempts=(reason,))
            )
        return Success(checked.unwrap())


_REFUSED = re.compile(
    r"Your answer was refused by the '[A-Za-z0-9_.-]+' check: "
)
_INVALID = re.compile(r"Your answer is not a valid [^:]*: ")
_AGAIN = ". Answer again."
_AGAIN_JSON = ". Answer again with JSON that fits the schema."


def repair_request(
    output: Output[Any], reason: str, guard: str | None = None
) -> Message:
    """The message asking the model again: what did not fit (or which
    guardrail refused it, and why), never the value."""
    if guard is not None:
        return Message.user(
            f"Your answer was refused by the {guard!r} check: {reason}{_AGAIN}"
        )
    return Message.user(
        f"Your answer is not a valid {output.name}: {reason}{_AGAIN_JSON}"
    )


def repairs_in(messages: Sequence[Message]) -> tuple[str, ...]:
    """The reasons of the repair requests among *messages*, what one run of
    an agent added (the only user messages there), in order."""
    found: list[str] = []
    for m in messages:
        if m.role is not Role.USER:
            continue
        text = m.content
        head = _INVALID.match(text)
        tail = _AGAIN_JSON
        if head is None:
            head, tail = _REFUSED.match(text), _AGAIN
        if head is not None and text.endswith(tail):
            found.append(text[head.end() : len(text) - len(tail)])
    return tuple(found)
