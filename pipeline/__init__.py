"""Typed, async, functional pipelines for LLM-agent workflows.

Graphs live in :mod:`pipeline.graph` (``from pipeline import graph``), which
is imported on first use so that ``import pipeline`` stays light.
"""

from . import errors as errors
from . import middleware as middleware
from ._combinators import DEFAULT_LOOP_LIMIT as DEFAULT_LOOP_LIMIT
from ._combinators import Condition as Condition
from ._combinators import Item as Item
from ._combinators import condition as condition
from ._combinators import first as first
from ._combinators import for_each as for_each
from ._combinators import if_ as if_
from ._combinators import loop as loop
from ._combinators import metadata_equals as metadata_equals
from ._combinators import must as must
from ._combinators import noop as noop
from ._combinators import sequential as sequential
from ._combinators import switch as switch
from ._combinators import when as when
from ._context import Context as Context
from ._context import MergeStrategy as MergeStrategy
from ._context import merge_branches as merge_branches
from ._context import merge_metadata as merge_metadata
from ._handler import Handler as Handler
from ._handler import Par as Par
from ._handler import Race as Race
from ._lift import handler as handler
from ._lift import safe as safe
from ._mapreduce import map_reduce as map_reduce
from ._messages import Message as Message
from ._messages import Role as Role
from ._messages import ToolCall as ToolCall
from ._messages import Usage as Usage
from ._version import __version__ as __version__
from .budgets import Budget as Budget
from .budgets import Price as Price
from .budgets import RunUsage as RunUsage
from .errors import BudgetExceeded as BudgetExceeded
from .events import Note as Note
from .events import emit as emit
from .events import stream as stream
from .runs import RunResult as RunResult
from .runs import Scope as Scope
from .runs import run as run
from .runs import scope as scope
from .secrets import Secret as Secret


__all__ = (
    "DEFAULT_LOOP_LIMIT",
    "Budget",
    "BudgetExceeded",
    "Condition",
    "Context",
    "Handler",
    "Item",
    "MergeStrategy",
    "Message",
    "Note",
    "Par",
    "Price",
    "Race",
    "Role",
    "RunResult",
    "RunUsage",
    "Scope",
    "Secret",
    "ToolCall",
    "Usage",
    "__version__",
    "condition",
    "emit",
    "errors",
    "first",
    "for_each",
    "handler",
    "if_",
    "loop",
    "map_reduce",
    "merge_branches",
    "merge_metadata",
    "metadata_equals",
    "middleware",
    "must",
    "noop",
    "run",
    "safe",
    "scope",
    "sequential",
    "stream",
    "switch",
    "when",
)
