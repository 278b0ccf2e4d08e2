"""Building a connection: checked before anything starts (no server)."""

from __future__ import annotations

import pytest

from pipeline.errors import ConstructionError
from pipeline.mcp import http, stdio


@pytest.mark.parametrize("timeout", [0, -1.5, float("nan")])
def test_timeout_must_be_positive(timeout: float) -> None:
    with pytest.raises(ConstructionError, match="timeout must be a positive"):
        stdio("python", "server.py", timeout=timeout)


def test_names() -> None:
    assert stdio("python", "-m", "notes").name == "notes"
    assert stdio("/usr/bin/notes-server").name == "notes-server"
    assert http("http://user:pw@127.0.0.1:8000/mcp").name == "127.0.0.1:8000"
    assert repr(http("http://x/mcp", name="docs")) == "McpServer(docs)"
    assert not stdio("python").connected
