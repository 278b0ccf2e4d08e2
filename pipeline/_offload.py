"""Where an agent's model calls and tool calls run.

In process, by default.  A host that runs a step somewhere else may take
an agent's model calls and its own tools' calls out of the step, each as
a call of its own: the Temporal step activity makes each of them a
Temporal activity, with its own retry policy and timeouts, recorded in
the run's history (see :mod:`pipeline.temporal`).  The host sets an
:class:`Offload` around the step; the agent loop asks it, once per turn,
for the model to call and for the hook its tool calls go through.

Without an offload in force the loop pays one context-variable read per
turn.

A host finds an agent by name on any of its processes, so it needs to know
which agents exist: every :class:`~pipeline.Agent` is noted here
when it is made (weakly: a note never keeps an agent alive), and so is
every tool that runs a fold (:func:`~pipeline.agents.as_tool`), which must
stay in the step that runs it (its turns are that step's progress).
"""

from __future__ import annotations

import contextvars
import weakref

from collections.abc import Callable, Mapping
from typing import Protocol

from ._agent_spec import AgentSpec
from .models._types import Model
from .runs import ToolHook
from .tools import Tool


__all__ = (
    "Offload",
    "current_offload",
    "known_agents",
    "note_agent",
    "note_fold_tool",
    "offloading",
    "runs_a_fold",
)


class Offload(Protocol):
    """Takes some of an agent's calls out of the step that runs it."""

    def model(self, agent: AgentSpec, /) -> Model:
        """The model *agent*'s turns call: a stand-in that makes each call
        elsewhere, or ``agent.model`` itself (this call stays here)."""
        ...

    def tools(
        self, agent: AgentSpec, tools: Mapping[str, Tool], /
    ) -> ToolHook | None:
        """The hook *agent*'s tool calls go through (*tools*: every tool
        the turn offers, the agent's own and any its host added), or
        ``None``: they all run here."""
        ...


_OFFLOAD: contextvars.ContextVar[Offload | None] = contextvars.ContextVar(
    "pipeline_offload", default=None
)


current_offload: Callable[[], Offload | None] = _OFFLOAD.get
"""The offload in force, if any."""


def offloading(
    offload: Offload | None,
) -> contextvars.Token[Offload | None]:
    """Put *offload* in force for this context; reset with the token."""
    return _OFFLOAD.set(offload)


def reset(token: contextvars.Token[Offload | None]) -> None:
    """Undo :func:`offloading`."""
    _OFFLOAD.reset(token)


_AGENTS: weakref.WeakSet[AgentSpec] = weakref.WeakSet()
# Tools compare by value (and may hold unhashable schemas): by identity.
_FOLD_TOOLS: dict[int, weakref.ref[Tool]] = {}


def note_agent(agent: AgentSpec) -> None:
    """Note that *agent* exists (called as it is made)."""
    _AGENTS.add(agent)


def known_agents() -> tuple[AgentSpec, ...]:
    """The agents that exist in this process now."""
    return tuple(_AGENTS)


def note_fold_tool(tool: Tool) -> Tool:
    """Note that *tool* runs a fold (an agent, graph or swarm); *tool*."""
    key = id(tool)
    _FOLD_TOOLS[key] = weakref.ref(tool, lambda _: _FOLD_TOOLS.pop(key, None))
    return tool


def runs_a_fold(tool: Tool) -> bool:
    """Whether *tool* runs a fold."""
    ref = _FOLD_TOOLS.get(id(tool))
    return ref is not None and ref() is tool
