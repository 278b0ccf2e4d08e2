"""Fallback models: the next model is called only after the one before failed.

``fallback(primary, backup)`` is a :class:`~pipeline.models.Model` like any
other (give it to an :class:`~pipeline.Agent`).  Unlike racing two handlers
with ``|``, which calls both and pays for both, the backup is called only
when the primary failed, so a budget counts only the calls made, each
under its own model name (and each has its own span when traced).

For handlers in general, see :func:`pipeline.or_else`.  (This module is
private: import from :mod:`pipeline.models`.)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeAlias, cast, final

import attrs

from returns.result import Failure, Result

from ..errors import ConstructionError
from ..failures import BudgetExceeded, ModelError
from ._types import DeltaSink, Model, ModelRequest, ModelResponse


__all__ = ("Fallback", "fallback")

Call: TypeAlias = Callable[
    [Model, ModelRequest, "DeltaSink | None"],
    Awaitable[Result[ModelResponse, ModelError | BudgetExceeded]],
]
"""How each model is called: directly, or through a scope (checked, traced
and counted there)."""


async def _direct(
    model: Model, request: ModelRequest, on_delta: DeltaSink | None
) -> Result[ModelResponse, ModelError | BudgetExceeded]:
    return await model.generate(request, on_delta=on_delta)


def _any(_: ModelError) -> bool:
    return True


@final
@attrs.frozen
class Fallback:
    """A model that calls *models* in order until one answers.

    Made by :func:`fallback`.  The next model is called only when the one
    before failed with a :class:`~pipeline.failures.ModelError` that *when*
    accepts; the failure returned is the last model's, its
    ``tried`` holding the earlier ones in
    order.  A call a budget refuses stops the chain with
    :class:`~pipeline.failures.BudgetExceeded`.

    .. versionadded:: 0.1.0
    """

    models: tuple[Model, ...]
    when: Callable[[ModelError], bool] = _any

    @property
    def name(self) -> str:
        """``fallback(a, b, ...)`` with each model's name."""
        return f"fallback({', '.join(m.name for m in self.models)})"

    async def generate(
        self, request: ModelRequest, *, on_delta: DeltaSink | None = None
    ) -> Result[ModelResponse, ModelError]:
        """Answer *request* with the first model that does."""
        answer = await self.each(request, on_delta, _direct)
        return cast("Result[ModelResponse, ModelError]", answer)

    async def each(
        self, request: ModelRequest, on_delta: DeltaSink | None, call: Call
    ) -> Result[ModelResponse, ModelError | BudgetExceeded]:
        """Call each model with *call* until one answers (a scope passes
        its own, so that each call is checked, traced and counted)."""
        tried: list[ModelError] = []
        when = self.when
        last = len(self.models) - 1
        for i, model in enumerate(self.models):
            answer = await call(model, request, on_delta)
            if type(answer) is not Failure:
                return answer
            err = answer.failure()
            if type(err) is not ModelError:
                # A budget refused the call: the chain stops there.
                return answer
            if i == last or not when(err):
                return Failure(attrs.evolve(err, tried=(*tried, *err.tried)))
            tried.append(err)
        raise AssertionError  # pragma: no cover  # at least one model


def fallback(
    *models: Model, when: Callable[[ModelError], bool] | None = None
) -> Fallback:
    """A model that calls *models* in order, the next only after a failure.

    By default any :class:`~pipeline.failures.ModelError` moves on to the
    next model; *when* chooses which do (e.g. ``when=lambda e: e.status in
    (429, 500, 502, 503, 529)``, so a refused request is not sent again).
    A response is never mixed from two models: with streaming, the deltas
    of a failed attempt have been sent already, and the next attempt's
    follow.

    .. versionadded:: 0.1.0
    """
    if not models:
        msg = "fallback() needs at least one model"
        raise ConstructionError(msg)
    for i, m in enumerate(models):
        if not callable(getattr(m, "generate", None)):
            msg = (
                f"fallback(): argument {i} is of type {type(m).__name__}, "
                "not a model (no generate method)"
            )
            raise ConstructionError(msg)
    return Fallback(tuple(models), when or _any)
