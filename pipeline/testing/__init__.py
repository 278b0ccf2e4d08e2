"""Test doubles for pipelines: scripted models and agents.

Hypothesis strategies are in :mod:`pipeline.testing.strategies` (extra
``testing``).  Nothing here is imported by ``import pipeline``.
"""

from typing import TYPE_CHECKING

from .._moved import moved
from ._scripted import Reply as Reply
from ._scripted import ScriptedAgent as ScriptedAgent
from ._scripted import ScriptedModel as ScriptedModel


__all__ = (
    "Reply",
    "ScriptedAgent",
    "ScriptedModel",
)

_MOVED: dict[str, str] = {
    "Unconsumed": "pipeline.errors:Unconsumed",
    "UnexpectedCall": "pipeline.errors:UnexpectedCall",
}

if not TYPE_CHECKING:  # type checkers refuse the old paths
    __getattr__ = moved(__name__, _MOVED)
