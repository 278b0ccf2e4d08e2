"""``import pipeline`` loads its names lazily (a module ``__getattr__`` at
run time), yet type checkers see each one's exact type, and no others."""

# pyright: reportUnnecessaryTypeIgnoreComment=error

from __future__ import annotations

from typing import assert_type

import pipeline

from pipeline import Budget, Context, Secret, failures
from pipeline._context import Context as DefinedContext
from pipeline.budgets import Budget as DefinedBudget
from pipeline.failures import BudgetExceeded


assert_type(Context(), DefinedContext)
assert_type(pipeline.Context, type[DefinedContext])
assert_type(Budget(tokens=10), DefinedBudget)
assert_type(pipeline.Budget(tokens=10), DefinedBudget)
assert_type(Secret("v", ref="r").reveal(), str)
assert_type(pipeline.Secret("v", ref="r"), Secret[str])
assert_type(failures.BudgetExceeded, type[BudgetExceeded])
assert_type(pipeline.errors.InvalidAnswer, type[pipeline.errors.InvalidAnswer])
assert_type(pipeline.__version__, str)

pipeline.Contxt  # type: ignore[attr-defined]  # a typo is an error
from pipeline import Budjet  # type: ignore[attr-defined]  # noqa: E402, F401
