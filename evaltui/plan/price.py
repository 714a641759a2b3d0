"""A model's `price`: what a million of its prompt and completion tokens cost; and `CostMeter`,
what a run's tokens cost at the models' prices, which `[run] cost_limit` stops a run at."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field

from evaltui.plan.strict import Strict

if TYPE_CHECKING:
    from evaltui.plan.schema import Plan


class Price(Strict):
    """Per million tokens, in your currency (the costs shown are in it)."""

    input: float = Field(0.0, ge=0, le=1e9)  # a million prompt tokens
    output: float = Field(0.0, ge=0, le=1e9)  # a million completion tokens

    def of(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input + completion_tokens * self.output) / 1e6

# -- what a run's tokens cost: each priced model's tokens (as its servers counted them, in the
# replies' usage), per dataset, times the model's price; and `[run] cost_limit`, past which no
# new request is sent (the ones out finish; a re-run continues, with a limit of its own), as
# Inspect AI's cost limit stops a run. One meter per session, shared by the models' worker pools
# (the limit is the run's, over every model); the pools feed it each answered unit's usage (a
# priced model's units are traced for it, whatever sample_log says) and read it before each
# unit they send. Only what servers report is counted: a reply without usage costs nothing.


def said_cost(value: float) -> str:
    """A cost as the strip and the lines show it: four decimals under 1, two above."""
    return f"{value:.4f}" if value < 1 else f"{value:,.2f}"


class CostMeter:
    def __init__(self, plan: Plan) -> None:
        self.limit = plan.run.cost_limit
        self.prices: dict[str, Price] = {m.abbr: m.price for m in plan.models if m.price is not None}
        self.tokens: dict[tuple[str, str], list[int]] = {}  # (model, dataset) -> [prompt, completion], this run
        self.spent = 0.0
        self.said = False  # the stop was said (once for the run, not once per model)

    def priced(self, model: str) -> bool:
        return model in self.prices

    def add(self, model: str, dataset: str, usage: Any) -> None:
        """One unit's usage ({"prompt_tokens", "completion_tokens"}, or None) spent."""
        price = self.prices.get(model)
        if price is None or not isinstance(usage, dict):
            return
        prompt, completion = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
        counted = self.tokens.setdefault((model, dataset), [0, 0])
        counted[0] += prompt
        counted[1] += completion
        self.spent += price.of(prompt, completion)

    def reached(self) -> bool:
        return self.limit > 0 and self.spent >= self.limit

    def why(self) -> str:
        return (f"stopped: this run's cost reached cost_limit = {said_cost(self.limit)} ({said_cost(self.spent)} spent); "
                "no new request was sent, a re-run continues")

    def usage(self, model: str) -> tuple[tuple[str, int, int, float], ...]:
        """(dataset, prompt tokens, completion tokens, their cost) of a priced `model` so far in this run."""
        price = self.prices.get(model)
        return () if price is None else tuple((d, p, c, price.of(p, c)) for (m, d), (p, c) in self.tokens.items() if m == model)

    def cost(self, model: str) -> float | None:
        """What `model`'s tokens cost so far in this run; None when it has no price."""
        return sum(x[3] for x in self.usage(model)) if model in self.prices else None
