"""Budgets: what one run may spend, shared by every branch.

>>> budget = Budget(
...     tokens=50_000,
...     cost=0.25,
...     model_calls=40,
...     tool_calls=100,
...     wall_time=120.0,
...     prices={"openai:gpt-4o-mini": Price(input=0.15, output=0.60)},
... )
>>> budget.prices["openai:gpt-4o-mini"].cost(1_000_000, 0)
0.15

A budget is given to :func:`pipeline.scope` (or :func:`pipeline.run`); every
model and tool call made inside it, in any branch of ``&``, ``|``, a graph's
fan-out, a swarm or :func:`~pipeline.map_reduce`, is checked against one
shared ledger *before it starts*: once a limit is reached, no further call
starts and each branch fails with :class:`~pipeline.failures.BudgetExceeded`
at its next call.  Tokens and cost are known only when a call returns, so a
run may end above its token or cost limit by at most the calls that were in
flight when it was reached (one per concurrent branch).
"""

from __future__ import annotations

import logging
import math

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, final

import attrs

from . import _usage
from ._moved import moved
from .errors import ConstructionError
from .failures import BudgetExceeded


if TYPE_CHECKING:
    from ._usage import RunUsage


__all__ = ()

_LOG = logging.getLogger("pipeline.budgets")


def _number(value: object) -> bool:
    """A finite number >= 0 that a float can hold (10**400 cannot)."""
    if type(value) is bool or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value) and value >= 0
    except OverflowError:  # an int past float's range
        return False


def _count(value: object) -> bool:
    """A whole number >= 0, of any size."""
    return type(value) is not bool and isinstance(value, int) and value >= 0


def _non_negative(
    _: object, attribute: attrs.Attribute[Any], value: object
) -> None:
    if not _number(value):
        msg = f"Price({attribute.name}=...): must be a finite number >= 0"
        raise ConstructionError(msg)


