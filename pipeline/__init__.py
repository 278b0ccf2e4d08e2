"""Typed, async, functional pipelines for LLM-agent workflows.

The names most code needs live here (the algebra, :class:`Agent`,
:class:`Graph`, :class:`Swarm`, :class:`Tool`); each subpackage holds what
only its concept has (:mod:`pipeline.graph`, :mod:`pipeline.swarm`,
:mod:`pipeline.fold`, :mod:`pipeline.stores`, ...).  Every public name has
one import path (docs/api.md lists them).  ``import pipeline`` loads none
of the names below: ``import pipeline`` loads none of them (the ``pipeline``
command starts fast), the first use of one loads its module, and type
checkers see each name's own type.
"""

from ._version import __version__ as __version__


# Not typing's: importing typing takes long enough for a Ctrl-C to land in
# it (``pipeline`` would print a traceback).  Type checkers know the name.
TYPE_CHECKING = False


if TYPE_CHECKING:  # what the type checkers see; at run time, __getattr__
    from . import errors as errors
    from . import failures as failures
    from . import middleware as middleware
    from ._approval import Approve as Approve
    from ._approval import Deny as Deny
    from ._approval import ToolApproval as ToolApproval
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
    from ._combinators import or_else as or_else
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
    from ._messages import FilePart as FilePart
    from ._messages import ImagePart as ImagePart
    from ._messages import Message as Message
    from ._messages import Part as Part
    from ._messages import Role as Role
    from ._messages import TextPart as TextPart
    from ._messages import ToolCall as ToolCall
    from ._messages import Usage as Usage
    from ._output import Output as Output
    from ._usage import RunUsage as RunUsage
    from .agents import Agent as Agent
    from .budgets import Budget as Budget
    from .budgets import Price as Price
    from .events import Note as Note
    from .events import emit as emit
    from .events import stream as stream
    from .fold import interrupt as interrupt
    from .graph._graph import Graph as Graph
    from .runs import RunResult as RunResult
    from .runs import Scope as Scope
    from .runs import run as run
    from .runs import scope as scope
    from .secrets import Secret as Secret
    from .swarm._swarm import Swarm as Swarm
    from .tools import RunContext as RunContext
    from .tools import Tool as Tool
    from .tools import tool as tool


__all__ = (
    "DEFAULT_LOOP_LIMIT",
    "Agent",
    "Approve",
    "Budget",
    "Condition",
    "Context",
    "Deny",
    "FilePart",
    "Graph",
    "Handler",
    "ImagePart",
    "Item",
    "MergeStrategy",
    "Message",
    "Note",
    "Output",
    "Par",
    "Part",
    "Price",
    "Race",
    "Role",
    "RunContext",
    "RunResult",
    "RunUsage",
    "Scope",
    "Secret",
    "Swarm",
    "TextPart",
    "Tool",
    "ToolApproval",
    "ToolCall",
    "Usage",
    "__version__",
    "condition",
    "emit",
    "errors",
    "failures",
    "first",
    "for_each",
    "handler",
    "if_",
    "interrupt",
    "loop",
    "map_reduce",
    "merge_branches",
    "merge_metadata",
    "metadata_equals",
    "middleware",
    "must",
    "noop",
    "or_else",
    "run",
    "safe",
    "scope",
    "sequential",
    "stream",
    "switch",
    "tool",
    "when",
)


# Each public name, and the module that defines it: ``import pipeline``
# imports none of them, so the ``pipeline`` command starts fast; the first
# use of a name imports its module (PEP 562).
_HOMES = {
    "errors": ".errors",
    "failures": ".failures",
    "middleware": ".middleware",
    "DEFAULT_LOOP_LIMIT": "._combinators",
    "Condition": "._combinators",
    "Item": "._combinators",
    "condition": "._combinators",
    "Approve": "._approval",
    "Deny": "._approval",
    "ToolApproval": "._approval",
    "first": "._combinators",
    "for_each": "._combinators",
    "if_": "._combinators",
    "loop": "._combinators",
    "metadata_equals": "._combinators",
    "must": "._combinators",
    "noop": "._combinators",
    "or_else": "._combinators",
    "sequential": "._combinators",
    "switch": "._combinators",
    "when": "._combinators",
    "Context": "._context",
    "MergeStrategy": "._context",
    "merge_branches": "._context",
    "merge_metadata": "._context",
    "Handler": "._handler",
    "Par": "._handler",
    "Race": "._handler",
    "handler": "._lift",
    "safe": "._lift",
    "map_reduce": "._mapreduce",
    "FilePart": "._messages",
    "ImagePart": "._messages",
    "Message": "._messages",
    "Part": "._messages",
    "TextPart": "._messages",
    "Role": "._messages",
    "ToolCall": "._messages",
    "Usage": "._messages",
    "Agent": ".agents",
    "Output": "._output",
    "Budget": ".budgets",
    "Price": ".budgets",
    "RunUsage": "._usage",
    "Note": ".events",
    "emit": ".events",
    "stream": ".events",
    "interrupt": ".fold",
    "RunResult": ".runs",
    "Scope": ".runs",
    "run": ".runs",
    "scope": ".runs",
    "Secret": ".secrets",
    "Graph": ".graph._graph",
    "Swarm": ".swarm._swarm",
    "RunContext": ".tools",
    "Tool": ".tools",
    "tool": ".tools",
}


# Names that moved: they still work, with a DeprecationWarning.
_MOVED = {"BudgetExceeded": "pipeline.failures:BudgetExceeded"}


if not TYPE_CHECKING:  # type checkers see the imports above, and no more

    def __getattr__(name: str) -> object:
        home = _HOMES.get(name)
        if home is None:
            from ._moved import moved  # noqa: PLC0415

            return moved(__name__, _MOVED, depth=3)(name)
        from importlib import import_module  # noqa: PLC0415

        module = import_module(home, __name__)
        value = module if home == f".{name}" else getattr(module, name)
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})
