"""Test doubles for pipelines: scripted models and agents.

Hypothesis strategies are in :mod:`pipeline.testing.strategies` (extra
``testing``).  Nothing here is imported by ``import pipeline``.
"""

from ..errors import Unconsumed as Unconsumed
from ..errors import UnexpectedCall as UnexpectedCall
from ._scripted import Reply as Reply
from ._scripted import ScriptedAgent as ScriptedAgent
from ._scripted import ScriptedModel as ScriptedModel


__all__ = (
    "Reply",
    "ScriptedAgent",
    "ScriptedModel",
    "Unconsumed",
    "UnexpectedCall",
)
