"""Handoffs: the transfer tools agents are offered, and the check that
enforces the allow-list in code (not in the prompt).

A transfer is a tool call named ``transfer_to_<agent>``.  The swarm takes
every such call before any tool runs and decides:

* more than one transfer call in one reply: all are refused (the model
  meant one thing; it must say which);
* the handoff limit is reached, the name is malformed or unknown, the
  agent names itself, or the target is not in its ``handoffs``: refused;
* otherwise accepted: the result says so, the agent's turn ends with this
  reply's other tool calls done, and the next step hands the conversation
  over.

A refusal is an error result the model sees (it never repeats what the
model wrote); no handoff happens, and the agent goes on.  An agent's own
tool named like a transfer is its own tool: it runs, and hands nothing off.
"""

from __future__ import annotations

import re

from collections.abc import Collection, Mapping, Sequence
from types import MappingProxyType
from typing import final

from .._messages import Message, Role, ToolCall
from ..tools import Tool
from ._model import TRANSFER_PREFIX, Member


_NAME = re.compile(r"^[A-Za-z0-9_-]{1,52}$")

ACCEPTED = "Transferring to {name}..."
"""The result of an accepted transfer (as the Go seed's)."""

_PREFIX_LENGTH = len(TRANSFER_PREFIX)
_NONE_TAKEN: tuple[Mapping[int, tuple[str, bool]], bool] = (
    MappingProxyType({}),
    False,
)  # no transfer among the calls: nothing taken, the turn goes on


def valid_name(name: str) -> bool:
    """Whether ``transfer_to_<name>`` is a valid tool name (64 characters)."""
    return bool(_NAME.fullmatch(name))


def transfer_tool(target: Member) -> Tool:
    """The tool that hands the conversation to *target*."""
    description = (
        target.description
        or f'Transfer the conversation to the "{target.name}" agent.'
    )

    def transfer() -> str:  # never called: the swarm takes the call first
        return ACCEPTED.format(name=target.name)  # pragma: no cover

    return Tool(
        TRANSFER_PREFIX + target.name,
        description,
        {"type": "object", "properties": {}, "additionalProperties": False},
        transfer,
        (),
    )


Decision = tuple[Mapping[int, tuple[str, bool]], bool]
"""What an intercept returns: results by call index; whether to stop."""


def accepting(targets: Sequence[str]) -> Mapping[str, Decision]:
    """The decision accepting a lone transfer call to each of *targets*,
    made once per agent (a handoff reads it, builds no result): the
    transfer's result, and the turn ends."""
    return MappingProxyType(
        {
            t: (MappingProxyType({0: (ACCEPTED.format(name=t), False)}), True)
            for t in targets
        }
    )


@final
class Transfers:
    """Decides one activation's transfer calls (an agent-loop intercept).

    *allowed* maps the agents *source* may transfer to to the decision
    accepting a lone call to each (see :func:`accepting`)."""

    __slots__ = (
        "accepted",
        "allowed",
        "known",
        "limit_reached",
        "own",
        "source",
    )

    def __init__(  # positional: one per swarm step
        self,
        source: str,
        allowed: Mapping[str, Decision],
        known: Collection[str],
        own: Collection[str],
        limit_reached: bool,
    ) -> None:
        self.source = source
        self.allowed = allowed
        self.known = known
        self.own = own
        self.limit_reached = limit_reached
        self.accepted: str | None = None

    def __call__(self, calls: Sequence[ToolCall]) -> Decision:
        """Results for the transfer calls among *calls*; whether to stop."""
        own = self.own
        found = -1  # one pass, no list: a reply holds one transfer at most
        several = False
        for i, c in enumerate(calls):
            name = c.name
            if name.startswith(TRANSFER_PREFIX) and name not in own:
                several = found >= 0
                if several:
                    break
                found = i
        if found < 0:
            return _NONE_TAKEN
        if several:
            refusal = (
                "error: several transfers in one reply; none was made. "
                "Call exactly one transfer tool."
            )
            mine = [
                i
                for i, c in enumerate(calls)
                if c.name.startswith(TRANSFER_PREFIX) and c.name not in own
            ]
            return dict.fromkeys(mine, (refusal, True)), False
        target = calls[found].name[_PREFIX_LENGTH:]
        accepted = None if self.limit_reached else self.allowed.get(target)
        if accepted is None:
            why = self.refusal(target)  # (an allowed one needs no reason)
            return {found: (f"error: {why}", True)}, False
        self.accepted = target
        if found == 0:  # a lone call, most replies: the decision made once
            return accepted
        return {found: accepted[0][0]}, True

    def refusal(self, target: str) -> str | None:
        """Why a transfer to *target* is refused, or ``None``."""
        if self.limit_reached:
            return "the handoff limit is reached; answer the user yourself."
        if target in self.allowed:  # allowed names are valid agent names
            return None
        if not valid_name(target) or target not in self.known:
            why = "there is no agent by that name"
        elif target == self.source:
            why = f"you are {self.source!r} already"
        else:
            why = f"{self.source!r} may not transfer there"
        choices = (
            f"you may transfer to: {list(self.allowed)}"
            if self.allowed
            else "you cannot transfer; answer the user yourself"
        )
        return f"{why}; {choices}."


def accepted_in(
    messages: Sequence[Message], own: Collection[str]
) -> str | None:
    """The transfer accepted in an agent run that added *messages*, if any.

    Only the run's last reply can hold one (an accepted transfer ends the
    run): a swarm transfer call (not one of the agent's own tools) whose
    result says it was accepted.  Read back from the messages, so a run
    restored from its records (whose turns did not run again) hands off as
    the original did.
    """
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if m.role is not Role.ASSISTANT:
            continue
        calls = {
            c.id: c.name[len(TRANSFER_PREFIX) :]
            for c in m.tool_calls
            if c.name.startswith(TRANSFER_PREFIX) and c.name not in own
        }
        for result in messages[i + 1 :]:
            target = calls.get(result.tool_call_id or "")
            if (
                result.role is Role.TOOL
                and target is not None
                and result.content == ACCEPTED.format(name=target)
            ):
                return target
        return None
    return None
