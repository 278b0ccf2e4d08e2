"""Targets of ``pipeline mcp serve`` in the tests (run in a subprocess)."""

from __future__ import annotations

from pipeline import Agent
from pipeline.testing import Reply, ScriptedModel
from tests.cli.flows import plain


agent = Agent("helper", ScriptedModel(Reply.text("hello from the agent")))
"""An agent whose one reply is scripted."""

graph = plain
"""classify -> draft -> send, over a ticket."""

number = 7
"""Neither an agent nor a graph."""
