"""What a run is inside of, read once: its ambient values in one place.

Code runs inside things it does not receive as arguments: a run scope
(budgets, tracing: :func:`pipeline.scope`), a stream that listens for its
events (:func:`pipeline.stream`), the resolver its secrets come from, a
host that runs its agent calls elsewhere (:mod:`pipeline.temporal`), the
step in flight of an enclosing checkpointed fold.  Each is a context
variable of the module that owns it; :func:`ambient` reads them all at
once into one :class:`Ambient`, which a run reads once when it starts and
hands down to its steps (none of them changes while a run goes on: each is
set around a whole run, or, for the enclosing step, by the enclosing run).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, final

from .._offload import Offload, current_offload
from .._step import STEP, Later
from ..events import Event, current_gate, current_sink
from ..runs import Scope, current
from ..secrets import Resolver, current_resolver
from ._journal import Boundary


if TYPE_CHECKING:
    from .._tracing import Tracing


@final
class Ambient:
    """The ambient values of a run, read at one moment.

    .. versionadded:: 0.1.0
    """

    __slots__ = ("boundary", "gate", "offload", "resolver", "scope", "sink")

    def __init__(  # positional: read once per run, on the hot path
        self,
        scope: Scope | None,
        sink: Callable[[Event], Awaitable[None]] | None,
        gate: Callable[[], Awaitable[None]] | None,
        resolver: Resolver,
        offload: Offload | None,
        boundary: Boundary | None,
    ) -> None:
        self.scope = scope
        """The innermost run scope (budgets, tracing), if any."""
        self.sink = sink
        """The listening stream events go to, if any."""
        self.gate = gate
        """What a model call waits on (the stream's reader catching up)."""
        self.resolver = resolver
        """Where secrets' values come from."""
        self.offload = offload
        """The host that runs agent calls elsewhere, if any."""
        self.boundary = boundary
        """The step in flight of the enclosing checkpointed fold, if any."""

    @property
    def listening(self) -> bool:
        """Whether a stream listens (events are built only then)."""
        return self.sink is not None

    @property
    def tracing(self) -> Tracing | None:
        """The tracing in force, if any."""
        scope = self.scope
        return scope.tracing if scope is not None else None

    async def emit(self, event: Event) -> None:
        """Send *event* to the listening stream, if any."""
        sink = self.sink
        if sink is not None:
            await sink(event)

    async def caught_up(self) -> None:
        """Wait until the stream's reader has taken every event so far
        (see :func:`pipeline.events.reader_caught_up`)."""
        gate = self.gate
        if gate is not None:
            await gate()

    def __repr__(self) -> str:
        held = [
            name
            for name in ("scope", "sink", "offload", "boundary")
            if getattr(self, name) is not None
        ]
        return f"Ambient({', '.join(held) or 'nothing'})"


def ambient() -> Ambient:
    """The ambient values in force now, in one value.

    .. versionadded:: 0.1.0
    """
    # Read where current_boundary() reads it, without its frame; built by
    # plain stores, without __init__'s frame: every run (and every swarm
    # step) reads its ambient values.
    boundary: Any = _STEP.get()
    if type(boundary) is Later:  # a map_reduce item's, made on first use
        boundary = boundary.get()
    out = _new(Ambient)
    out.scope = current()
    out.sink = current_sink()
    out.gate = current_gate()
    out.resolver = current_resolver()
    out.offload = current_offload()
    out.boundary = boundary
    return out


_new = object.__new__
_STEP = STEP  # the variable current_boundary() reads
