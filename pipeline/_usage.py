"""What a run spent: the record budgets keep and failures report."""

from __future__ import annotations

from typing import final

import attrs


@final
@attrs.frozen(kw_only=True)
class RunUsage:
    """What a run spent: tokens, cost, calls and elapsed seconds.

    *repairs* counts what the model was asked to fix: each re-ask after a
    final answer that did not decode or was refused (by a validator or an
    output guardrail), and each tool call it sent to an unknown tool or
    with arguments that did not decode (a :class:`~pipeline.Budget`
    bounds them with its *repairs*).

    .. versionadded:: 0.1.0
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    model_calls: int = 0
    tool_calls: int = 0
    elapsed: float = 0.0
    repairs: int = 0

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens
