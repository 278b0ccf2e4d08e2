"""What a swarm's ``build()`` checks: small named checks, all reported."""

from __future__ import annotations

import collections

from collections.abc import Callable, Iterator
from typing import TypeAlias, cast, final

import attrs

from ..errors import GraphDefect
from ._model import TRANSFER_PREFIX, Member
from ._transfer import valid_name


@final
@attrs.frozen
class Plan:
    """A swarm as the builder collected it."""

    members: tuple[Member, ...]
    entry: str | None


Check: TypeAlias = Callable[[Plan], Iterator[GraphDefect]]


def _names(plan: Plan) -> dict[str, Member]:
    out: dict[str, Member] = {}
    for m in plan.members:
        out.setdefault(m.name, m)
    return out


def agents(plan: Plan) -> Iterator[GraphDefect]:
    """An agent is an :class:`~pipeline.Agent`, added once, with a
    name that makes a valid transfer tool name."""
    from ..agents import Agent  # noqa: PLC0415  # agents import the fold

    seen: set[str] = set()
    for m in plan.members:
        if m.name in seen:
            yield GraphDefect(
                "duplicate agent", m.name, "added more than once"
            )
        elif not valid_name(m.name):
            yield GraphDefect(
                "bad name",
                m.name,
                f"{TRANSFER_PREFIX}<name> must be a tool name: 1-52 letters, "
                "digits, '_' or '-'",
            )
        if not isinstance(cast("object", m.agent), Agent):
            yield GraphDefect(
                "not an agent", m.name, f"got {type(m.agent).__name__}"
            )
        seen.add(m.name)


def handoffs(plan: Plan) -> Iterator[GraphDefect]:
    """Handoffs name other agents of the swarm, once each."""
    names = _names(plan)
    for m in plan.members:
        counts = collections.Counter(m.handoffs)
        for target, n in counts.items():
            if target == m.name:
                yield GraphDefect(
                    "handoff to itself",
                    m.name,
                    "an agent cannot transfer to itself",
                )
            elif target not in names:
                yield GraphDefect(
                    "unknown agent",
                    target,
                    f"{m.name!r} hands off to an agent that does not exist",
                )
            if n > 1:
                yield GraphDefect(
                    "duplicate handoff", m.name, f"lists {target!r} {n} times"
                )


def entry(plan: Plan) -> Iterator[GraphDefect]:
    """The entry is given, and is an agent."""
    if plan.entry is None:
        yield GraphDefect("missing entry", "", "call .entry(name)")
    elif plan.entry not in _names(plan):
        yield GraphDefect("unknown agent", plan.entry, "entry is not an agent")


def reachability(plan: Plan) -> Iterator[GraphDefect]:
    """Every agent can be reached from the entry by allowed handoffs."""
    names = _names(plan)
    if plan.entry not in names:
        return
    seen = {plan.entry}
    queue = collections.deque([plan.entry])
    while queue:
        for nxt in names[queue.popleft()].handoffs:
            if nxt in names and nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    for name in names:
        if name not in seen:
            yield GraphDefect(
                "unreachable",
                name,
                f"no chain of handoffs from the entry {plan.entry!r} leads here",
            )


CHECKS: tuple[Check, ...] = (agents, handoffs, entry, reachability)


def defects(plan: Plan) -> list[GraphDefect]:
    """Every defect every check finds, in check order."""
    return [d for check in CHECKS for d in check(plan)]
