"""Approval of single tool calls: a person says yes, no, or yes with
changes before a tool made with ``tool(approval=...)`` runs.

Each call the tool's *approval* selects becomes a question of the
checkpointed run (:func:`pipeline.interrupt`), asked before any tool of
the model's reply runs: ``approve <tool>?`` with the payload ``{"agent":
..., "tool": ..., "arguments": {...}}`` (secret arguments shown as their
reference).  The answer is a :class:`ToolApproval`: :class:`Approve`
(the call runs, with the arguments it edits, checked like the model's),
or :class:`Deny` (the model gets an error result with the reason).  The
answer is committed before the call runs, and the call's result right
after it returns, so no later attempt of the turn runs it again.
"""

from __future__ import annotations

import json

from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeAlias, final

import attrs

from ._messages import ToolCall
from ._serde import canonical
from .errors import InvalidAnswer, NotCheckpointed
from .fold import checked_interrupt, current_boundary
from .tools import Tool


__all__ = ("Approvals", "Approve", "Deny", "ToolApproval", "approve_calls")


@final
@attrs.frozen
class Approve:
    """The answer that lets a tool call run: as the model sent it, or with
    *arguments* replacing the ones they name (the others stay as sent).

    Edited arguments are checked against the tool's schema like the
    model's (an :class:`~pipeline.errors.InvalidAnswer` naming the
    argument, never its value: the run asks again); a secret argument
    cannot be edited (the answer is stored).  As JSON (``pipeline
    answer``): ``{"approved": true}`` or ``{"approved": true,
    "arguments": {"amount": 30}}``.

    .. versionadded:: 0.1.0
    """

    arguments: Mapping[str, Any] | None = None
    approved: Literal[True] = attrs.field(
        default=True, kw_only=True, repr=False
    )


@final
@attrs.frozen
class Deny:
    """The answer that refuses a tool call: it does not run, and the model
    gets an error result carrying *reason*.  As JSON: ``{"approved":
    false, "reason": "too much"}``.

    .. versionadded:: 0.1.0
    """

    reason: str = ""
    approved: Literal[False] = attrs.field(
        default=False, kw_only=True, repr=False
    )


ToolApproval: TypeAlias = Approve | Deny
"""A person's answer to the approval of a tool call.

.. versionadded:: 0.1.0
"""


@attrs.frozen
class _Answer:
    """What an approval's answer decodes into (either shape)."""

    approved: bool
    reason: str = ""
    arguments: dict[str, Any] | None = None


_KIND = "ToolApproval"


@final
@attrs.frozen
class Approvals:
    """What the approvals of a reply's calls decided: the calls to run
    (edited where an answer edited them), the results of the denied ones
    by call index, and the indices of the calls that were approved."""

    calls: tuple[ToolCall, ...]
    denied: Mapping[int, tuple[str, bool]]
    approved: frozenset[int]


def _question(tool: Tool) -> str:
    return f"approve {tool.name}?"


def _shown(tool: Tool, arguments: str) -> object:
    """The call's arguments as the question shows them (secrets redacted)."""
    redacted = tool.redact(arguments)
    try:
        return json.loads(redacted or "{}")
    except ValueError:  # decoded before: never reached
        return {}


def _edited(tool: Tool, call: ToolCall, edits: Mapping[str, Any]) -> str:
    """*call*'s arguments with *edits* over them, as JSON.

    Raises:
        InvalidAnswer: an edit names a secret argument, or the arguments
            edited do not fit the tool's schema (naming the argument,
            never the value).
    """
    secret = sorted(set(edits) & tool.secret_arguments)
    if secret:
        problem = (
            f"$.arguments: {secret} of {tool.name!r} hold secrets and "
            "cannot be edited in an answer (it is stored)"
        )
        raise InvalidAnswer(_KIND, problem)
    sent = json.loads(call.arguments or "{}")
    merged = {**sent, **edits}
    try:
        text = canonical(merged).decode()
    except (TypeError, ValueError):
        raise InvalidAnswer(_KIND, "$.arguments: not JSON") from None
    decoded = tool.decode(text)
    if isinstance(decoded, str):
        raise InvalidAnswer(_KIND, f"$.arguments: {decoded}")
    return text


def _check(tool: Tool, call: ToolCall) -> Any:
    def check(answer: _Answer) -> None:
        if not answer.approved and answer.arguments is not None:
            problem = "$.arguments: a denial runs nothing; give no arguments"
            raise InvalidAnswer(_KIND, problem)
        if answer.approved and answer.reason:
            problem = "$.reason: a reason goes with a denial only"
            raise InvalidAnswer(_KIND, problem)
        if answer.arguments is not None:
            _edited(tool, call, answer.arguments)

    return check


def selected(
    calls: Sequence[ToolCall],
    tools: Mapping[str, Tool],
    skip: Mapping[int, object],
) -> list[tuple[int, Tool]]:
    """The calls (index, tool) that wait for approval: their tool has an
    *approval* that selects them, their arguments decode (a call that
    does not decode gets its error result without asking anyone), and
    they are not in *skip* (calls taken by the caller: a swarm's
    transfers)."""
    out: list[tuple[int, Tool]] = []
    for i, call in enumerate(calls):
        found = tools.get(call.name)
        if found is None or found.approval is False or i in skip:
            continue
        kwargs = found.decode(call.arguments)
        if isinstance(kwargs, str):
            continue
        if found.needs_approval(kwargs):
            out.append((i, found))
    return out


async def approve_calls(
    calls: Sequence[ToolCall],
    tools: Mapping[str, Tool],
    *,
    agent: str,
    skip: Mapping[int, object],
) -> Approvals | None:
    """Ask a person about each of *calls* whose tool's approval selects it
    (in call order, one question at a time: each unanswered one pauses
    the run, see :func:`pipeline.interrupt`); ``None`` if none is
    selected.

    Raises:
        NotCheckpointed: a call needs approval outside the step of a
            checkpointed run.
        InvalidAnswer: the answer is not a :data:`ToolApproval`, or its
            edited arguments do not fit (the run asks again).
        Suspended: a question is pending (the engine pauses the run).
    """
    asks = selected(calls, tools, skip)
    if not asks:
        return None
    if current_boundary() is None:
        raise NotCheckpointed(_question(asks[0][1]))
    out = list(calls)
    denied: dict[int, tuple[str, bool]] = {}
    approved: set[int] = set()
    for i, found in asks:
        call = calls[i]
        payload = {
            "agent": agent,
            "tool": found.name,
            "arguments": _shown(found, call.arguments),
        }
        try:
            answer = await checked_interrupt(
                _question(found),
                _Answer,
                payload=payload,
                check=_check(found, call),
            )
        except InvalidAnswer as exc:
            if exc.kind == _KIND:
                raise
            raise InvalidAnswer(_KIND, exc.problems) from None
        if not answer.approved:
            reason = answer.reason or "no reason given"
            said = f"error: a person denied this call of {found.name!r}"
            denied[i] = (f"{said}: {reason}", True)
            continue
        approved.add(i)
        if answer.arguments is not None:
            edited = _edited(found, call, answer.arguments)
            out[i] = ToolCall(call.id, call.name, edited)
    return Approvals(tuple(out), denied, frozenset(approved))
