"""What the agent loop reads of an agent, as a protocol.

The loop (:mod:`pipeline._turns`) and the hosts that run its calls
elsewhere (:mod:`pipeline._offload`, :mod:`pipeline.temporal`) need an
agent's settings, not the class that holds them:
:class:`~pipeline.Agent` meets this protocol, and the modules below it
depend on the protocol only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, Protocol

from .models._types import Model, ResponseSchema


if TYPE_CHECKING:
    from ._output import Output


class AgentSpec(Protocol):
    """An agent's settings, read-only."""

    @property
    def name(self) -> str:
        """The agent's name: its messages and spans carry it."""
        ...

    @property
    def model(self) -> Model:
        """The model its turns call."""
        ...

    @property
    def instructions(self) -> str:
        """Its system prompt."""
        ...

    @property
    def max_turns(self) -> int:
        """Model calls one run may make."""
        ...

    @property
    def on_turn_limit(self) -> Literal["fail", "answer"]:
        """What the last allowed turn does."""
        ...

    @property
    def response_schema(self) -> ResponseSchema | None:
        """The structured output it asks for, if any."""
        ...

    @property
    def temperature(self) -> float | None:
        """Sampling temperature, if set."""
        ...

    @property
    def max_tokens(self) -> int | None:
        """Output token limit, if set."""
        ...

    @property
    def max_parallel_tools(self) -> int | None:
        """Tool calls of one reply that may run at once (``None``: all)."""
        ...

    @property
    def output(self) -> Output[Any] | None:
        """The structured answer it must give, and how often it may be
        asked again (``None``: any answer ends the run)."""
        ...
