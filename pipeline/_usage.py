"""What a run spent: the record budgets keep and failures report."""

from __future__ import annotations

from typing import final

import attrs


@final
@attrs.frozen(kw_only=True)
class RunUsage:
    """What a run spent: tokens, cost, calls and elapsed seconds.

    .. versionadded:: 0.1.0
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    model_calls: int = 0
    tool_calls: int = 0
    elapsed: float = 0.0

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens
