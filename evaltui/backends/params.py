"""A request's generation parameters: the model's generation_kwargs, a dataset's settings over them,
the tokens a request may generate, and each epoch's seed."""

from __future__ import annotations

from typing import Any

#: A dataset's request settings over a model's generation_kwargs, in their words (stop, max_new_tokens, temperature).
Settings = dict[str, Any]


def merged(kwargs: dict[str, Any], settings: Settings | None) -> dict[str, Any]:
    """generation_kwargs with a dataset's settings over them (the model's own when it has none)."""
    return {**kwargs, **settings} if settings else kwargs


def max_new_tokens(kwargs: dict[str, Any]) -> int:
    """The tokens a request may generate, as the plan's generation_kwargs say (1024 if silent)."""
    value = kwargs.get("max_new_tokens", kwargs.get("max_tokens", 1024))
    return value if isinstance(value, int) and not isinstance(value, bool) else 1024


def epoch_seed(kwargs: dict[str, Any], epoch: int) -> int:
    """The seed of epoch ≥ 1: generation_kwargs' own `seed` (0 if none) plus the epoch, so each
    epoch samples differently and a re-run of the same epoch samples alike."""
    base = kwargs.get("seed", 0)
    return (base if isinstance(base, int) and not isinstance(base, bool) else 0) + epoch
