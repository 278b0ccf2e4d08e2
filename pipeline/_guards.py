"""Guardrails: checks around an agent's run that pass, ask the model again
with a reason, or stop the run.

An :class:`InputGuard` looks at the messages an agent is given before its
first model call (or alongside it, when ``concurrent``); an
:class:`OutputGuard` looks at the typed final answer (see
:class:`pipeline.Output`).  A check returns ``None`` to pass,
:class:`AskAgain` to send the answer back with a reason (output guards only;
it counts against the output's retries) or :class:`Halt` to end the run
with :class:`~pipeline.failures.GuardrailTripped` naming the guard.
"""

from __future__ import annotations

import re

from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeAlias, TypeVar, final

import attrs

from ._messages import Message
from .errors import ConstructionError


__all__ = ("AskAgain", "Halt", "InputGuard", "OutputGuard", "Verdict")

T = TypeVar("T")

_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


@final
@attrs.frozen
class AskAgain:
    """Refuse the final answer: *reason* goes back to the model, which is
    asked again (one of the output's retries).  Name rules and fields in
    it, never the value.

    .. versionadded:: 0.1.0
    """

    reason: str


@final
@attrs.frozen
class Halt:
    """End the run: the agent fails with
    :class:`~pipeline.failures.GuardrailTripped` carrying *reason*.

    .. versionadded:: 0.1.0
    """

    reason: str


Verdict: TypeAlias = AskAgain | Halt | None
"""What an output guard's check returns (``None``: pass)."""


def _check_name(kind: str, name: str) -> None:
    if not _NAME.fullmatch(name):
        msg = f"{kind}: the name must be 1-64 letters, digits, '_', '.' or '-'"
        raise ConstructionError(msg)


@final
@attrs.frozen
class InputGuard:
    """A check of the messages an agent is given, before its first model
    call: ``None`` passes, :class:`Halt` ends the run.

    With *concurrent* the check runs alongside the first model call (a
    slow moderation check costs no latency): the model's answer waits for
    it before any tool runs or the run ends, and a :class:`Halt` cancels
    the call.  Not concurrent (default), it runs before the call, which is
    only made once every such guard passed.  Guards run in the order
    given; each is an event and a span.

    .. versionadded:: 0.1.0
    """

    name: str
    check: Callable[[Sequence[Message]], Awaitable[Halt | None]]
    concurrent: bool = False

    def __attrs_post_init__(self) -> None:
        _check_name("InputGuard", self.name)


@final
@attrs.frozen
class OutputGuard(Generic[T]):
    """A check of an agent's final answer, decoded into the output's type
    and validated: ``None`` passes, :class:`AskAgain` sends it back with the
    reason (counting against the output's retries), :class:`Halt` ends the
    run.  Give it to :class:`pipeline.Output` (``guards=``).

    .. versionadded:: 0.1.0
    """

    name: str
    check: Callable[[T], Awaitable[Verdict]]

    def __attrs_post_init__(self) -> None:
        _check_name("OutputGuard", self.name)