def _limit(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not _number(value):
        msg = f"Budget({attribute.name}=...): a limit must be a finite number >= 0 or None"
        raise ConstructionError(msg)


def _count_limit(
    _: object, attribute: attrs.Attribute[Any], value: object
) -> None:
    if value is not None and not _count(value):
        msg = f"Budget({attribute.name}=...): a limit must be a whole number >= 0 or None"
        raise ConstructionError(msg)


@final
@attrs.frozen
class Price:
    """What a model costs, per million tokens (in any currency you like:
    the budget's *cost* is in the same one).

    .. versionadded:: 0.1.0
    """

    input: float = attrs.field(validator=_non_negative)
    output: float = attrs.field(validator=_non_negative)

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        """The cost of one call with these token counts."""
        return (
            input_tokens * self.input + output_tokens * self.output
        ) / 1_000_000


def _prices(value: Mapping[str, Price]) -> Mapping[str, Price]:
    return MappingProxyType(dict(value))


@final
@attrs.frozen
class Budget:
    """Per-run limits; ``None`` (the default) means no limit.

    *tokens* bounds input plus output tokens over every model call; *cost*
    the sum of each call's cost from *prices* (keyed by the model's
    :attr:`~pipeline.models.Model.name`, e.g. ``openai:gpt-4o``; a cost
    limit refuses a model missing from the table rather than guess);
    *model_calls* and *tool_calls* count calls started; *wall_time* is
    seconds since the run started (anyio's clock, so a test's fake clock
    drives it).  *repairs* bounds what the model is asked to fix: each
    re-ask after a final answer that did not decode or was refused (by the
    output's validator or an output guardrail) is one, refused before it
    is sent once the limit is reached; each tool call the model sends to
    an unknown tool or with arguments that do not decode is one too
    (its error result still goes back), and once more were made than
    the limit allows, the next model call is refused.  These repairs are
    model and tool calls as well, and count in those limits too.

    .. versionadded:: 0.1.0
    """

    tokens: int | None = attrs.field(default=None, validator=_count_limit)
    cost: float | None = attrs.field(default=None, validator=_limit)
    model_calls: int | None = attrs.field(default=None, validator=_count_limit)
    tool_calls: int | None = attrs.field(default=None, validator=_count_limit)
    wall_time: float | None = attrs.field(default=None, validator=_limit)
    prices: Mapping[str, Price] = attrs.field(factory=dict, converter=_prices)
    repairs: int | None = attrs.field(default=None, validator=_count_limit)


@final
class Ledger:
    """The running totals of one scope, checked before each call.

    Plain counters: every branch runs on the same event loop thread, and a
    check and its reservation happen without an ``await`` in between.
    """

    __slots__ = (
        "budget",
        "cost",
        "exceeded",
        "input_tokens",
        "model_calls",
        "output_tokens",
        "parent",
        "repairs",
        "started",
        "tool_calls",
    )

    def __init__(
        self, budget: Budget | None, started: float, parent: Ledger | None
    ) -> None:
        self.budget = budget
        self.started = started
        self.parent = parent
        self.input_tokens = 0
        self.output_tokens = 0
        self.cost = 0.0
        self.model_calls = 0
        self.tool_calls = 0
        self.repairs = 0
        self.exceeded: BudgetExceeded | None = None

    def usage(self, now: float) -> RunUsage:
        """The totals so far, *now* being anyio's current time."""
        return _usage.RunUsage(
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            cost=self.cost,
            model_calls=self.model_calls,
            tool_calls=self.tool_calls,
            elapsed=max(0.0, now - self.started),
            repairs=self.repairs,
        )

    def start_model_call(
        self, model: str, now: float
    ) -> BudgetExceeded | None:
        """Reserve one model call, or say which limit refuses it."""
        refused = self._check(now, model=model, model_calls=1)
        if refused is None:
            ledger: Ledger | None = self
            while ledger is not None:
                ledger.model_calls += 1
                ledger = ledger.parent
        return refused

    def start_tool_calls(self, n: int, now: float) -> BudgetExceeded | None:
        """Reserve *n* tool calls (all or none), or say which limit refuses."""
        refused = self._check(now, tool_calls=n)
        if refused is None:
            ledger: Ledger | None = self
            while ledger is not None:
                ledger.tool_calls += n
                ledger = ledger.parent
        return refused

    def start_repair(self, now: float) -> BudgetExceeded | None:
        """Reserve one re-ask of the model to fix its final answer, or say
        which limit refuses it."""
        refused = self._check(now, repairs=1)
        if refused is None:
            ledger: Ledger | None = self
            while ledger is not None:
                ledger.repairs += 1
                ledger = ledger.parent
        return refused

    def malformed_tool_calls(self, n: int) -> None:
        """Count *n* tool calls whose arguments (or tool) were wrong: their
        error results go back, and past the repairs limit the next model
        call is refused."""
        ledger: Ledger | None = self
        while ledger is not None:
            ledger.repairs += n
            ledger = ledger.parent

    def spend(self, model: str, input_tokens: int, output_tokens: int) -> None:
        """Add a finished model call's tokens and cost.

        A count a model reports that is not a whole number >= 0 counts as
        0 (and is logged): a malformed response must not lower the ledger
        and let later calls past a limit.
        """
        if not (_count(input_tokens) and _count(output_tokens)):
            _LOG.warning(
                "model %r reported token usage that is not a count >= 0; "
                "counted as 0",
                model,
            )
            input_tokens = input_tokens if _count(input_tokens) else 0
            output_tokens = output_tokens if _count(output_tokens) else 0
        ledger: Ledger | None = self
        while ledger is not None:
            ledger.input_tokens += input_tokens
            ledger.output_tokens += output_tokens
            budget = ledger.budget
            price = budget.prices.get(model) if budget is not None else None
            if price is not None:
                ledger.cost += price.cost(input_tokens, output_tokens)
            ledger = ledger.parent

    def _check(
        self,
        now: float,
        *,
        model: str | None = None,
        model_calls: int = 0,
        tool_calls: int = 0,
        repairs: int = 0,
    ) -> BudgetExceeded | None:
        ledger: Ledger | None = self
        while ledger is not None:
            refused = ledger._refuses(
                now, model, model_calls, tool_calls, repairs
            )
            if refused is not None:
                return refused
            ledger = ledger.parent
        return None

    def _refuses(
        self,
        now: float,
        model: str | None,
        model_calls: int,
        tool_calls: int,
        repairs: int,
    ) -> BudgetExceeded | None:
        if self.exceeded is not None:
            return self.exceeded
        budget = self.budget
        if budget is None:
            return None
        checks: tuple[tuple[str, int | float | None, float], ...] = (
            ("tokens", budget.tokens, self.input_tokens + self.output_tokens),
            ("cost", budget.cost, self.cost),
            ("wall_time", budget.wall_time, now - self.started),
        )
        for limit, maximum, spent in checks:
            if maximum is not None and spent >= maximum:
                return self._exceed(limit, maximum, spent, now)
        if (
            model_calls
            and budget.model_calls is not None
            and self.model_calls + model_calls > budget.model_calls
        ):
            return self._exceed(
                "model_calls", budget.model_calls, self.model_calls, now
            )
        if (
            tool_calls
            and budget.tool_calls is not None
            and self.tool_calls + tool_calls > budget.tool_calls
        ):
            return self._exceed(
                "tool_calls", budget.tool_calls, self.tool_calls, now
            )
        if budget.repairs is not None and (
            (repairs and self.repairs + repairs > budget.repairs)
            or (model_calls and self.repairs > budget.repairs)
        ):
            return self._exceed("repairs", budget.repairs, self.repairs, now)
        if (
            model is not None
            and budget.cost is not None
            and model not in budget.prices
        ):
            return self._exceed("cost", budget.cost, self.cost, now, model)
        return None

    def _exceed(
        self,
        limit: str,
        maximum: float,
        spent: float,
        now: float,
        model: str | None = None,
    ) -> BudgetExceeded:
        # Latched: from now on every call in every branch is refused (so no
        # call starts after any branch saw BudgetExceeded).
        self.exceeded = BudgetExceeded(
            limit, maximum, spent, self.usage(now), model=model
        )
        return self.exceeded


# Old paths of names that live elsewhere now; they warn.
_MOVED: dict[str, str] = {
    "RunUsage": "pipeline:RunUsage",
}

if not TYPE_CHECKING:  # type checkers refuse the old paths
    __getattr__ = moved(__name__, _MOVED)
