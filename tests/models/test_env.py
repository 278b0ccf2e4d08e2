"""from_env: a provider when its key is set, the fallback otherwise."""

from __future__ import annotations

import pytest

from pipeline.models import from_env
from pipeline.models.anthropic import AnthropicModel
from pipeline.models.openai import OpenAIModel
from pipeline.testing import Reply, ScriptedModel


@pytest.fixture(name="offline")
def _offline() -> ScriptedModel:
    return ScriptedModel(Reply.text("offline"))


async def test_no_key_gives_the_fallback(offline: ScriptedModel) -> None:
    """Without a key the fallback answers (empty keys do not count)."""
    assert from_env(fallback=offline, environ={}) is offline
    env = {"OPENAI_API_KEY": "", "ANTHROPIC_API_KEY": ""}
    assert from_env(fallback=offline, environ=env) is offline


async def test_openai_key(offline: ScriptedModel) -> None:
    """OPENAI_API_KEY picks OpenAI, with the model and base URL asked for."""
    env = {
        "OPENAI_API_KEY": "sk-test",
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
        "PIPELINE_MODEL": "small",
        "ANTHROPIC_API_KEY": "also-set",
    }
    model = from_env(fallback=offline, environ=env)
    assert isinstance(model, OpenAIModel)
    async with model:
        assert model.name == "openai:small"
        assert str(model.client.base_url) == "http://127.0.0.1:9/v1/"


async def test_anthropic_key(offline: ScriptedModel) -> None:
    """ANTHROPIC_API_KEY alone picks Anthropic; *model* wins over the env."""
    env = {"ANTHROPIC_API_KEY": "k", "PIPELINE_MODEL": "ignored"}
    model = from_env(fallback=offline, model="claude-x", environ=env)
    assert isinstance(model, AnthropicModel)
    assert model.name.endswith("claude-x")
    await model.aclose()
