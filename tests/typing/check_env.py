"""Type-level contract of from_env. Checked, never executed."""

# pyright: reportUnnecessaryTypeIgnoreComment=error

from __future__ import annotations

from typing import assert_type

from pipeline.models import Model, from_env
from pipeline.testing import Reply, ScriptedModel


offline = ScriptedModel(Reply.text("hi"))
assert_type(from_env(fallback=offline), Model)
assert_type(from_env(fallback=offline, model="m", environ={}), Model)

from_env(offline)  # type: ignore[call-arg]  # fallback is keyword-only
from_env(fallback="gpt-4o")  # type: ignore[arg-type]  # a model, not a name
