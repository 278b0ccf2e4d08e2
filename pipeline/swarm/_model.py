"""Swarm values: its state, its limits, and one member's description."""

from __future__ import annotations

import warnings

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Final, Generic, TypeVar, final

import attrs

from pyrsistent import PMap, PVector, pvector

from .._context import Context, Metadata, metadata_from_json, to_metadata
from .._fields import APPEND_ONLY, READ_BACK
from .._messages import Message
from .._writable import writable_twin


if TYPE_CHECKING:
    from ..agents import Agent
    from ..history import HistoryPolicy


T_co = TypeVar("T_co", covariant=True)
T2 = TypeVar("T2")

DEFAULT_MAX_HANDOFFS: Final = 10
"""Handoffs a swarm allows per run unless its limits say otherwise."""
TRANSFER_PREFIX: Final = "transfer_to_"


@final
@attrs.frozen
class SwarmLimits:
    """A swarm's limits: *max_handoffs* handoffs per run, exactly.

    Once that many handoffs happened, the active agent is no longer offered
    transfer tools and gives the final answer itself (a transfer it asks
    for anyway is refused with an error result it sees).  0 means the entry
    agent answers alone.

    .. versionadded:: 0.1.0
    """

    max_handoffs: int = DEFAULT_MAX_HANDOFFS

    def __attrs_post_init__(self) -> None:
        if type(self.max_handoffs) is not int:  # not a bool, float or str
            msg = (
                "SwarmLimits.max_handoffs must be an int, "
                f"not {type(self.max_handoffs).__name__}"
            )
            raise TypeError(msg)
        if self.max_handoffs < 0:
            msg = "SwarmLimits.max_handoffs must be at least 0"
            raise ValueError(msg)


def _no_messages() -> PVector[Message]:
    return pvector()


def _from_context(stored: object) -> dict[str, object]:
    """What an older ``context`` field stood for: ``metadata`` and
    ``run_id`` (its messages were always empty)."""
    if not isinstance(stored, dict) or stored.get("messages"):
        msg = "not a context without messages"
        raise TypeError(msg)
    return {
        "metadata": stored.get("metadata", {}),
        "run_id": stored.get("run_id", ""),
    }


_new = object.__new__


def _no_metadata() -> Metadata:
    return to_metadata(None)


@final
@attrs.frozen
class SwarmState(Generic[T_co]):
    """A swarm's snapshot state: who holds the conversation, all of it, and
    the typed state its agents share.

    :attr:`conversation` is the conversation, as a context: every message
    (history policies only select what an agent sees of it), with the
    input's metadata and run id.  It is stored as *messages* (a log: a
    checkpoint holds only what a turn added), *metadata* and *run_id*.
    *handoffs* counts the handoffs so far; *state* is the typed state
    (``None`` for a swarm without one).

    .. versionadded:: 0.1.0
    """

    active: str
    state: T_co
    messages: PVector[Message] = attrs.field(
        factory=_no_messages, metadata={APPEND_ONLY: True}, kw_only=True
    )
    metadata: PMap[str, Any] = attrs.field(
        kw_only=True,
        factory=_no_metadata,
        converter=to_metadata,
        metadata={READ_BACK: metadata_from_json},
    )
    run_id: str = attrs.field(default="", kw_only=True)
    handoffs: int = attrs.field(default=0, kw_only=True)

    # Checkpoints and Temporal histories written before 0.1.0 kept the
    # metadata and run id as a context with no messages.
    __pipeline_former_fields__: ClassVar[
        Mapping[str, Callable[[object], dict[str, object]]]
    ] = MappingProxyType({"context": _from_context})

    @property
    def conversation(self) -> Context:
        """The whole conversation as a context (the swarm's output as a
        handler)."""
        return Context(self.messages, self.metadata, self.run_id)

    @property
    def context(self) -> Context:
        """Deprecated, the same as :attr:`conversation`."""
        warnings.warn(
            "SwarmState.context is SwarmState.conversation",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.conversation

    @classmethod
    def begun(cls, active: str, state: T2, ctx: Context) -> SwarmState[T2]:
        """The state a run starts from: *active* about to answer *ctx*
        with *state*; the context's messages, metadata and run id (already
        checked by the context: built without converting them again, as
        attrs' own ``__init__`` would, once a run)."""
        out: Any = _new(_Growing)
        out.active = active
        out.state = state
        out.messages = ctx.messages
        out.metadata = ctx.metadata
        out.run_id = ctx.run_id
        out.handoffs = 0
        out.__class__ = SwarmState
        begun: SwarmState[T2] = out
        return begun

    def handed_to(self, agent: str) -> SwarmState[T_co]:
        """This state after a handoff to *agent*."""
        return self.grown(agent, self.state, self.messages, self.handoffs + 1)

    def grown(
        self, active: str, state: T2, messages: PVector[Message], handoffs: int
    ) -> SwarmState[T2]:
        """The state a step leaves: *active*, *state*, *messages* and
        *handoffs* new, this one's metadata and run id (already checked:
        built without converting them again, as attrs' own ``__init__``
        would, on the path every turn takes)."""
        # Built as a _Growing (the same slots, set by plain stores the
        # interpreter specializes), then made a SwarmState: a setter called
        # by name per field costs more than the rest of the state's step.
        out: Any = _new(_Growing)
        out.active = active
        out.state = state
        out.messages = messages
        out.metadata = self.metadata
        out.run_id = self.run_id
        out.handoffs = handoffs
        out.__class__ = SwarmState
        grown: SwarmState[T2] = out  # not cast(): a call per step
        return grown


_Growing = writable_twin(SwarmState)
"""A :class:`SwarmState` being built by :meth:`SwarmState.grown` (see
:mod:`pipeline._writable`)."""


@final
@attrs.frozen
class Member:
    """One agent of a swarm, as the builder received it."""

    name: str
    agent: Agent
    description: str
    handoffs: tuple[str, ...]
    history: HistoryPolicy | None
    writable: tuple[str, ...] = ()
