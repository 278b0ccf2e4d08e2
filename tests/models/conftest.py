"""Fixtures: the loopback LLM server and adapters pointed at it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.models.llm_server import FakeLLM


@pytest.fixture(name="llm")
def _llm() -> Iterator[FakeLLM]:
    """A real HTTP server on 127.0.0.1, stopped after the test."""
    server = FakeLLM()
    server.start()
    try:
        yield server
    finally:
        server.stop()
