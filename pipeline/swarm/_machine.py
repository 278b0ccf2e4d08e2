"""The swarm's step: one agent's turn at the conversation.

A step runs the agent the snapshot says comes next.  If that is not the
agent that held the conversation, the step begins with the handoff (the
count goes up, a ``Handoff`` event, the after-handoff observers).  The
agent sees what its history policy selects of the full history, with its
transfer tools (unless the limit is reached), the state tools (when the
swarm has a typed state) and its own tools; an accepted transfer ends its
turn and names the next agent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from types import MappingProxyType
from typing import (
    TYPE_CHECKING,
    Any,
    ClassVar,
    NamedTuple,
    TypeAlias,
    TypeVar,
    final,
)

import attrs
import cattrs

from returns.result import Failure

from .._context import Context
from .._state_tools import state_tools
from ..errors import ConstructionError
from ..events import Handoff
from ..fold import (
    Codec,
    MachineBase,
    Snapshot,
    Status,
    Transition,
    ambient,
    fingerprint,
)
from ..models._types import ToolSpec
from ..tools import Tool
from ._model import Member, SwarmLimits, SwarmState
from ._transfer import (
    Decision,
    Transfers,
    accepted_in,
    accepting,
    transfer_tool,
)


if TYPE_CHECKING:
    from ..agents import Agent
    from ..history import HistoryPolicy


T = TypeVar("T")

HandoffObserver: TypeAlias = Callable[
    [Transition[SwarmState[T]]], Awaitable[None]
]
"""Sees a handoff as it takes effect: *source* handed over to *targets[0]*;
*state* already names the new agent and counts the handoff."""

_RUNNING = Status.RUNNING
_DONE = Status.DONE


@final
class _Cell:
    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


_TURN_STATE: ContextVar[_Cell] = ContextVar("pipeline.swarm.state")
"""The typed state of the swarm step running here (its turn's cell)."""


@final
class _Current:
    """The state tools' reference: the cell of the step they are called
    in, read at call time, so the tools are built once per agent (not at
    every step) and concurrent runs of one swarm never share a cell."""

    __slots__ = ()

    @property
    def value(self) -> Any:
        return _TURN_STATE.get().value

    @value.setter
    def value(self, value: Any) -> None:
        _TURN_STATE.get().value = value


_CURRENT = _Current()
_new = object.__new__
_UNDECIDED: str | None = None
"""A step's transfers before its turn (typed as what the turn may make
of it)."""


class _Seat(NamedTuple):
    """What a step of one agent reads, in one look-up (by the agent and
    whether the handoff limit is reached): built once per swarm."""

    agent: Agent
    tools: Mapping[str, Tool]
    """Offered: its transfers (unless the limit is reached), the state
    tools (a typed swarm), its own (overriding same-named ones)."""
    specs: tuple[ToolSpec, ...]
    own: Mapping[str, Tool]
    handoffs: Mapping[str, Decision]
    """The agents it may transfer to, each with the decision accepting it."""
    history: HistoryPolicy | None


@final
@attrs.frozen(eq=False)
class SwarmMachine(MachineBase[SwarmState[T]]):
    """A validated swarm's members, with the tools each is offered (its
    own, its transfers, the state tools) computed once (:meth:`make`),
    stepped by the engine one agent turn at a time."""

    kind: ClassVar[str] = "swarm"
    """What its spans call it (see :mod:`pipeline._tracing`)."""

    members: Mapping[str, Member]
    state_type: type[Any]
    typed: bool
    transfers: Mapping[str, Mapping[str, Tool]]
    own: Mapping[str, Mapping[str, Tool]]
    seats: Mapping[tuple[str, bool], _Seat]
    after_handoff: tuple[HandoffObserver[T], ...]

    @classmethod
    def make(
        cls,
        name: str,
        members: Mapping[str, Member],
        entry: str,
        state_type: type[Any],
        after_handoff: tuple[HandoffObserver[T], ...],
        version: str,
        converter: cattrs.Converter | None = None,
    ) -> SwarmMachine[T]:
        """Precompute each agent's transfer tools; fingerprint the shape.

        Raises:
            ConstructionError: an agent lists *writable* fields the state
                does not have (or the swarm has no typed state).
        """
        typed = state_type is not type(None) and attrs.has(state_type)
        # Each agent's state tools, built once (they read the state of the
        # step they are called in): unknown fields are refused now.
        shared: dict[str, Mapping[str, Tool]] = {}
        for m in members.values():
            if m.writable and not typed:
                msg = f"swarm agent {m.name!r}: writable= needs a typed state"
                raise ConstructionError(msg)
            shared[m.name] = (
                {
                    t.name: t
                    for t in state_tools(
                        _CURRENT, state_type, writable=m.writable
                    )
                }
                if typed
                else {}
            )
        shape = {
            "entry": entry,
            "version": version,
            "agents": sorted(
                [m.name, list(m.handoffs)] for m in members.values()
            ),
        }
        transfers = {
            m.name: MappingProxyType(
                {
                    tool.name: tool
                    for tool in (transfer_tool(members[t]) for t in m.handoffs)
                }
            )
            for m in members.values()
        }
        own = {
            m.name: MappingProxyType({t.name: t for t in m.agent.tools})
            for m in members.values()
        }
        seats: dict[tuple[str, bool], _Seat] = {}
        for m in members.values():
            for reached in (False, True):
                # Transfers first, then the state tools (a typed swarm),
                # then the agent's own (overriding same-named ones).
                tools = {
                    **({} if reached else transfers[m.name]),
                    **shared[m.name],
                    **own[m.name],
                }
                seats[m.name, reached] = _Seat(
                    m.agent,
                    MappingProxyType(tools),
                    tuple(t.spec for t in tools.values()),
                    own[m.name],
                    accepting(m.handoffs),
                    m.history,
                )
        return cls(
            name=name,
            entry=entry,
            codec=Codec(SwarmState[state_type], converter),  # type: ignore[valid-type]
            fingerprint=fingerprint(shape),
            members=MappingProxyType(dict(members)),
            state_type=state_type,
            typed=typed,
            transfers=MappingProxyType(transfers),
            own=MappingProxyType(own),
            seats=MappingProxyType(seats),
            after_handoff=after_handoff,
        )

    def gated(self, snap: Snapshot[SwarmState[T]], /) -> bool:
        """Gates see handoffs (every transition after the first turn)."""
        return snap.node is not None

    def start(
        self, ctx: Context, state: T, thread_id: str | None
    ) -> Snapshot[SwarmState[T]]:
        """The admission snapshot: the entry agent is about to answer *ctx*."""
        return self.admission(
            SwarmState.begun(self.entry, state, ctx), thread_id
        )

    async def step(
        self, snap: Snapshot[SwarmState[T]], limits: SwarmLimits, /
    ) -> Any:
        """One agent's turn at the conversation (after a handoff, if any)."""
        st = snap.state
        target = snap.next[0]
        env = ambient()  # the stream and the enclosing step, read once
        handoffs = st.handoffs
        if target != st.active:
            source = st.active
            handoffs += 1
            if env.sink is not None:  # events are built only when listened to
                await env.sink(Handoff(source, target, handoffs))
            scope = env.scope
            if scope is not None and scope.tracing is not None:
                scope.tracing.handoff(source, target, handoffs)
            if self.after_handoff or env.boundary is not None:
                # Only they see the state between the handoff and the turn.
                st = st.handed_to(target)
                for observe in self.after_handoff:
                    await observe(Transition(source, (target,), st, snap.step))
        reached = handoffs >= limits.max_handoffs
        agent, tools, specs, own, allowed, history = self.seats[
            target, reached
        ]
        transfers = _new(Transfers)  # its slots stored: one per step
        transfers.source = target
        transfers.allowed = allowed
        transfers.known = self.members
        transfers.own = own
        transfers.limit_reached = reached
        transfers.accepted = _UNDECIDED
        boundary = env.boundary
        if not self.typed:
            if boundary is not None:
                begun = st  # progress records carry the handoff
                boundary.track = lambda: begun
            out = await agent._turns(  # noqa: SLF001  # the loop's own turns
                st.messages, tools, transfers, history, specs, env
            )
            value = st.state
        else:
            cell = _Cell(st.state)  # what this turn's state tools change
            if boundary is not None:
                begun = st  # progress records carry the handoff and writes
                boundary.track = lambda: attrs.evolve(begun, state=cell.value)
            token = _TURN_STATE.set(cell)
            try:
                out = await agent._turns(  # noqa: SLF001  # the loop's own turns
                    st.messages, tools, transfers, history, specs, env
                )
            finally:
                _TURN_STATE.reset(token)
            value = cell.value
        if type(out) is Failure:
            return out
        added = out.messages
        # A run restored from its records ran no turn here (only a run
        # inside a checkpointed step is): read its decision back from what
        # it said.
        accepted = transfers.accepted or (
            None if boundary is None else accepted_in(added, own)
        )
        nxt = (accepted,) if accepted else ()
        state = st.grown(target, value, st.messages.extend(added), handoffs)
        return snap.successor(state, target, nxt, fingerprint=self.fingerprint)
