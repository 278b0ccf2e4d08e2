"""A small MCP server, written with the official SDK: a notebook.

Its tools (``add_note``, ``find_notes``) are what the agent in
``agent.py`` calls.  Run alone it speaks MCP on standard input and output
(``python notes_server.py``); any MCP client can use it.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer


server = MCPServer("notes")
NOTES: list[str] = ["the deploy key rotates on Mondays", "lunch is at noon"]


@server.tool()
def add_note(text: str) -> str:
    """Keep a note."""
    NOTES.append(text)
    return f"kept note {len(NOTES)}"


@server.tool()
def find_notes(word: str) -> list[str]:
    """The notes that mention a word."""
    return [n for n in NOTES if word.lower() in n.lower()]


if __name__ == "__main__":
    server.run()
