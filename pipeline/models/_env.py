"""Choosing a provider from the environment (for examples and scripts)."""

from __future__ import annotations

import os

from collections.abc import Mapping

from ._types import Model


OPENAI_DEFAULT = "gpt-4o-mini"
ANTHROPIC_DEFAULT = "claude-sonnet-4-5"


def from_env(
    *,
    fallback: Model,
    model: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> Model:
    """A real model when an API key is set, else *fallback*.

    ``OPENAI_API_KEY`` gives an :class:`~pipeline.models.openai.OpenAIModel`
    (honouring ``OPENAI_BASE_URL``, so any OpenAI-compatible server works),
    else ``ANTHROPIC_API_KEY`` an
    :class:`~pipeline.models.anthropic.AnthropicModel`; *model* names the
    model (default: ``$PIPELINE_MODEL``, else a small current model of that
    provider).  Without a key, *fallback* (a scripted model, say) answers,
    so the same code runs offline, in tests and against a provider.

    >>> from pipeline.testing import Reply, ScriptedModel
    >>> offline = ScriptedModel(Reply.text("hi"))
    >>> from_env(fallback=offline, environ={}) is offline
    True

    .. versionadded:: 0.1.0
    """
    env = os.environ if environ is None else environ
    chosen = model or env.get("PIPELINE_MODEL") or None
    if env.get("OPENAI_API_KEY"):
        from .openai import OpenAIModel  # noqa: PLC0415  # the SDK loads on use

        return OpenAIModel(
            chosen or OPENAI_DEFAULT,
            api_key=env["OPENAI_API_KEY"],
            base_url=env.get("OPENAI_BASE_URL") or None,
        )
    if env.get("ANTHROPIC_API_KEY"):
        from .anthropic import AnthropicModel  # noqa: PLC0415

        return AnthropicModel(
            chosen or ANTHROPIC_DEFAULT, api_key=env["ANTHROPIC_API_KEY"]
        )
    return fallback
