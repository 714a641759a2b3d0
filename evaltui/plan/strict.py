"""What every table of the plan shares: strict, frozen pydantic models, and the bounds of times."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

HOUR, DAY = 3600.0, 86400.0  # upper bounds: a typo like 1e300 is an error, not an overflow hours later


class Strict(BaseModel):
    """Unknown keys are errors, values are not coerced, a plan once read does not change."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)


def private(model: BaseModel) -> dict[str, Any]:
    """A model's private attributes, read as the slot they live in: `model._x` goes through
    pydantic's __getattr__ (an AttributeError raised and caught, ~2.5 µs a read), and a run asks
    the plan's indexes a dozen times for each of 10,000 datasets."""
    found = model.__pydantic_private__
    assert found is not None  # a model that declares private attributes
    return found


def without_later(data: dict[str, Any], later: dict[str, Any]) -> dict[str, Any]:
    """`data` without the keys added later that are still at their defaults (so old fingerprints hold)."""
    out = dict(data)
    for k, default in later.items():  # (the few later keys looked up, not every key compared: 10,000 datasets' worth at a run's end)
        if k in out and out[k] == default:
            del out[k]
    return out
