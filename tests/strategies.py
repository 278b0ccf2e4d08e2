"""Strategies for this suite: the public ones from pipeline.testing."""

from pipeline.testing.strategies import IntHandler as IntHandler
from pipeline.testing.strategies import contexts as contexts
from pipeline.testing.strategies import handlers as handlers
from pipeline.testing.strategies import messages as messages
from pipeline.testing.strategies import meta_values as meta_values
from pipeline.testing.strategies import parts as parts


__all__ = (
    "IntHandler",
    "contexts",
    "handlers",
    "messages",
    "meta_values",
    "parts",
)
