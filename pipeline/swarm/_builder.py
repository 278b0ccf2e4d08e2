"""Describing a swarm: an immutable builder whose ``build()`` validates."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar, final, overload

import attrs
import cattrs

from .._decode import strict
from ..errors import SwarmDefects
from ..fold import Building, Gate
from ._checks import Plan, defects
from ._machine import HandoffObserver, SwarmMachine
from ._model import Member, SwarmLimits, SwarmState
from ._swarm import Swarm


if TYPE_CHECKING:
    from ..agents import Agent
    from ..history import HistoryPolicy


T = TypeVar("T")


@final
@attrs.frozen
class SwarmBuilder(Building[SwarmState[T], SwarmLimits], Generic[T]):
    """An immutable swarm description; :meth:`build` validates it.

    >>> from pipeline import swarm
    >>> b = swarm.builder()   # no typed state; swarm.builder(state=...) for one

    .. versionadded:: 0.1.0
    """

    initial: T
    state_type: type[Any]
    _members: tuple[Member, ...] = ()
    _after: tuple[HandoffObserver[T], ...] = ()

    def agent(
        self,
        name: str,
        agent: Agent,
        *,
        description: str | None = None,
        handoffs: Sequence[str] = (),
        history: HistoryPolicy | None = None,
        writable: Sequence[str] = (),
    ) -> SwarmBuilder[T]:
        """Add *agent* under *name*.

        *handoffs* lists the agents it may transfer to: it is offered a
        ``transfer_to_<name>`` tool for each, described by that agent's
        *description* (default: the agent's own, else "Transfer the
        conversation to the "<name>" agent.").  *history* selects what it
        sees of the conversation each time it takes over (default: the
        agent's own policy, else everything).  With a typed state, the
        agent reads it with ``read_state``, and changes the fields listed
        in *writable* (none by default) with ``write_state``.
        """
        member = Member(
            name,
            agent,
            agent.description if description is None else description,
            tuple(handoffs),
            history,
            tuple(writable),
        )
        return attrs.evolve(self, members=(*self._members, member))

    def before_handoff(self, *gates: Gate[SwarmState[T]]) -> SwarmBuilder[T]:
        """Ask *gates* before every handoff: continue, stop or interrupt.

        A gate sees the agent handing over (*source*), the one taking over
        (*targets[0]*) and the state; a run's own ``gates=`` come after.
        """
        return self._gated(gates)

    def after_handoff(self, *observers: HandoffObserver[T]) -> SwarmBuilder[T]:
        """Tell *observers* about every handoff as it takes effect."""
        return attrs.evolve(self, after=(*self._after, *observers))

    def build(
        self,
        *,
        version: str = "1",
        name: str = "swarm",
        converter: cattrs.Converter | None = None,
    ) -> Swarm[T]:
        """Validate and freeze the swarm.

        *version* is folded into the fingerprint (bump it when old
        checkpoints must not resume across a change); *name* is the swarm's
        name as a handler; *converter* writes and reads its checkpoints
        (start from :func:`~pipeline.fold.make_converter`).

        Raises:
            TypeError: *converter* reads leniently (a plain
                ``cattrs.Converter()``: see
                :func:`~pipeline.fold.make_converter`).
            SwarmDefects: listing every structural defect found, at once.
        """
        if converter is not None:
            strict(converter, "build(converter=...)")
        found = defects(Plan(self._members, self._entry))
        if found:
            raise SwarmDefects(found)
        assert self._entry is not None  # noqa: S101  # validated
        machine: SwarmMachine[T] = SwarmMachine.make(
            name,
            {m.name: m for m in self._members},
            self._entry,
            self.state_type,
            self._after,
            version,
            converter,
        )
        limits = SwarmLimits() if self._limits is None else self._limits
        return Swarm.make(
            machine, self.initial, limits, self._gates, self._observers
        )


@overload
def builder() -> SwarmBuilder[None]: ...
@overload
def builder(*, state: T) -> SwarmBuilder[T]: ...


def builder(*, state: Any = None) -> SwarmBuilder[Any]:
    """Start describing a swarm; *state* is the typed state its agents share.

    With a *state* (an attrs instance), every agent gets a ``read_state``
    tool over it (and ``write_state`` for the fields its
    :meth:`SwarmBuilder.agent` lists as *writable*), and runs start from it
    (``run(..., state=...)`` starts elsewhere).

    .. versionadded:: 0.1.0
    """
    return SwarmBuilder(state, type(state))
