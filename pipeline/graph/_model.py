"""Graph values: snapshots, transitions, gate decisions, events, limits."""

from __future__ import annotations

import enum

from collections.abc import Awaitable, Callable
from typing import Final, Generic, TypeAlias, TypeVar, final

import attrs

from .._eventtypes import CheckpointSaved as CheckpointSaved
from .._eventtypes import Interrupted as Interrupted
from .._eventtypes import NodeFinished as NodeFinished
from .._eventtypes import NodeStarted as NodeStarted
from .._eventtypes import Stopped as Stopped


S = TypeVar("S")
S_co = TypeVar("S_co", covariant=True)

END: Final = "__end__"
"""Route target that ends the run."""

DEFAULT_MAX_STEPS: Final = 1000
DEFAULT_MAX_FANOUT: Final = 10_000
DEFAULT_CONCURRENCY: Final = 16


@final
class Status(enum.StrEnum):
    """Where a run stands."""

    RUNNING = "running"
    DONE = "done"
    INTERRUPTED = "interrupted"
    STOPPED = "stopped"


@final
@attrs.frozen
class Pending:
    """A transition waiting for a human answer (see :class:`Interrupt`)."""

    source: str | None
    targets: tuple[str, ...]
    question: str


@final
@attrs.frozen
class Snapshot(Generic[S_co]):
    """One immutable point of a run; also its checkpoint.

    *node* just finished (``None`` before the first node), *next* are the
    nodes to run (one, several for a fan-out whose results meet at *join*,
    none when the run is done).  *version* increases by one per committed
    record of the thread; *parent* is the version this one grew from.
    """

    thread_id: str
    version: int
    parent: int | None
    state: S_co
    node: str | None
    next: tuple[str, ...]
    join: str | None
    step: int
    fingerprint: str
    status: Status = Status.RUNNING
    pending: Pending | None = None

    @property
    def done(self) -> bool:
        """Whether the run reached END."""
        return self.status is Status.DONE


@final
@attrs.frozen
class Limits:
    """Finite limits, checked before the work they guard starts.

    *max_steps* bounds a thread's transitions, counted from its start (a
    resumed run continues the count; a fan-out counts as one),
    *max_fanout* the branches of one fan-out, and *concurrency* how many
    branches run at once (a fixed pool of workers takes them in order).
    """

    max_steps: int = DEFAULT_MAX_STEPS
    max_fanout: int = DEFAULT_MAX_FANOUT
    concurrency: int = DEFAULT_CONCURRENCY

    def __attrs_post_init__(self) -> None:
        for name in ("max_steps", "max_fanout", "concurrency"):
            if getattr(self, name) < 1:
                msg = f"Limits.{name} must be at least 1"
                raise ValueError(msg)


# -- hooks ------------------------------------------------------------------


@final
@attrs.frozen
class Continue:
    """Gate decision: go ahead with the transition."""


@final
@attrs.frozen
class Stop:
    """Gate decision: end the run gracefully (nothing is written)."""

    reason: str = ""


@final
@attrs.frozen
class Interrupt:
    """Gate decision: pause for a human; resume with an answer."""

    question: str


Decision: TypeAlias = Continue | Stop | Interrupt


@final
@attrs.frozen
class Transition(Generic[S_co]):
    """What a gate sees before a transition runs.

    *answer* is the human's answer when a run interrupted at this very
    transition is resumed with one; otherwise ``None``.
    """

    source: str | None
    targets: tuple[str, ...]
    state: S_co
    step: int
    answer: str | None = None


Gate: TypeAlias = Callable[[Transition[S]], Awaitable[Decision]]
Observer: TypeAlias = Callable[[Snapshot[S]], Awaitable[None]]


GraphEvent: TypeAlias = (
    NodeStarted | NodeFinished | CheckpointSaved | Interrupted | Stopped
)
