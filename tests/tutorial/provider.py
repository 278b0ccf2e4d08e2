"""The provider docs/tutorial.md's "real model" block talks to in CI.

Sybil runs that page's blocks with a real HTTP server on 127.0.0.1 speaking
the OpenAI API (:class:`tests.models.llm_server.FakeLLM`) and the
environment a user would set (``OPENAI_API_KEY``, ``OPENAI_BASE_URL``):
:func:`setup` queues the replies the block's question gets, :func:`teardown`
checks the request the adapter sent and puts the environment back.
"""

from __future__ import annotations

import json
import os

from typing import Any

from tests.models.llm_server import FakeLLM, Json


SERVER = "_tutorial_llm"
SAVED = "_tutorial_environ"
VARIABLES = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "PIPELINE_MODEL")


def completion(message: dict[str, Any], finish: str) -> dict[str, Any]:
    """A Chat Completions response body holding *message*."""
    return {
        "id": "chatcmpl-tutorial",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": 40,
            "completion_tokens": 9,
            "total_tokens": 49,
        },
    }


def setup(namespace: dict[str, Any]) -> None:
    """Start the server, queue a tool call and an answer, set the
    environment the adapter reads."""
    server = FakeLLM()
    server.reply(
        Json(
            completion(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {
                                "name": "population",
                                "arguments": '{"city": "Lyon"}',
                            },
                        }
                    ],
                },
                "tool_calls",
            )
        ),
        Json(
            completion(
                {
                    "role": "assistant",
                    "content": "Lyon has about 520,000 inhabitants.",
                },
                "stop",
            )
        ),
    )
    server.start()
    namespace[SAVED] = {name: os.environ.get(name) for name in VARIABLES}
    os.environ["OPENAI_API_KEY"] = "sk-tutorial"
    os.environ["OPENAI_BASE_URL"] = f"{server.url}/v1"
    os.environ.pop("PIPELINE_MODEL", None)
    namespace[SERVER] = server


def teardown(namespace: dict[str, Any]) -> None:
    """Stop the server, restore the environment, and check what the
    adapter sent: the question, the tool's schema, then its result."""
    server: FakeLLM = namespace[SERVER]
    server.stop()
    for name, value in namespace[SAVED].items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    paths = [path for path, _ in server.requests]
    assert paths == ["/v1/chat/completions"] * 2, paths
    first, second = (body for _, body in server.requests)
    assert first["model"] == "gpt-4o-mini"
    assert first["messages"][-1] == {
        "role": "user",
        "content": "How many people live in Lyon?",
    }
    assert [t["function"]["name"] for t in first["tools"]] == ["population"]
    result = second["messages"][-1]
    assert result["role"] == "tool"
    assert json.loads(result["content"]) == 520_000
    assert not server.replies  # both replies were used
