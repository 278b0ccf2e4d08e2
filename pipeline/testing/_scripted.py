"""Scripted models and agents: deterministic doubles for tests."""

from __future__ import annotations

import json

from collections.abc import Callable, Iterable, Sequence
from types import TracebackType
from typing import Any, TypeAlias, final

import attrs

from returns.result import Failure, Result, Success

from .._messages import Message, Role, ToolCall, Usage
from ..agents import AgentError, AgentRun
from ..errors import Unconsumed, UnexpectedCall
from ..failures import ModelError
from ..models._types import (
    DeltaSink,
    ModelRequest,
    ModelResponse,
    TextDelta,
    ToolCallDelta,
)


Step: TypeAlias = "ModelResponse | ModelError | Callable[[ModelRequest], ModelResponse | ModelError]"


@final
class Reply:
    """Builders for scripted model replies.

    .. versionadded:: 0.1.0
    """

    @staticmethod
    def text(text: str, *, usage: Usage | None = None) -> ModelResponse:
        """A plain answer."""
        return ModelResponse(
            Message.assistant(
                text, usage=usage or Usage(len(text), len(text.split()))
            ),
            "stop",
        )

    @staticmethod
    def tool_call(
        name: str,
        arguments: dict[str, Any] | str | None = None,
        *,
        call_id: str | None = None,
    ) -> ModelResponse:
        """A request to call one tool."""
        return Reply.tool_calls((name, arguments, call_id))

    @staticmethod
    def tool_calls(
        *calls: tuple[str, dict[str, Any] | str | None, str | None],
    ) -> ModelResponse:
        """A request to call several tools: ``(name, arguments, id)`` each."""
        made = tuple(
            ToolCall(
                i or f"call_{n}",
                name,
                args if isinstance(args, str) else json.dumps(args or {}),
            )
            for n, (name, args, i) in enumerate(calls)
        )
        return ModelResponse(
            Message.assistant("", tool_calls=made, usage=Usage(1, 1)),
            "tool_calls",
        )

    @staticmethod
    def json(value: object) -> ModelResponse:
        """A structured answer: *value* as JSON text."""
        return Reply.text(json.dumps(value))

    @staticmethod
    def error(
        message: str = "scripted failure",
        *,
        status: int | None = 500,
        provider: str = "scripted",
    ) -> ModelError:
        """A provider failure."""
        return ModelError(provider, message, status)


@final
class ScriptedModel:
    """A :class:`~pipeline.models.Model` that replays a script.

    Each call takes the next step (a response, a ``ModelError``, or a
    function of the request).  Strict by default: one call too many raises
    :class:`~pipeline.errors.UnexpectedCall`, and leaving ``with ScriptedModel(...)`` (or
    calling :meth:`assert_consumed`) with steps left raises
    :class:`~pipeline.errors.Unconsumed`.  *cycle* repeats the script forever instead.
    Streams answers in *chunk*-sized pieces when asked to.

    .. versionadded:: 0.1.0
    """

    def __init__(
        self,
        *steps: Step,
        name: str = "scripted",
        strict: bool = True,
        cycle: bool = False,
        chunk: int = 4,
    ) -> None:
        self._steps = list(steps)
        self._next = 0
        self._name = name
        self.strict = strict
        self.cycle = cycle
        self.chunk = max(1, chunk)
        self.requests: list[ModelRequest] = []

    @property
    def name(self) -> str:
        """``scripted:<name>``."""
        return f"scripted:{self._name}"

    @property
    def remaining(self) -> int:
        """Steps not used yet."""
        return 0 if self.cycle else len(self._steps) - self._next

    def _take(self, request: ModelRequest) -> ModelResponse | ModelError:
        if self._next >= len(self._steps):
            if self.cycle and self._steps:
                self._next = 0
            elif self.strict or not self._steps:
                msg = f"{self.name}: call {len(self.requests)} was not scripted ({len(self._steps)} steps)"
                raise UnexpectedCall(msg)
            else:
                self._next = len(self._steps) - 1
        step = self._steps[self._next]
        self._next += 1
        return step(request) if callable(step) else step

    async def generate(
        self, request: ModelRequest, *, on_delta: DeltaSink | None = None
    ) -> Result[ModelResponse, ModelError]:
        """Answer with the next scripted step."""
        self.requests.append(request)
        step = self._take(request)
        if isinstance(step, ModelError):
            return Failure(step)
        if on_delta is not None:
            text = step.message.content
            for i in range(0, len(text), self.chunk):
                await on_delta(TextDelta(text[i : i + self.chunk]))
            for n, call in enumerate(step.message.tool_calls):
                await on_delta(
                    ToolCallDelta(n, call.id, call.name, call.arguments)
                )
        return Success(step)

    def assert_consumed(self) -> None:
        """Fail if scripted steps were never used."""
        if self.remaining:
            msg = f"{self.name}: {self.remaining} scripted step(s) never used"
            raise Unconsumed(msg)

    def __enter__(self) -> ScriptedModel:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None and self.strict:
            self.assert_consumed()


Answer: TypeAlias = "str | tuple[Message, ...] | AgentError"


def _answers(answers: Iterable[Answer]) -> list[Answer]:
    return list(answers)


@final
@attrs.define
class ScriptedAgent:
    """An :class:`~pipeline.agents.AgentLike` that replays answers.

    Each run takes the next answer: text (one assistant message), a tuple of
    messages, or an ``AgentError``.  Strict like :class:`ScriptedModel`; the
    messages each run received are kept in *inputs*.

    .. versionadded:: 0.1.0
    """

    name: str
    answers: list[Answer] = attrs.field(converter=_answers)
    strict: bool = True
    inputs: list[tuple[Message, ...]] = attrs.field(factory=list)
    _next: int = 0
    description: str = ""

    async def run(
        self, messages: Sequence[Message]
    ) -> Result[AgentRun, AgentError]:
        """Return the next scripted answer."""
        self.inputs.append(tuple(messages))
        if self._next >= len(self.answers):
            msg = f"scripted agent {self.name!r}: run {len(self.inputs)} was not scripted"
            raise UnexpectedCall(msg)
        answer = self.answers[self._next]
        self._next += 1
        if isinstance(answer, str):
            message = Message(
                Role.ASSISTANT, answer, self.name, agent=self.name
            )
            return Success(AgentRun(self.name, (message,), Usage(), 1))
        if isinstance(answer, tuple):
            return Success(AgentRun(self.name, answer, Usage(), 1))
        return Failure(answer)

    def assert_consumed(self) -> None:
        """Fail if scripted answers were never used."""
        left = len(self.answers) - self._next
        if left:
            msg = f"scripted agent {self.name!r}: {left} answer(s) never used"
            raise Unconsumed(msg)
