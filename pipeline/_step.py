"""The step in flight of a checkpointed run, as the floors below the fold
see it: where ``map_reduce`` keeps its items' outputs and lets each item
ask a human apart from the others.

The fold (:mod:`pipeline.fold._journal`) makes its boundary current
through :data:`STEP`; this module holds only the variable and the
protocol the boundary meets, so that a combinator on a lower floor can
use it without importing the fold.
"""

from __future__ import annotations

import contextvars

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from returns.result import Success


class Step(Protocol):
    """What a combinator may do with the step in flight (the fold's
    ``Boundary`` is one).

    .. versionadded:: 0.1.0
    """

    def items_key(self, label: str, /) -> str:
        """The key of the next ``map_reduce`` named *label* in the step."""
        ...

    def docs(self, key: str, /) -> tuple[Any, ...]:
        """The documents kept under *key* (oldest first)."""
        ...

    def save_all(
        self, docs: Mapping[str, dict[str, Any]], /
    ) -> Awaitable[object]:
        """Keep *docs* (key to document) at once; ``None`` once
        committed, else why not."""
        ...

    def child(self, key: str, order: int, /) -> Step:
        """The step of the item whose output is kept under *key*."""
        ...

    def may_wait(self) -> bool:
        """Whether a branch or item of this step may wait at a question
        asked before (else none needs its own step to know it does not)."""
        ...

    def holds(self, key: str, /) -> bool:
        """Whether anything is kept under *key* ``/`` (the items of a
        ``map_reduce``)."""
        ...

    def waits(self) -> bool:
        """Whether this item waits at an unanswered question (not run)."""
        ...

    def asked_here(self) -> bool:
        """Whether this item paused at a question in this attempt."""
        ...

    def took(self, raised: BaseException, /) -> bool:
        """Whether *raised* is a question this item asked apart."""
        ...


STEP: contextvars.ContextVar[Any] = contextvars.ContextVar(
    "pipeline_fold_boundary", default=None
)
"""The current step (a :class:`Step`, or ``None``)."""


def current_step() -> Step | None:
    """The step in flight, if a checkpointed run is in one.

    .. versionadded:: 0.1.0
    """
    out: Any = STEP.get()
    if type(out) is Later:
        out = out.get()
    step: Step | None = out
    return step


class Later:
    """A step made only when something asks for it: a ``map_reduce`` item
    that never looks at its step (asks nothing, nests no fold) costs no
    boundary and no digest of its item.

    .. versionadded:: 0.1.0
    """

    __slots__ = ("_make", "fresh", "made")

    def __init__(
        self, make: Callable[[], Step], *, fresh: bool = False
    ) -> None:
        self._make = make
        self.fresh = fresh
        """Whether the step, made, is known to be fresh (nothing asked in
        it can be answered: see ``Boundary.fresh``); ``False``: ask it."""
        self.made: Step | None = None
        """The step, once made."""

    def get(self) -> Step:
        """The step (made now, once, if it was not yet)."""
        made = self.made
        if made is None:
            made = self.made = self._make()
        return made


WAITED: Any = object()
"""What :func:`run_apart` returns for a branch or item that waits."""


async def run_apart(inner: Step, call: Callable[[], Awaitable[Any]]) -> Any:
    """Run *call* (a fan-out branch, a ``map_reduce`` item) in its own
    step *inner*: its result, or :data:`WAITED` if it waits at a question
    (asked now, or before and not answered yet: then it is not run).

    .. versionadded:: 0.1.0
    """
    if inner.waits():
        return WAITED
    token = STEP.set(inner)
    try:
        r = await call()
    except BaseException as exc:
        if not inner.took(exc):
            raise
        return WAITED  # it asked: its siblings go on
    finally:
        STEP.reset(token)
    if type(r) is not Success and inner.asked_here():
        return WAITED  # a fold in it paused (and said so)
    return r


async def run_later(
    make: Callable[[], Step], call: Callable[[], Awaitable[Any]]
) -> Any:
    """:func:`run_apart`, with the inner step made by *make* only if
    *call* looks at it (or raises): for a step none of whose items may
    wait (:meth:`Step.may_wait` is false), so the inner step need not be
    asked whether it waits before *call* runs.

    .. versionadded:: 0.1.0
    """
    later = Later(make)
    token = STEP.set(later)
    try:
        r = await call()
    except BaseException as exc:
        if not later.get().took(exc):
            raise
        return WAITED  # it asked: its siblings go on
    finally:
        STEP.reset(token)
    inner = later.made  # not made: nothing in the call asked anything
    if inner is not None and type(r) is not Success and inner.asked_here():
        return WAITED
    return r
