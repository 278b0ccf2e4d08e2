"""examples/mcp_tools: an agent calls the tools of a real MCP server
(the example's own, written with the official SDK) over stdio."""

from __future__ import annotations

from typing import Any

import pytest

from pipeline.testing import Reply, ScriptedModel
from tests.examples.loader import load


pytestmark = pytest.mark.slow

agent: Any = load("mcp_tools", "agent")


async def test_the_agent_looks_its_notes_up() -> None:
    model = ScriptedModel(
        Reply.tool_call("find_notes", {"word": "deploy"}),
        Reply.text("Mondays."),
    )
    assert await agent.ask("when?", model) == "Mondays."
    first, second = model.requests
    assert sorted(t.name for t in first.tools) == ["add_note", "find_notes"]
    found = second.messages[-1]
    assert found.name == "find_notes"
    assert "the deploy key rotates on Mondays" in found.content
    assert "lunch" not in found.content


async def test_arguments_the_schema_refuses_never_reach_the_server() -> None:
    model = ScriptedModel(
        Reply.tool_call("add_note", {"text": 42}),
        Reply.text("could not"),
    )
    assert await agent.ask("note 42", model) == "could not"
    refused = model.requests[1].messages[-1]
    assert refused.content == (
        "error: invalid arguments for 'add_note': argument 'text': type "
        "must be 'string'"
    )
