"""An agent whose tools live in an MCP server (``notes_server.py``).

``pipeline.mcp.stdio`` starts the server as a subprocess and lists its
tools; the agent gets them like any other tool: arguments are checked
against the server's JSON schema before they are sent, each call has a
timeout, and a server that dies mid-call is an error result, not a hang.

Run it as a script: ``python agent.py "when does the deploy key rotate?"``.
With ``OPENAI_API_KEY`` or ``ANTHROPIC_API_KEY`` set the agent asks that
provider; without one it replays a script, so the example runs offline.
"""

from __future__ import annotations

import sys

from pathlib import Path

import anyio

from pipeline import Agent, Context, Message
from pipeline.mcp import stdio
from pipeline.models import Model, from_env
from pipeline.testing import Reply, ScriptedModel


SERVER = Path(__file__).with_name("notes_server.py")


def offline() -> Model:
    """A scripted model: it looks the word up, then answers."""
    return ScriptedModel(
        Reply.tool_call("find_notes", {"word": "deploy"}),
        Reply.text("The deploy key rotates on Mondays."),
    )


async def ask(question: str, model: Model) -> str:
    """Answer *question* with the notebook's tools."""
    async with stdio(
        sys.executable, str(SERVER), name="notes", timeout=10
    ) as notes:
        agent = Agent(
            "assistant",
            model,
            instructions="Answer from the notes; look them up first.",
            tools=await notes.tools(),
        )
        out = await agent(Context.of(Message.user(question)))
    return out.map(lambda ctx: ctx.messages[-1].content).value_or("(failed)")


def main(argv: list[str]) -> int:
    question = argv[0] if argv else "When does the deploy key rotate?"
    model = from_env(fallback=offline())
    print(anyio.run(ask, question, model))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
