"""Event value types shared by graphs and streams (no heavy imports)."""

from __future__ import annotations

from typing import final

import attrs


@final
@attrs.frozen
class NodeStarted:
    """A node (or the branches of a fan-out) started."""

    nodes: tuple[str, ...]
    step: int


@final
@attrs.frozen
class NodeFinished:
    """A node (or a whole fan-out) finished and its state is merged."""

    nodes: tuple[str, ...]
    step: int


@final
@attrs.frozen
class CheckpointSaved:
    """A record was committed."""

    thread_id: str
    version: int


@final
@attrs.frozen
class Interrupted:
    """A gate paused the run for a human."""

    question: str


@final
@attrs.frozen
class Stopped:
    """A gate stopped the run gracefully."""

    reason: str


@final
@attrs.frozen
class CheckpointSkipped:
    """Loading a thread skipped its last record: torn or failing its
    checksum (a write cut short).  The run goes on from the one before."""

    thread_id: str
    version: int
    reason: str
