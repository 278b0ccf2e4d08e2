"""Public protocols and aliases for annotating your own code."""

from ._context import Metadata as Metadata
from ._context import MetaMerge as MetaMerge
from ._context import MetaValue as MetaValue
from ._handler import Call as Call
from ._handler import Middleware as Middleware


__all__ = ("Call", "MetaMerge", "MetaValue", "Metadata", "Middleware")
