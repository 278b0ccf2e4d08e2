"""Graphs and swarms a worker hosts, by name.

A run names its machine (and the fingerprint it started with); the
workflow and the step activity find the machine here.  The table is one
per process (Temporal's sandbox re-imports workflow code, but this module
is passed through, so the workflow sees the worker's registrations).
Registering another machine under a taken name is refused, unless it has
the same fingerprint (the same graph imported twice).
"""

from __future__ import annotations

import threading

from typing import Any, Literal, TypeAlias, TypeVar, final

import attrs

from ..fold import Codec, Hooks
from ..graph._graph import Graph
from ..swarm._swarm import Swarm


S = TypeVar("S")

Hostable: TypeAlias = Graph[Any, Any] | Swarm[Any]
"""What a worker hosts: a graph or a swarm."""


@final
@attrs.frozen(eq=False)
class Hosted:
    """One hosted machine: its transition, limits and hooks."""

    name: str
    kind: Literal["graph", "swarm"]
    machine: Any  # GraphMachine or SwarmMachine (the fold engine's Machine)
    limits: Any
    hooks: Hooks[Any]
    max_steps: int
    codec: Codec[Any]
    fingerprint: str
    source: Hostable


def host(value: Hostable, name: str | None = None) -> Hosted:
    """*value* as a hosted machine, under *name* (by default its own)."""
    if isinstance(value, Graph):
        kind: Literal["graph", "swarm"] = "graph"
        max_steps = value.limits.max_steps
    elif isinstance(value, Swarm):
        kind = "swarm"
        max_steps = value.limits.max_handoffs + 1
    else:  # for callers that do not type-check
        msg = f"a worker hosts graphs and swarms, not {type(value).__name__}"  # type: ignore[unreachable]
        raise TypeError(msg)
    return Hosted(
        name or value.name,
        kind,
        value._machine,
        value.limits,
        Hooks(value.gates, value.observers),
        max_steps,
        value.codec,
        value.fingerprint,
        value,
    )


_LOCK = threading.Lock()
_HOSTED: dict[str, Hosted] = {}


def register(hosted: Hosted) -> None:
    """Make *hosted* findable by name in this process.

    Raises:
        ValueError: another machine (another fingerprint) has the name.
    """
    with _LOCK:
        known = _HOSTED.get(hosted.name)
        if known is not None and known.fingerprint != hosted.fingerprint:
            msg = (
                f"{hosted.name!r} is already hosted in this process with "
                f"fingerprint {known.fingerprint}; one name, one machine"
            )
            raise ValueError(msg)
        _HOSTED[hosted.name] = hosted


def hosting(name: str, fingerprint: str) -> Hosted | str:
    """The machine hosted as *name* with *fingerprint*, or why there is
    none here (another version, or nothing, is hosted under the name)."""
    hosted = _HOSTED.get(name)
    if hosted is None or hosted.fingerprint != fingerprint:
        return (
            f"this worker does not host {name!r} with fingerprint "
            f"{fingerprint}"
        )
    return hosted
