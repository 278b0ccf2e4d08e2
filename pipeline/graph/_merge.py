"""Merging fan-out branch states: independent of completion order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar, cast

import attrs

from pyrsistent import PVector
from returns.result import Failure, Result, Success

from .._context import Context, context_extends, merge_branches
from .._fields import starts_with
from ..failures import MergeConflict
from ._edges import Reducer


S = TypeVar("S")


def merge_states(
    base: S,
    outs: tuple[S, ...],
    names: Sequence[str],
    reducers: Mapping[str, Reducer],
) -> Result[S, MergeConflict]:
    """Merge fan-out branch states; the result ignores completion order.

    A field changed by one branch takes its value.  A field changed by
    several is merged only where merging means something: persistent
    vectors they all extended (every branch's additions, in definition
    order), contexts (as ``must()`` merges them), or a *reducers* entry.
    Anything else is a :class:`~pipeline.failures.MergeConflict`, equal values
    included: two branches that each added one to a counter both changed
    it, and taking either value would lose the other's increment.

    .. versionadded:: 0.1.0
    """
    if isinstance(base, Context):
        contexts = cast("tuple[Context, ...]", outs)
        rewrote = tuple(
            str(names[i])
            for i, out in enumerate(contexts)
            if not context_extends(base, out)
        )
        if rewrote:
            # A branch that edited or dropped earlier messages: no merge
            # can keep both its history and the others'.
            return Failure(MergeConflict("messages", rewrote))
        return Success(cast("S", merge_branches(base, contexts)))
    if not attrs.has(type(base)):
        changed = [(i, o) for i, o in enumerate(outs) if o != base]
        if not changed:
            return Success(base)
        if len(changed) == 1:
            return Success(changed[0][1])
        return Failure(
            MergeConflict("<state>", tuple(names[i] for i, _ in changed))
        )
    updates: dict[str, Any] = {}
    for field in attrs.fields(cast("type[Any]", type(base))):
        before = getattr(base, field.name)
        changed_values = []
        for i, out in enumerate(outs):
            value = getattr(out, field.name)
            if value is not before and value != before:
                changed_values.append((i, value))
        if not changed_values:
            continue
        values = tuple(v for _, v in changed_values)
        if field.name in reducers:
            merged = reducers[field.name](before, values)
        elif len(changed_values) == 1:
            merged = values[0]
        elif isinstance(before, PVector) and all(
            isinstance(v, PVector) and starts_with(before, v) for v in values
        ):
            merged = before.extend(
                item for v in values for item in v[len(before) :]
            )
        elif isinstance(before, Context) and all(
            isinstance(v, Context) and context_extends(before, v)
            for v in values
        ):
            merged = merge_branches(before, values)
        else:
            culprits = tuple(str(names[i]) for i, _ in changed_values)
            return Failure(MergeConflict(field.name, culprits))
        updates[field.alias or field.name] = merged
    if not updates:
        return Success(base)
    return Success(cast("S", attrs.evolve(cast("Any", base), **updates)))
