"""A model's `price`: what a million of its prompt and completion tokens cost (engine/run/cost.py
counts what a run's tokens cost with it; `[run] cost_limit` stops a run at a spend)."""

from __future__ import annotations

from pydantic import Field

from evaltui.plan.strict import Strict


class Price(Strict):
    """Per million tokens, in your currency (the costs shown are in it)."""

    input: float = Field(0.0, ge=0, le=1e9)  # a million prompt tokens
    output: float = Field(0.0, ge=0, le=1e9)  # a million completion tokens

    def of(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input + completion_tokens * self.output) / 1e6
