"""Lengths of time given as arguments: checked where they are given."""

from __future__ import annotations

from .errors import ConstructionError


def positive_seconds(value: object, name: str) -> float:
    """*value*, a number of seconds above 0 (``math.inf`` allowed), as a
    float; else :class:`~pipeline.errors.ConstructionError` naming *name*
    (never showing the value: only its type, when it is not a number)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        msg = (
            f"{name} must be a number of seconds, not a {type(value).__name__}"
        )
        raise ConstructionError(msg)
    if not value > 0:  # also NaN
        msg = f"{name} must be more than 0 seconds"
        raise ConstructionError(msg)
    return float(value)
