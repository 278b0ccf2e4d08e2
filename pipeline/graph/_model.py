"""Graph values: the END marker and a graph's limits."""

from __future__ import annotations

from typing import Final, final

import attrs


END: Final = "__end__"
"""Route target that ends the run."""

DEFAULT_MAX_STEPS: Final = 1000
DEFAULT_MAX_FANOUT: Final = 10_000
DEFAULT_CONCURRENCY: Final = 16


@final
@attrs.frozen
class GraphLimits:
    """Finite limits, checked before the work they guard starts.

    *max_steps* bounds a thread's transitions, counted from its start (a
    resumed run continues the count; a fan-out counts as one),
    *max_fanout* the branches of one fan-out, and *concurrency* how many
    branches run at once (a fixed pool of workers takes them in order).

    .. versionadded:: 0.1.0
    """

    max_steps: int = DEFAULT_MAX_STEPS
    max_fanout: int = DEFAULT_MAX_FANOUT
    concurrency: int = DEFAULT_CONCURRENCY

    def __attrs_post_init__(self) -> None:
        for name in ("max_steps", "max_fanout", "concurrency"):
            value = getattr(self, name)
            if type(value) is not int:  # not a bool, a float or a str
                msg = (
                    f"GraphLimits.{name} must be an int, "
                    f"not {type(value).__name__}"
                )
                raise TypeError(msg)
            if value < 1:
                msg = f"GraphLimits.{name} must be at least 1"
                raise ValueError(msg)
